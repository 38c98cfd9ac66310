/// What the server asks of a store beyond the `RideStore` contract, by capability rather than
/// by concrete type, so the adapter names no store target: a store adopts what it offers.

/// How a store's own reply lookup compares with the server's cache of recent replies.
public protocol StoreTraits {
    /// True when the store keeps its recent replies in memory already: a cache in front of it
    /// would only hold a second copy (up to 8,192 replies, 0.07 KiB per subscriber of the bench).
    var keepsRecentReplies: Bool { get }
}

/// A store on a connection that can drop, shared by several nodes, that can hear the other
/// nodes' commits: its connection's health and lost-COMMIT settlements (for /healthz and
/// /metrics) and the listener that wakes the store worker.
public protocol ClusterFeedSource: AnyObject {
    /// Whether the store's own connection is up, readable from any thread.
    var health: ConnectionHealth { get }
    /// How groups whose COMMIT lost its connection were settled, readable from any thread.
    var settles: SettleCounts { get }
    /// The listener on its own connection and thread (not started): it calls `wake` with the
    /// rides other nodes wrote (their new seq) or `catchUp` for a full read, and logs its
    /// losses (`warning`) and reconnects through `log`.
    func clusterFeed(log: @escaping @Sendable (_ warning: Bool, _ message: String) -> Void,
                     wake: @escaping @Sendable (_ hints: [String: Int64], _ catchUp: Bool) -> Void) -> any ClusterFeed
}

/// A node's listener on the shared journal, as the server runs and reports it.
public protocol ClusterFeed: Sendable {
    /// Whether the listener is connected (the node is degraded while it is not).
    var health: ConnectionHealth { get }
    /// Times its connection was opened again after a loss.
    var reconnectCount: Int { get }
    func start()
    /// Stops its thread and closes its connection.
    func stop()
}
