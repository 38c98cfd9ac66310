import RideCore
import RideStore

/// Everything /healthz is computed from, read by the adapter at the request (ages in ms): the
/// verdict and the document are the service's, so every component counts the same way.
package struct HealthReport {
    package var version: String
    package var commit: String
    package var tickAge: Int64
    package var loopAges: [Int64]
    /// The store's word (`Health.store`).
    package var store: String
    /// The PostgreSQL LISTEN connection's word, with several nodes (nil: one node alone).
    package var listener: String?
    package var draining: Bool
    package var connections: Int
    package var subscribers: Int
    package var rides: (riding: Int, paused: Int, ended: Int)
    package var connectionsPerThread: [Int]
    package var ticks: Int
    package var storeHealth: StoreHealth
    /// `--jwks-url`'s fetches (nil without it): no set yet is degraded, a failed refresh with
    /// the last good set in force is not.
    package var identityKeys: KeySourceStatus?
    /// The webhook sender's word and its oldest owed delivery's age (WebhookDesk.health); nil
    /// without `--webhook`.
    package var webhooks: (word: String, oldestPendingAge: Int64)?

    package init(version: String, commit: String, tickAge: Int64, loopAges: [Int64], store: String, listener: String?,
                 draining: Bool, connections: Int, subscribers: Int, rides: (riding: Int, paused: Int, ended: Int), connectionsPerThread: [Int],
                 ticks: Int, storeHealth: StoreHealth, identityKeys: KeySourceStatus? = nil,
                 webhooks: (word: String, oldestPendingAge: Int64)? = nil) {
        self.webhooks = webhooks
        self.version = version
        self.commit = commit
        self.tickAge = tickAge
        self.loopAges = loopAges
        self.store = store
        self.listener = listener
        self.draining = draining
        self.connections = connections
        self.subscribers = subscribers
        self.rides = rides
        self.connectionsPerThread = connectionsPerThread
        self.ticks = ticks
        self.storeHealth = storeHealth
        self.identityKeys = identityKeys
    }

    /// Healthy when the ticker ticked and every thread looped within `Health.stallMillis`, the
    /// store says ok, the listener (if any) is up and `--jwks-url` (if given) gave a set; then the document, served 200 or 503.
    package func verdict() -> (ok: Bool, json: [UInt8]) {
        let healthy = tickAge <= Health.stallMillis && loopAges.allSatisfy { $0 <= Health.stallMillis } && store == "ok"
            && (listener ?? "ok") == "ok" && identityKeys?.word != "failing"
        var (ok, status) = Health.status(healthy: healthy, draining: draining)
        // A receiver that is down is the receiver's outage, not this node's: said, still 200,
        // so a load balancer does not take every node out for it (they share the receiver).
        if ok, let webhooks, webhooks.word != "ok" { status = webhooks.word }
        var w = JSONWriter()
        w.beginObject()
        w.field("status", status)
        w.field("version", version)
        w.field("commit", commit)
        if let listener { w.field("listener", listener) }
        w.field("connections", Int64(connections))
        w.field("subscribers", Int64(subscribers))
        w.key("rides")
        w.beginObject()
        w.field("riding", Int64(rides.riding))
        w.field("paused", Int64(rides.paused))
        w.field("ended", Int64(rides.ended))
        w.endObject()
        w.field("threads", Int64(loopAges.count))
        w.key("connections_per_thread")
        w.beginArray()
        for n in connectionsPerThread { w.int(Int64(n)) }
        w.endArray()
        w.field("ticks", Int64(ticks))
        w.field("last_tick_age_ms", tickAge)
        w.key("thread_loop_age_ms")
        w.beginArray()
        for age in loopAges { w.int(age) }
        w.endArray()
        w.field("store", store)
        Health.writeStoreAges(storeHealth, into: &w)
        identityKeys?.writeHealth(into: &w)
        if let webhooks {
            w.field("webhooks", webhooks.word)
            w.field("webhook_oldest_pending_age_ms", webhooks.oldestPendingAge)
        }
        w.endObject()
        return (ok, w.bytes)
    }
}
