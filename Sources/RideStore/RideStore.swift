import RideCore

/// The durable journal of rides behind the server: the contract every store (SQLite, memory,
/// PostgreSQL) implements. A ride *is* its list of transitions, numbered 1, 2, 3… per ride
/// (1 = start); the store keeps that list and never a counted-up copy of anything.
///
/// Not `Sendable` on purpose: one store is driven by one thread, the store worker
/// (`StoreWorker`), which calls it synchronously. The server decides transitions in memory
/// (`RideBook`) and hands the store a group of writes at a time: `commit` is one transaction
/// for the whole group, so many requests share one fsync (or one network round trip).
public protocol RideStore: AnyObject {
    /// Writes `batch` in one transaction and returns one result per write, in order.
    ///
    /// A write the store refuses (a ride id that exists, an append whose `seq` is not the
    /// ride's next, a reused reply key, an unknown ride) is refused alone: `.refused(error)`,
    /// nothing of that write is kept, and the other writes of the batch still commit.
    ///
    /// Throws when the transaction as a whole did not commit:
    /// - `.unavailable`: known not applied (could not begin, disk full before commit, closed).
    ///   The caller answers every request of the batch `unavailable`; a retry may succeed.
    /// - `.commitFailed`: the fate of the transaction is unknown (an I/O or fsync error at
    ///   COMMIT). The caller must stop the process; recovery at restart reads what is durable.
    ///   (PostgreSQL's stance since 2018: an fsync failure is never retried.)
    func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult]

    /// Every ride that has not ended, ordered by id (crash recovery loads these at start).
    func openRides() throws(StoreError) -> [StoredRide]

    /// One ride by id, in any state; nil if unknown.
    func ride(_ id: String) throws(StoreError) -> StoredRide?

    /// At most `limit` rides of a listing, in `page`'s keyset order (see `RidePage`); with
    /// `rider`, only that rider's (the filter is in the query, so a page is still `limit` rows).
    func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide]

    /// The reply recorded for a control request, if still kept (see `prune`).
    func reply(for key: ReplyKey) throws(StoreError) -> StoredReply?

    /// The ride's last trace checkpoint (`StoreWrite.trace`), nil when none was written.
    func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint?

    /// Forgets replies recorded before `instant` (the server passes now − 24 h), in its own
    /// transaction. Rides are never pruned: ended rides keep their receipts until the operator
    /// asks for less (`purgeEnded`).
    func prune(repliesBefore instant: UnixMillis) throws(StoreError)

    /// Deletes at most `limit` rides that ended before `instant` (oldest end first) with their
    /// journal, trace checkpoint and given-up webhook deliveries, and at most `limit` replies
    /// recorded before `instant`, in its own transaction (`--retain-ended`, docs/retention.md).
    /// A ride still open, or ended at or after `instant`, is never touched; nor is a webhook
    /// delivery still owed. Idempotent: two nodes purging the same store delete each row once.
    /// A batch that deleted `limit` rides or replies may have left more (`PurgeCount.full`).
    func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount

    /// Releases the file or connection (later calls throw `.unavailable`). Safe to call twice.
    func close()

    /// A cheap round trip proving the store answers again (`SELECT 1` on PostgreSQL, a read
    /// and room to write on SQLite). The store worker calls it, on its own thread and on a
    /// backoff, while the store is failing, so health returns without any client's write.
    func probe() throws(StoreError)

    /// False while the store knows it cannot reach its data (a lost PostgreSQL connection):
    /// the worker then probes it even though no commit failed.
    var reachable: Bool { get }
}

extension RideStore {
    /// A read that touches the store's data (the ride id "" is never valid).
    public func probe() throws(StoreError) { _ = try ride("") }
    public var reachable: Bool { true }
}

/// A store whose commit can return before its log is on disk, with a separate way to make it
/// durable that runs on another thread (PostgreSQL's WAL writer and its flush up to a commit
/// record). The store worker writes and decides the next group while the disk syncs the last
/// one, and tells nobody about a group before a sync that began after its write has returned.
public protocol LogSyncing: RideStore {
    /// As `commit`, except that on return the group is only written (applied, visible to this
    /// store, ordered after every earlier group), not yet durable.
    func commitUnsynced(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult]
    /// Makes everything `commitUnsynced` wrote before the call durable. Called from one thread
    /// at a time, not necessarily the store's. Throws `.commitFailed`: whether the groups
    /// written since the last sync are on disk is unknown, so the process must stop.
    var logSync: @Sendable () throws(StoreError) -> Void { get }
}

/// A store that reads what a group needs in one go rather than one read per request: a
/// network store pays a round trip per read, SQLite a statement's fixed cost. Called on the
/// store's thread by whoever decides the group, before `reply(for:)` and `ride(_:)`.
public protocol GroupReads: AnyObject {
    /// Reads the recorded replies of a group's request ids at once; `reply(for:)` then
    /// answers those keys from it (found or not) until the next commit or prune.
    func prefetchReplies(_ keys: [ReplyKey])
    /// Reads a group's rides unknown to the node at once; `ride(_:)` then answers those ids
    /// from it (found or not) until the next commit.
    func prefetchRides(_ ids: [String])
    /// Both at once (a network store: in one round trip); an empty list reads nothing.
    func prefetch(replies keys: [ReplyKey], rides ids: [String])
    /// As above, and the trace checkpoints of `traces` (rides the group will read one of:
    /// ends and positions of rides whose trace the node does not hold); `trace(_:)` then
    /// answers those ids from it until the next commit. A store whose reads are local may
    /// ignore `traces`.
    func prefetch(replies keys: [ReplyKey], rides ids: [String], traces: [String])
}

extension GroupReads {
    public func prefetch(replies keys: [ReplyKey], rides ids: [String]) {
        if !keys.isEmpty { prefetchReplies(keys) }
        if !ids.isEmpty { prefetchRides(ids) }
    }
    public func prefetch(replies keys: [ReplyKey], rides ids: [String], traces: [String]) {
        prefetch(replies: keys, rides: ids)
    }
}

/// One write of a group commit.
public enum StoreWrite: Sendable, Equatable {
    /// A new ride: its row and its start as journal entry 1, plus `reply` if given.
    case create(NewRide, reply: ReplyRecord?)
    /// Journal entry `entry.seq` of a ride, plus `reply` if given. Refused with `.conflict`
    /// unless `entry.seq` is exactly one past the ride's last entry and the ride has not
    /// ended (optimistic concurrency: two writers deciding from the same state cannot both
    /// append), `.notFound` for an unknown ride.
    case append(JournalEntry, reply: ReplyRecord?)
    /// The ride's distance and last position, replacing the previous checkpoint. Refused with
    /// `.notFound` for an unknown ride; written for an ended ride too (its final trace).
    case trace(TraceCheckpoint)

    public var rideID: String {
        switch self {
        case .create(let r, _): return r.id
        case .append(let e, _): return e.ride
        case .trace(let t): return t.ride
        }
    }
}

/// What `start` fixes about a ride.
public struct NewRide: Sendable, Equatable {
    public let id: String
    public let planID: String
    /// Token `sub` of the rider; nil when auth is off.
    public let owner: String?
    /// Maximum riding seconds, if any.
    public let limit: Int64?
    public let startedAt: UnixMillis
    /// The webhook deliveries of this start, written with it or not at all.
    public let outbox: [OutboxEvent]
    public init(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis, outbox: [OutboxEvent] = []) {
        self.id = id
        self.planID = planID
        self.owner = owner
        self.limit = limit
        self.startedAt = startedAt
        self.outbox = outbox
    }
}

/// One numbered journal entry of a ride (seq 1 is the start, recorded by `.create`).
public struct JournalEntry: Sendable, Equatable {
    public let ride: String
    public let seq: Int64
    public let transition: RideTransition
    /// The webhook deliveries of this transition, written with it or not at all.
    public let outbox: [OutboxEvent]
    public init(ride: String, seq: Int64, transition: RideTransition, outbox: [OutboxEvent] = []) {
        self.ride = ride
        self.seq = seq
        self.transition = transition
        self.outbox = outbox
    }
}

/// The outcome of one write in a committed batch.
public enum WriteResult: Sendable, Equatable {
    case written
    case refused(StoreError)
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
/// gets the same bytes back. `request` says what was asked (type and ride, e.g. "pause r-42")
/// so a reused id asking something else is told `conflict` instead of the old reply. `at` is
/// when it was recorded (what `prune` compares against).
public struct ReplyRecord: Sendable, Equatable {
    public let key: ReplyKey
    public let request: String
    public let bytes: [UInt8]
    public let at: UnixMillis
    public init(key: ReplyKey, request: String, bytes: [UInt8], at: UnixMillis) {
        self.key = key
        self.request = request
        self.bytes = bytes
        self.at = at
    }
}

/// A recorded reply as read back. `request` is nil for replies recorded before it was kept
/// (schema version 2), which match any request with their key.
public struct StoredReply: Sendable, Equatable {
    public let request: String?
    public let bytes: [UInt8]
    public init(request: String?, bytes: [UInt8]) {
        self.request = request
        self.bytes = bytes
    }
}

/// A ride as stored: its journal and the state replayed from it. Loading validates the
/// replay, so `ride` is always consistent with `journal`; `seq` is the last entry's number.
public struct StoredRide: Sendable, Equatable {
    public let journal: [RideTransition]
    public let ride: Ride

    public var id: String { ride.id }
    public var planID: String { ride.planID }
    public var owner: String? { ride.owner }
    public var limit: Int64? { ride.limit }
    public var seq: Int64 { Int64(journal.count) }

    /// Replays `journal`; nil when it is not a valid ride (no leading start, or a transition
    /// that does not apply), which a store reports as corruption.
    public init?(id: String, planID: String, owner: String?, limit: Int64?, journal: [RideTransition]) {
        guard case .success(let ride)? = Ride.replay(id: id, planID: planID, owner: owner, limit: limit, journal: journal)
        else { return nil }
        self.journal = journal
        self.ride = ride
    }
}

/// Why a store refused one write of a group (the others still commit). Every store refuses
/// the same writes for the same reasons (`StoreRules`).
public enum StoreRefusal: String, Sendable, Equatable {
    /// A `.create` whose ride id exists.
    case rideExists = "ride_exists"
    /// An `.append` to a ride id the store does not hold.
    case rideNotFound = "ride_not_found"
    /// An `.append` whose `seq` is not one past the ride's last entry (another writer was first).
    case notNext = "not_next"
    /// An `.append` the ride's state does not allow (a start appended, a pause of an ended ride).
    case notAllowed = "not_allowed"
    /// The write's reply key already has a reply recorded (the request was applied before).
    case replyAlreadyRecorded = "reply_already_recorded"

    public var kind: StoreError.Kind { self == .rideNotFound ? .notFound : .conflict }
}

public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Cannot read or write now (unwritable path, disk full, I/O error, locked, closed);
        /// nothing of the call was applied. The server answers `unavailable`.
        case unavailable
        /// A COMMIT failed after it may have reached the disk: whether it applied is unknown,
        /// so the server stops and recovers from the file at restart.
        case commitFailed = "commit_failed"
        /// The file is not a RidePush store or its content is damaged.
        case corrupt
        /// The file was written by a newer RidePush; this one refuses to touch it.
        case newerSchema = "newer_schema"
        /// The id (ride or reply key) already exists, or the entry is not the ride's next.
        case conflict
        /// No ride with that id.
        case notFound = "not_found"
    }

    public let kind: Kind
    /// Why one write was refused (kind `.conflict` or `.notFound`); nil for every other error.
    /// Callers branch on this, never on `message`.
    public let refusal: StoreRefusal?
    /// Human-readable; for file problems it names the path.
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        refusal = nil
        self.message = message
    }

    /// One write refused by the store's rules (see `StoreRefusal`).
    public init(_ refusal: StoreRefusal, _ message: String) {
        kind = refusal.kind
        self.refusal = refusal
        self.message = message
    }

    public var description: String { message }
}

extension RideStore {
    /// Every rider's rides: a page of the whole listing.
    public func rides(_ page: RidePage, limit: Int) throws(StoreError) -> [StoredRide] {
        try rides(page, rider: nil, limit: limit)
    }
}
