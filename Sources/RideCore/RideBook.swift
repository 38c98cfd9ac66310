/// The decisions about rides, without I/O: given the rides it knows and a request, the book
/// returns what to do (the ride's new state, the journal entry to persist, the reply, whether
/// to push) and touches no store, socket or lock. The server runs one book on its store
/// worker thread, deciding a group of requests against the state their commit will produce,
/// then `settle`s the group once the store has answered.
public struct RideBook {
    /// A ride as the book knows it: its state and the number of its last journal entry.
    public struct Entry: Sendable, Equatable {
        public var ride: Ride
        public var seq: Int64
        public init(ride: Ride, seq: Int64) {
            self.ride = ride
            self.seq = seq
        }
    }

    /// What a client (or the tick) asks.
    public enum Request: Sendable, Equatable {
        case start(ride: String?, plan: String?, limit: Int64?, owner: String?)
        case command(RideCommand, ride: String, metres: Int64?)
        /// A limit passed (noticed at the tick at `at`): end the ride if it is still due,
        /// billing `metres` (the ride's trace, issue 28).
        case autoEnd(ride: String, at: UnixMillis, metres: Int64 = 0)

        /// What was asked, recorded with the reply so a reused request id that asks something
        /// else is told `conflict` rather than given another request's answer.
        public var fingerprint: String {
            switch self {
            case .start(let ride, _, _, _): return ride.map { "start \($0)" } ?? "start"
            case .command(let c, let ride, _): return "\(c.rawValue) \(ride)"
            case .autoEnd(let ride, _, _): return "auto-end \(ride)"
            }
        }

        public var rideID: String? {
            switch self {
            case .start(let ride, _, _, _): return ride
            case .command(_, let ride, _), .autoEnd(let ride, _, _): return ride
            }
        }
    }

    /// A reply recorded for an earlier request with the same id.
    public struct Earlier: Sendable, Equatable {
        public let request: String?
        public let bytes: [UInt8]
        public init(request: String?, bytes: [UInt8]) {
            self.request = request
            self.bytes = bytes
        }
    }

    public enum RefusalCode: String, Sendable, Equatable {
        case rideNotFound, conflict, invalidTransition, planNotFound, forbidden, tooManyTransitions
    }

    public struct Refusal: Sendable, Equatable {
        public let code: RefusalCode
        public let message: String
        public init(_ code: RefusalCode, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    /// A change to persist: journal entry `seq` of `after.ride` (seq 1: a new ride).
    public struct Change: Sendable, Equatable {
        public let transition: RideTransition
        public let after: Entry
        public let plan: FarePlan
        public var seq: Int64 { after.seq }
        public var isStart: Bool { seq == 1 }
    }

    public enum Decision: Sendable, Equatable {
        /// Persist `change`; once committed reply with the new state (and, unless it is a
        /// start, push it to the ride's other subscribers).
        case change(Change)
        /// Answer with an error; nothing changes.
        case refuse(Refusal)
        /// A retry of a request already applied: answer with the bytes sent the first time.
        case replay([UInt8])
        /// Nothing to do (an auto-end that is no longer due).
        case nothing
    }

    public let plans: [String: FarePlan]
    public let defaultPlan: FarePlan
    /// Journal entries one ride may have; past it only `end` is accepted (a ride paused and
    /// resumed every minute for three months stays well within it).
    public let maxEntries: Int64
    private(set) public var rides = Rides()
    /// Each ride as it was before the group being decided changed it (nil: not known before).
    private var before: [String: Entry?] = [:]
    private var rng: any RandomNumberGenerator

    public init(plans: [FarePlan], maxEntries: Int64 = 250_000,
                rng: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        var byID: [String: FarePlan] = [:]
        for p in plans { byID[p.id] = p }
        self.plans = byID
        defaultPlan = FarePlan.defaultPlan(of: plans)
        self.maxEntries = maxEntries
        self.rng = rng
    }

    /// A loaded ride's plan; one no longer configured bills as the built-in default.
    public func plan(for ride: Ride) -> FarePlan { plans[ride.planID] ?? .standard }

    /// Whether the book knows the ride (the caller loads unknown ones from the store first).
    public func knows(_ id: String) -> Bool { rides.contains(id) }

    /// Adds a ride read from the store (at start, or an ended one asked about again).
    public mutating func learn(_ entry: Entry) {
        if !rides.contains(entry.ride.id) { rides[entry.ride.id] = entry }
    }

    /// Puts the store's copy of a ride in place of the book's (after the store refused a write
    /// the book expected to succeed: another writer got there first).
    public mutating func replace(_ entry: Entry) {
        precondition(before.isEmpty, "replace between groups only")
        rides[entry.ride.id] = entry
    }

    /// Forgets a ride the server no longer needs in memory (an ended one nobody watches).
    public mutating func forget(_ id: String) {
        precondition(before.isEmpty, "forget between groups only")
        rides[id] = nil
    }

    /// Decides one request at `now`. `earlier` is the reply recorded for the request's id, if
    /// any; `authorize` says whether the requester may act on an existing ride (ownership),
    /// and is asked before any earlier reply is replayed, so a retry reveals nothing to others.
    public mutating func decide(_ request: Request, now: UnixMillis, earlier: Earlier? = nil,
                                authorize: (Ride) -> Refusal? = { _ in nil },
                                endedBy: (Ride) -> EndReason = { _ in .rider }) -> Decision {
        switch request {
        case .start(let rideID, let planID, let limit, let owner):
            if let earlier { return again(earlier, request) }
            guard let plan = plans[planID ?? defaultPlan.id] else {
                return .refuse(Refusal(.planNotFound, "no plan \"\(planID ?? "")\""))
            }
            let id = rideID ?? newRideID()
            if rides.contains(id) { return .refuse(Refusal(.conflict, "ride \"\(id)\" already exists")) }
            let effectiveLimit = [limit, plan.maxRideSeconds].compactMap { $0 }.min()
            let ride = Ride(id: id, planID: plan.id, owner: owner, limit: effectiveLimit, startedAt: now)
            let after = Entry(ride: ride, seq: 1)
            record(after)
            return .change(Change(transition: .start(at: now), after: after, plan: plan))

        case .command(let command, let rideID, let metres):
            guard let entry = rides[rideID] else { return .refuse(Refusal(.rideNotFound, "no ride \"\(rideID)\"")) }
            if let refusal = authorize(entry.ride) { return .refuse(refusal) }
            if let earlier { return again(earlier, request) }
            if command != .end, entry.seq >= maxEntries - 1 {
                return .refuse(Refusal(.tooManyTransitions, "ride \"\(rideID)\" has recorded \(entry.seq) transitions, the most one ride may have; it can only be ended"))
            }
            switch entry.ride.step(command, at: now, metres: metres ?? 0, endedBy: endedBy(entry.ride)) {
            case .failure(let e): return .refuse(Refusal(.invalidTransition, e.description))
            case .success(let (tr, next)):
                let after = Entry(ride: next, seq: entry.seq + 1)
                record(after)
                return .change(Change(transition: tr, after: after, plan: plan(for: next)))
            }

        case .autoEnd(let rideID, let at, let metres):
            guard let entry = rides[rideID] else { return .nothing }
            let plan = plan(for: entry.ride)
            guard var tr = entry.ride.dueAutoEnd(at: at, maxPauseSeconds: plan.maxPauseSeconds) else { return .nothing }
            if case .end(let when, let reason, _) = tr { tr = .end(at: when, reason: reason, metres: metres) }
            guard case .success(let next) = entry.ride.applying(tr) else { return .nothing }
            let after = Entry(ride: next, seq: entry.seq + 1)
            record(after)
            return .change(Change(transition: tr, after: after, plan: plan))
        }
    }

    /// The group decided since the last `settle` has been committed, except the rides in
    /// `failed` (the store refused one of their writes, or the whole group failed): those go
    /// back to what they were before the group, and every later decision about them in the
    /// group is void too (the store refuses those writes, their numbers no longer follow).
    public mutating func settle(failed: Set<String> = []) {
        for id in failed {
            if let old = before[id] { rides[id] = old }
        }
        // A flood of starts (a ramp of clients, a restart) makes one group of thousands: the
        // capacity it took is not kept for the groups of a few that follow.
        if before.capacity > 256 { before = [:] } else { before.removeAll(keepingCapacity: true) }
    }

    /// Undoes the whole group (nothing of it was committed).
    public mutating func settleNoneCommitted() {
        settle(failed: Set(before.keys))
    }

    private mutating func record(_ after: Entry) {
        let id = after.ride.id
        if before[id] == nil { before[id] = .some(rides[id]) }
        rides[id] = after
    }

    private func again(_ earlier: Earlier, _ request: Request) -> Decision {
        if let asked = earlier.request, asked != request.fingerprint {
            return .refuse(Refusal(.conflict, "this request id was already used for \"\(asked)\"; send a new id for \"\(request.fingerprint)\""))
        }
        return .replay(earlier.bytes)
    }

    private mutating func newRideID() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)
        while true {
            var id = "r-"
            for _ in 0..<10 { id.unicodeScalars.append(Unicode.Scalar(alphabet[Int(rng.next() % UInt64(alphabet.count))])) }
            if !rides.contains(id) { return id }
        }
    }
}
