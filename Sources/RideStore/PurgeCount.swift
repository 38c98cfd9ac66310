/// What one `purgeEnded` batch deleted, by kind of row (what `/metrics` adds up).
public struct PurgeCount: Sendable, Equatable {
    /// Ended rides deleted.
    public var rides: Int
    /// Their journal entries (start and end included).
    public var journal: Int
    /// Idempotency replies recorded before the cutoff.
    public var replies: Int
    /// Their trace checkpoints (rides that reported positions have one).
    public var traces: Int
    /// Their webhook deliveries that are done: given up on (dead). Delivered ones were deleted
    /// at delivery; ones still owed are never purged.
    public var outbox: Int

    public init(rides: Int = 0, journal: Int = 0, replies: Int = 0, traces: Int = 0, outbox: Int = 0) {
        self.rides = rides
        self.journal = journal
        self.replies = replies
        self.traces = traces
        self.outbox = outbox
    }

    /// Whether the batch was cut at `limit`, so more may be left to delete.
    public func full(limit: Int) -> Bool { rides >= limit || replies >= limit }

    public static func += (a: inout PurgeCount, b: PurgeCount) {
        a.rides += b.rides
        a.journal += b.journal
        a.replies += b.replies
        a.traces += b.traces
        a.outbox += b.outbox
    }
}
