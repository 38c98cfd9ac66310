import CLibWebSockets
import RideCore
import RideStore
import Synchronization

/// What a request produced: the reply for the requester, and a state message to push to the
/// ride's other subscribers (on every thread) when it changed a ride.
struct Outcome {
    var reply: [UInt8]
    var push: (live: LiveRide, frame: [UInt8])?
}

/// Every ride the process knows, shared by all service threads. Each change is written to the
/// store before it is applied in memory and before anyone is told, under one lock, so the
/// store sees transitions in the order subscribers do.
final class RideRegistry: @unchecked Sendable {  // all mutable state sits in `state`, behind the Mutex
    struct State {
        var rides: [String: LiveRide] = [:]
        /// Rides that tick (not ended), compact for the per-second loop.
        var live: [LiveRide] = []
        /// Ended rides, oldest first, so memory stays bounded (the store keeps them all).
        var endedOrder: [String] = []
        var rng = SystemRandomNumberGenerator()
    }

    let store: RideStore
    let plans: [String: FarePlan]
    /// The same plans, boxed once for the rides to share.
    private let boxes: [String: PlanBox]
    private let fallbackBox = PlanBox(.standard)
    let defaultPlan: FarePlan
    let shards: Int
    let clock: RideClock
    let metrics: Metrics
    /// The operator feed, told of every transition and tick under the lock (OpsFeed.swift).
    let ops: OpsFeed?
    private let state = Mutex(State())
    static let keptEndedRides = 10_000
    let pre = Int(clws_pre())

    init(store: RideStore, plans: [FarePlan], shards: Int, clock: RideClock, metrics: Metrics, ops: OpsFeed? = nil) throws(ServerError) {
        self.store = store
        self.ops = ops
        var byID: [String: FarePlan] = [:]
        for p in plans { byID[p.id] = p }
        self.plans = byID
        boxes = byID.mapValues(PlanBox.init)
        defaultPlan = byID["default"] ?? plans.first ?? .standard
        self.shards = shards
        self.clock = clock
        self.metrics = metrics
        let open: [StoredRide]
        do { open = try store.openRides() } catch { throw ServerError("cannot load rides: \(error.message)") }
        state.withLock { s in
            for stored in open {
                let live = LiveRide(ride: stored.ride, plan: box(stored.planID), shards: shards)
                s.rides[live.id] = live
                live.liveIndex = s.live.count
                s.live.append(live)
            }
        }
    }

    var counts: (riding: Int, paused: Int, ended: Int) {
        state.withLock { s in
            var r = 0, p = 0
            for l in s.live { if l.ride.state == .paused { p += 1 } else { r += 1 } }
            return (r, p, s.rides.count - s.live.count)
        }
    }

    /// A ride's plan; one no longer loaded bills as the built-in default rather than not at all.
    private func box(_ id: String) -> PlanBox { boxes[id] ?? fallbackBox }

    func plan(_ id: String?) -> FarePlan? { id.map { plans[$0] } ?? defaultPlan }

    // MARK: requests (any service thread)

    /// A ride by id, loading an ended one from the store if it is not in memory.
    func find(_ id: String) -> Result<LiveRide, ProtocolError> {
        state.withLock { s in lookup(id, &s) }
    }

    private func lookup(_ id: String, _ s: inout State) -> Result<LiveRide, ProtocolError> {
        if let l = s.rides[id] { return .success(l) }
        do throws(StoreError) {
            guard let stored = try store.ride(id) else { return .failure(ProtocolError(.rideNotFound, "no ride \"\(id)\"")) }
            let live = LiveRide(ride: stored.ride, plan: box(stored.planID), shards: shards)
            s.rides[id] = live
            if stored.ride.state == .ended { remember(ended: id, &s) }
            return .success(live)
        } catch {
            return .failure(ProtocolError(.unavailable, "ride storage is unavailable: \(error.message)"))
        }
    }

    func snapshot(_ live: LiveRide) -> Ride { state.withLock { _ in live.ride } }

    /// Runs `body` under the lock with every ride and the store (the operator views).
    func inspect<T>(_ body: (RegistryView) -> T) -> T {
        state.withLock { s in body(RegistryView(live: s.live, rides: s.rides, store: store)) }
    }

    /// `start`: records the ride, then answers with its state.
    func start(id: String?, rideID: String?, planID: String?, limit: Int64?, owner: String?, scope: String) -> Outcome {
        state.withLock { s in
            if let key = replyKey(id, scope), let again = replayed(key) { return again }
            guard let plan = plans[planID ?? defaultPlan.id] else {
                return fail(ProtocolError(.planNotFound, "no plan \"\(planID ?? "")\"", id: id), "start")
            }
            let rid = rideID ?? newRideID(&s)
            if s.rides[rid] != nil { return fail(ProtocolError(.conflict, "ride \"\(rid)\" already exists", id: id), "start") }
            let at = clock.now()
            let effectiveLimit = [limit, plan.maxRideSeconds].compactMap { $0 }.min()
            let ride = Ride(id: rid, planID: plan.id, owner: owner, limit: effectiveLimit, startedAt: at)
            let reply = ServerMessages.state(ride: ride, plan: plan, at: at, id: id, prefix: pre)
            do throws(StoreError) {
                try store.create(id: rid, planID: plan.id, owner: owner, limit: effectiveLimit, startedAt: at,
                                 reply: record(id, scope, reply, at))
            } catch {
                if error.kind == .conflict { return fail(ProtocolError(.conflict, "ride \"\(rid)\" already exists", id: id), "start") }
                return fail(ProtocolError(.unavailable, "could not record the ride: \(error.message)", id: id), "start")
            }
            let live = LiveRide(ride: ride, plan: box(plan.id), shards: shards)
            s.rides[rid] = live
            live.liveIndex = s.live.count
            s.live.append(live)
            ops?.transition("start", ride, plan, at: at, watchers: 0)
            metrics.control("start", "ok")
            return Outcome(reply: reply, push: nil)
        }
    }

    /// `pause`, `resume`, `end`: the state machine decides, the store records, then replies.
    /// `allowed` checks the caller may act on this ride (ownership), inside the lock.
    func control(_ cmd: RideCommand, rideID: String, metres: Int64?, id: String?, scope: String,
                 allowed: (Ride) -> ProtocolError?) -> Outcome {
        state.withLock { s in
            if let key = replyKey(id, scope), let again = replayed(key) { return again }
            let live: LiveRide
            switch lookup(rideID, &s) {
            case .success(let l): live = l
            case .failure(var e): e.id = id; return fail(e, cmd.rawValue)
            }
            if var e = allowed(live.ride) { e.id = id; return fail(e, cmd.rawValue) }
            let at = clock.now()
            let tr: RideTransition
            switch live.ride.transition(for: cmd, at: at, metres: metres ?? 0) {
            case .success(let t): tr = t
            case .failure(let e): return fail(ProtocolError(.invalidTransition, e.description, id: id), cmd.rawValue)
            }
            guard case .success(let next) = live.ride.applying(tr) else {
                return fail(ProtocolError(.invalidTransition, "transition not allowed", id: id), cmd.rawValue)
            }
            let reply = ServerMessages.state(ride: next, plan: live.plan, at: at, id: id, prefix: pre)
            do throws(StoreError) {
                try store.append(ride: rideID, tr, reply: record(id, scope, reply, at))
            } catch {
                return fail(ProtocolError(.unavailable, "could not record the \(cmd.rawValue): \(error.message)", id: id), cmd.rawValue)
            }
            apply(next, to: live, &s)
            ops?.transition(cmd.rawValue, next, live.plan, at: tr.at, watchers: live.watchers.load(ordering: .relaxed))
            metrics.control(cmd.rawValue, "ok")
            let push = ServerMessages.state(ride: next, plan: live.plan, at: at, id: nil, prefix: pre)
            return Outcome(reply: reply, push: (live, push))
        }
    }

    private func apply(_ next: Ride, to live: LiveRide, _ s: inout State) {
        live.ride = next
        if next.state == .ended, live.liveIndex >= 0 {
            let i = live.liveIndex
            let last = s.live.removeLast()
            if i < s.live.count {
                s.live[i] = last
                last.liveIndex = i
            }
            live.liveIndex = -1
            remember(ended: live.id, &s)
        }
    }

    private func remember(ended id: String, _ s: inout State) {
        s.endedOrder.append(id)
        if s.endedOrder.count > Self.keptEndedRides * 2 {
            // Forget the oldest ended rides nobody watches here; the store still has them.
            var kept: [String] = []
            for (n, rid) in s.endedOrder.enumerated() {
                guard let l = s.rides[rid] else { continue }
                if n < Self.keptEndedRides, l.slots.allSatisfy({ $0.subscribers.isEmpty }) {
                    s.rides[rid] = nil
                } else {
                    kept.append(rid)
                }
            }
            s.endedOrder = kept
        }
    }

    // MARK: the tick (timer thread)

    /// Ends rides whose limits passed, warns those near their limit, and encodes one tick
    /// per ticking ride. Returns the batch and the pushes (ends, warnings) to fan out first.
    func tick(seq: Int64, at: UnixMillis) -> (TickBatch, [(LiveRide, [UInt8])]) {
        state.withLock { s in
            var pushes: [(LiveRide, [UInt8])] = []
            var i = 0
            while i < s.live.count {
                let live = s.live[i]
                if let tr = live.ride.dueAutoEnd(at: at, maxPauseSeconds: live.plan.maxPauseSeconds),
                   case .success(let next) = live.ride.applying(tr) {
                    do throws(StoreError) {
                        try store.append(ride: live.id, tr, reply: nil)
                        apply(next, to: live, &s)
                        ops?.transition("end", next, live.plan, at: tr.at, watchers: live.watchers.load(ordering: .relaxed))
                        metrics.control("end", tr.kind == "end" ? "auto" : "ok")
                        pushes.append((live, ServerMessages.state(ride: next, plan: live.plan, at: at, id: nil, prefix: pre)))
                        continue  // the last ride moved into slot i
                    } catch {
                        clws_log_err("auto-end of ride \(live.id) not recorded, retrying next tick: \(error.message)")
                    }
                }
                if let remaining = live.ride.remainingSeconds(at: at), live.ride.state == .riding {
                    // The nearest threshold first: a ride that starts (or is first seen) with a
                    // minute or less left gets the 1-minute warning alone, not a "5 minutes"
                    // warning followed by the 1-minute one a second later.
                    for threshold: Int64 in [60, 300] where remaining <= threshold && remaining > 0 && !live.warned.contains(threshold) {
                        live.warned.insert(threshold)
                        if threshold == 60 { live.warned.insert(300) }
                        pushes.append((live, ServerMessages.warning(ride: live.id, remaining: remaining, prefix: pre)))
                        ops?.warning(ride: live.id, remaining: remaining, at: at)
                        break
                    }
                }
                i += 1
            }
            var frames: [(live: LiveRide, frame: [UInt8])] = []
            frames.reserveCapacity(s.live.count)
            for live in s.live {
                var f: [UInt8] = []
                f.reserveCapacity(pre + 192)
                ServerMessages.tick(into: &f, ride: live.ride, plan: live.plan, seq: seq, at: at, prefix: pre)
                frames.append((live, f))
            }
            ops?.tick(seq: seq, at: at, live: s.live, ended: s.rides.count - s.live.count)
            return (TickBatch(seq: seq, at: at, rides: frames), pushes)
        }
    }

    // MARK: helpers

    private func replyKey(_ id: String?, _ scope: String) -> ReplyKey? {
        id.map { ReplyKey(scope: scope, id: $0) }
    }

    private func record(_ id: String?, _ scope: String, _ reply: [UInt8], _ at: UnixMillis) -> ReplyRecord? {
        // Stored without the LWS_PRE room, which is a property of this build, not of the reply.
        id.map { ReplyRecord(key: ReplyKey(scope: scope, id: $0), bytes: Array(reply[pre...]), at: at) }
    }

    /// The reply already sent for this request id, if it was applied before. When the store
    /// cannot tell, say so: answering as if never applied would give a misleading conflict.
    private func replayed(_ key: ReplyKey) -> Outcome? {
        let found: [UInt8]?
        do throws(StoreError) { found = try store.reply(for: key) } catch {
            return fail(ProtocolError(.unavailable, "could not read earlier replies: \(error.message)", id: key.id), "retry")
        }
        guard let bytes = found else { return nil }
        metrics.control("retry", "replayed")
        return Outcome(reply: [UInt8](repeating: 0, count: pre) + bytes, push: nil)
    }

    private func fail(_ e: ProtocolError, _ type: String) -> Outcome {
        metrics.control(type, e.code.rawValue)
        return Outcome(reply: ServerMessages.error(e, prefix: pre), push: nil)
    }

    private func newRideID(_ s: inout State) -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)
        while true {
            var id = "r-"
            for _ in 0..<10 { id.unicodeScalars.append(Unicode.Scalar(alphabet[Int(s.rng.next() % UInt64(alphabet.count))])) }
            if s.rides[id] == nil { return id }
        }
    }

    func pruneReplies() {
        state.withLock { _ in try? store.prune(repliesBefore: clock.now() - 24 * 3600 * 1000) }
    }
}
