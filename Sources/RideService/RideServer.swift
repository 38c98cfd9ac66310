import RideAuth
import RideCore
import RideProtocol
import RideStore
import RideWebhooks
import Synchronization

/// The service side of a running server, as the adapter's shards, callbacks and routes reach
/// it: the configuration, the shared state (registry, metrics, the operator feed), the token
/// checks, the per-address admission, the store worker's queue, the drain, and the documents
/// the service answers with (/healthz, /metrics, /plans, /zones). The adapter's composition
/// root (Hub) builds it and hands it to each service thread; nothing in it knows libwebsockets.
package final class RideServer: Sendable {
    package let config: ServerConfig
    package let clock: RideClock
    package let metrics: Metrics
    package let registry: RideRegistry
    package let ops: OpsFeed
    /// Auth on: every token the server accepts is checked here (WebSocket, HTTP, upgrades).
    package let verifier: TokenVerifier?
    /// Signs share links; nil without an HS256 secret.
    package let signer: TokenSigner?
    package var authRequired: Bool { verifier != nil }
    /// What each connection's deadlines are (the shards' connection timers ask).
    package let connectionTimers: ConnectionTimers
    /// The page's folder, resolved (GET of a file under it).
    package let publicDir: String
    /// `/quote` requests per address per second (the control rate).
    package let quoteRate: AddressRate
    package let zonesRoute: ZonesRoute
    /// The routes under /v1/webhooks/ (nil without `--webhook`).
    package let webhookDesk: WebhookDesk?
    /// Monotonic ms of the last tick (the ticker writes it; /healthz reads it).
    package let lastTick = Atomic<Int64>(monotonicMillis())
    /// Each service thread's liveness and connection count, by index.
    package let threads: [ThreadPulse]
    /// Set by the drain: /healthz answers `draining`.
    package let draining = Atomic<Bool>(false)
    /// When the drain began (monotonic ms) and how long it lasts: every thread plans its
    /// closes on the same span, so the node as a whole closes in one even trickle.
    package let drainStart = Atomic<Int64>(0)
    package let drainMillis = Atomic<Int64>(0)
    /// Threads still in their service loop. Thread 0 leaves last: it ticks for the others'
    /// connections until they are closed.
    package let threadsLooping = Atomic<Int>(0)

    private let perAddress = Locked<[String: Int]>([:])
    let worker: StoreWorker<StoreCoordinator>
    let parts: Parts
    /// `last_updated` of GET /plans: the plans change only at start-up.
    let plansLoadedAt: Int64
    let build: (version: String, commit: String)

    /// What /healthz and /metrics read besides the shared state: the store's connection and
    /// listener (PostgreSQL), the geo and retention counters, the webhook sender's counts.
    package struct Parts: Sendable {
        package var storeHealth: ConnectionHealth?
        package var storeSettles: SettleCounts?
        package var clusterFeed: (any ClusterFeed)?
        package var geoCounters: GeoCounters
        package var retention: Retention?
        package var webhookSender: WebhookSender?
        package init(geoCounters: GeoCounters) { self.geoCounters = geoCounters }
    }

    package init(config: ServerConfig, clock: RideClock, metrics: Metrics, registry: RideRegistry, ops: OpsFeed,
                 verifier: TokenVerifier?, signer: TokenSigner?, publicDir: String, webhookDesk: WebhookDesk?,
                 worker: StoreWorker<StoreCoordinator>, parts: Parts, threads: Int, build: (version: String, commit: String)) {
        self.config = config
        self.clock = clock
        self.metrics = metrics
        self.registry = registry
        self.ops = ops
        self.verifier = verifier
        self.signer = signer
        connectionTimers = ConnectionTimers(keepaliveSeconds: config.keepalive, handshakeSeconds: config.handshakeTimeout,
                                            slowConsumerSeconds: config.slowConsumerLag, authRequired: verifier != nil)
        self.publicDir = publicDir
        quoteRate = AddressRate(perSecond: config.controlRate)
        zonesRoute = ZonesRoute(document: config.zonesDocument)
        self.webhookDesk = webhookDesk
        self.worker = worker
        self.parts = parts
        self.threads = (0..<threads).map { _ in ThreadPulse() }
        plansLoadedAt = clock.now() / 1000
        self.build = build
    }

    /// A request for the store worker (it decides, commits and answers in turn).
    package func submit(_ job: StoreJob) { worker.submit([job]) }

    /// Per-address connection limit (WebSocket sessions and HTTP connections, HTTPConnections).
    package func admit(_ peer: String) -> Bool {
        perAddress.withLock { m in
            let n = m[peer, default: 0]
            guard n < config.maxConnectionsPerIP else { return false }
            m[peer] = n + 1
            return true
        }
    }

    package func release(_ peer: String) {
        perAddress.withLock { m in
            if let n = m[peer] { m[peer] = n > 1 ? n - 1 : nil }
        }
    }

    /// Starts the drain (/healthz says `draining` from now on) over `seconds`; false if it had begun.
    package func beginDrain(seconds: Int) -> Bool {
        guard !draining.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        drainStart.store(monotonicMillis(), ordering: .relaxed)
        drainMillis.store(Int64(max(0, seconds)) * 1000, ordering: .relaxed)
        return true
    }

    /// /healthz, from what each component last proved (HealthReport decides and writes it):
    /// `ok` only when the ticker ticked, every thread looped, the store answered and, with
    /// PostgreSQL, the listener is up; otherwise `degraded` (503); `draining` (503) once a SIGTERM came.
    package func health() -> (ok: Bool, json: [UInt8]) {
        let now = monotonicMillis()
        return HealthReport(
            version: build.version, commit: build.commit,
            tickAge: now - lastTick.load(ordering: .relaxed),
            loopAges: threads.map { now - $0.lastLoop.load(ordering: .relaxed) },
            store: Health.store(worker.health, connection: parts.storeHealth),
            listener: parts.clusterFeed.map { $0.health.isUp ? "ok" : "unreachable" },
            draining: draining.load(ordering: .relaxed),
            connections: metrics.connections.load(ordering: .relaxed), subscribers: metrics.subscribers.load(ordering: .relaxed),
            rides: registry.counts, connectionsPerThread: threads.map { $0.connections.load(ordering: .relaxed) },
            ticks: metrics.tickRounds.load(ordering: .relaxed), storeHealth: worker.health, identityKeys: config.keySource,
            webhooks: webhookDesk?.health(now: clock.now())
        ).verdict()
    }

    /// The loaded plans as a GBFS `system_pricing_plans.json` document.
    package func plansDocument() -> [UInt8] {
        GBFSPlans.document(config.plans, lastUpdated: plansLoadedAt)
    }
}

/// One service thread's pulse, for /healthz and the heap trimmer: written by that thread only.
package final class ThreadPulse: Sendable {
    /// Monotonic ms of the service loop's last iteration (is this thread alive).
    package let lastLoop = Atomic<Int64>(monotonicMillis())
    /// WebSocket connections on this thread.
    package let connections = Atomic<Int>(0)
}

extension RideServer: ConnectionContext, OpsServices {
    package func now() -> UnixMillis { clock.now() }
    package func wallSeconds() -> Int64 { WallClock.seconds() }
    package func monotonic() -> Int64 { monotonicMillis() }
    package func ride(_ id: String) -> LiveRide? { registry.find(id) }
    package func snapshot(_ live: LiveRide) -> Ride { registry.snapshot(live) }
    package func plan(_ id: String?) -> FarePlan? { registry.plan(id) }
    package func count(_ type: String, _ result: String) { metrics.control(type, result) }
    package func rateLimited() { metrics.add(metrics.rateLimited) }
    package func trace(_ live: LiveRide) -> (distance: Int64, position: RidePosition?)? {
        registry.view.withLock { _ in live.trace.map { ($0.metres, $0.position.map(RidePosition.init)) } }
    }
}
