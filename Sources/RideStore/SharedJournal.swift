import RideCore
import Synchronization

/// What a store shared by several nodes offers for their catch-up: the journal in commit-safe
/// order after a cursor, one ride's entries after a seq, and where a new reader starts.
/// Called on the store worker's thread, like the rest of the store.
public protocol SharedJournal: GroupReads {
    /// A cursor from which `feed` returns every entry not yet committed now.
    func startCursor() throws(StoreError) -> JournalCursor
    /// Entries after `cursor`, oldest first, at most `limit`, and the cursor after them.
    func feed(after cursor: JournalCursor, limit: Int) throws(StoreError) -> (entries: [FeedEntry], cursor: JournalCursor)
    /// One ride's entries after `seq`, in order.
    func entries(ride: String, after seq: Int64) throws(StoreError) -> [FeedEntry]
    /// Several rides' entries, each after its own seq, in (ride, seq) order: one read for a
    /// batch of hints.
    func entries(after seqs: [(ride: String, seq: Int64)]) throws(StoreError) -> [FeedEntry]
    /// The server process of the store's own connection (0 when none), readable from any
    /// thread: a node skips its own notifications.
    var ownBackend: BackendID { get }
}

extension SharedJournal {
    public func entries(after seqs: [(ride: String, seq: Int64)]) throws(StoreError) -> [FeedEntry] {
        var out: [FeedEntry] = []
        for s in seqs { out += try entries(ride: s.ride, after: s.seq) }
        return out
    }
}

/// A PostgreSQL server process id shared between threads.
public final class BackendID: Sendable {
    private let pid = Atomic<Int32>(0)
    public init() {}
    public var value: Int32 { pid.load(ordering: .relaxed) }
    package func set(_ v: Int32) { pid.store(v, ordering: .relaxed) }
}

/// A journal entry as a node's catch-up read returns it: the ride's fixed fields travel with
/// it, so a node that never saw the ride's start can still build the ride.
public struct FeedEntry: Sendable, Equatable {
    public let entry: JournalEntry
    public let planID: String
    public let owner: String?
    public let limit: Int64?

    public init(_ entry: JournalEntry, planID: String, owner: String?, limit: Int64?) {
        self.entry = entry
        self.planID = planID
        self.owner = owner
        self.limit = limit
    }

    public var ride: String { entry.ride }
    public var seq: Int64 { entry.seq }
}

/// Where a node's catch-up read of the whole journal stands: the (transaction id, position)
/// of the last entry read, in the order of `ridepush.journal_feed`.
public struct JournalCursor: Sendable, Equatable, Comparable, CustomStringConvertible {
    public let txid: Int64
    public let position: Int64

    public init(txid: Int64, position: Int64) {
        self.txid = txid
        self.position = position
    }

    public static func < (a: JournalCursor, b: JournalCursor) -> Bool {
        (a.txid, a.position) < (b.txid, b.position)
    }

    public var description: String { "\(txid)/\(position)" }
}
