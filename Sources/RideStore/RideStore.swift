import RideCore

/// The durable journal of rides behind the server. A ride *is* its list of transitions; the
/// store keeps that list and derives the state with `Ride.replay`, never a counted-up copy.
///
/// Not `Sendable` on purpose: one store is owned by one thread (the server's service thread),
/// which calls it synchronously and serializes every call. Each mutating call is one
/// transaction: when it returns, the transition (and the reply recorded with it) is durable;
/// when it throws, nothing of it was written.
public protocol RideStore: AnyObject {
    /// Records a new ride: its row and its `start` transition at `startedAt`, plus `reply`
    /// (if given) in the same transaction. Throws `.conflict` if a ride with this id exists
    /// or `reply.key` is already recorded.
    @discardableResult
    func create(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis,
                reply: ReplyRecord?) throws(StoreError) -> StoredRide

    /// Appends a transition to a ride's journal, plus `reply` (if given) in the same
    /// transaction. Throws `.notFound` for an unknown ride, `.conflict` if the transition does
    /// not apply to the ride's current state (e.g. a second `end`, or a `start`) or `reply.key`
    /// is already recorded. Returns the ride as replayed after the append.
    @discardableResult
    func append(ride id: String, _ transition: RideTransition, reply: ReplyRecord?) throws(StoreError) -> StoredRide

    /// Every ride that has not ended, ordered by id (crash recovery loads these at start).
    func openRides() throws(StoreError) -> [StoredRide]

    /// One ride by id, in any state; nil if unknown.
    func ride(_ id: String) throws(StoreError) -> StoredRide?

    /// At most `limit` rides of a listing, in `page`'s keyset order (see `RidePage`).
    func rides(_ page: RidePage, limit: Int) throws(StoreError) -> [StoredRide]

    /// The reply bytes recorded for a control request, if still kept (see `prune`).
    func reply(for key: ReplyKey) throws(StoreError) -> [UInt8]?

    /// Forgets replies recorded before `instant` (the server passes now − 24 h). Rides are
    /// never pruned: ended rides keep their receipts.
    func prune(repliesBefore instant: UnixMillis) throws(StoreError)

    /// Releases the file (later calls throw `.unavailable`). Safe to call twice.
    func close()
}

/// Identifies one control request for exactly-once handling: the rider (token `sub`, or ""
/// when auth is off) and the client's request `id`.
public struct ReplyKey: Sendable, Hashable, CustomStringConvertible {
    public let scope: String
    public let id: String
    public init(scope: String, id: String) {
        self.scope = scope
        self.id = id
    }
    public var description: String { scope.isEmpty ? "request \(id)" : "request \(id) of \(scope)" }
}

/// The exact reply sent for a request, recorded with the transition it answered so a retry
/// gets the same bytes back. `at` is when it was recorded (what `prune` compares against).
public struct ReplyRecord: Sendable, Equatable {
    public let key: ReplyKey
    public let bytes: [UInt8]
    public let at: UnixMillis
    public init(key: ReplyKey, bytes: [UInt8], at: UnixMillis) {
        self.key = key
        self.bytes = bytes
        self.at = at
    }
}

/// A ride as stored: its journal and the state replayed from it. Loading validates the
/// replay, so `ride` is always consistent with `journal`.
public struct StoredRide: Sendable, Equatable {
    public let journal: [RideTransition]
    public let ride: Ride

    public var id: String { ride.id }
    public var planID: String { ride.planID }
    public var owner: String? { ride.owner }
    public var limit: Int64? { ride.limit }

    /// Replays `journal`; nil when it is not a valid ride (no leading start, or a transition
    /// that does not apply), which a store reports as corruption.
    init?(id: String, planID: String, owner: String?, limit: Int64?, journal: [RideTransition]) {
        guard case .success(let ride)? = Ride.replay(id: id, planID: planID, owner: owner, limit: limit, journal: journal)
        else { return nil }
        self.journal = journal
        self.ride = ride
    }

    private init(journal: [RideTransition], ride: Ride) {
        self.journal = journal
        self.ride = ride
    }

    /// The ride after `transition`, or why the store must refuse it. Both stores use this so
    /// they accept and refuse exactly the same appends.
    func appending(_ transition: RideTransition) -> Result<StoredRide, StoreError> {
        if case .start = transition {
            return .failure(StoreError(.conflict, "ride \(id) has already started; a start cannot be appended"))
        }
        switch ride.applying(transition) {
        case .success(let next): return .success(StoredRide(journal: journal + [transition], ride: next))
        case .failure(let e): return .failure(StoreError(.conflict, "ride \(id): \(e)"))
        }
    }
}

public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Cannot read or write now (unwritable path, disk full, I/O error, locked, closed).
        /// The server answers the one request with `error` code `unavailable`.
        case unavailable
        /// The file is not a RidePush store or its content is damaged.
        case corrupt
        /// The file was written by a newer RidePush; this one refuses to touch it.
        case newerSchema = "newer_schema"
        /// The id (ride or reply key) already exists, or the transition does not apply.
        case conflict
        /// No ride with that id.
        case notFound = "not_found"
    }

    public let kind: Kind
    /// Human-readable; for file problems it names the path.
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
