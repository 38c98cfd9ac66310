import CLibWebSockets
import Foundation
import Glibc
import RideAuth
import RideCore
import RideHTTPClient
import RideService
import RideStore
import RideWebhooks
import Synchronization

/// The composition root: builds the service side (RideServer) and the store worker from what
/// the executable hands it, then the lws contexts, the service threads and the listener, and
/// owns their lifetime. Nothing else in the adapter reaches it.
public final class Hub: @unchecked Sendable {  // fields are set once in init; shared state is locked or atomic
    package let config: ServerConfig
    /// What every service thread, callback and route reaches: the service side.
    package let service: RideServer
    package var registry: RideRegistry { service.registry }
    package var verifier: TokenVerifier? { service.verifier }
    private(set) var shards: [Shard] = []
    let ticker: Ticker
    let listener: Listener
    /// The one thread that talks to the store (group commit); see StoreCoordinator.
    let storeWorker: StoreWorker<StoreCoordinator>
    /// Where the store worker hands each service thread its events, and how the lws callbacks
    /// find their shard (each context's user pointer); filled once the shards exist.
    let mailboxes = Mailboxes()
    /// With a store shared by several nodes (PostgreSQL): its listener.
    private(set) var clusterFeed: (any ClusterFeed)?
    /// With `--webhook`: the sender (its own threads and outbox connection).
    let webhookSender: WebhookSender?
    /// Every outbound HTTP call's client (one libcurl thread and connection pool), made when
    /// something calls out; it trusts `--outbound-ca-file` besides the system's store.
    let outbound: HTTPClient?

    // C structures lws keeps pointers to for the life of the contexts.
    let protocols: UnsafeMutablePointer<lws_protocols>
    let securityHeaders: UnsafeMutablePointer<lws_protocol_vhost_options>
    /// All zero: turns off lws's per-connection validity timers. Keepalive is ours
    /// (ConnectionTimers, on each shard's timer); lws's timers re-insert into a sorted list on every pong and
    /// every new connection, O(connections) each.
    let noValidityTimers: UnsafeMutablePointer<lws_retry_bo_t>
    var vhostName: UnsafeMutablePointer<CChar> { Hub.vhostNameC }
    /// One for the process: a Hub whose init throws (port in use) must not leak it.
    nonisolated(unsafe) private static let vhostNameC = strdup("ridepush")!  // never written
    /// `--tls-cert` and `--tls-key` for lws, shared by every context; freed with the contexts.
    let tlsPathsC: (cert: UnsafeMutablePointer<CChar>, key: UnsafeMutablePointer<CChar>)?

    public var port: Int { listener.port }
    /// The bound address for URLs ("127.0.0.1", "[::1]"), and where this machine reaches it.
    public var urlHost: String { listener.urlHost }
    public var localURLHost: String { listener.localURLHost }
    public var listensEverywhere: Bool { listener.isWildcard }

    /// `outbox`: where the store's write puts webhook rows, on a connection of its own (needed,
    /// and only used, with `config.webhooks`); the caller closes it after `run()` returns.
    public init(config: ServerConfig, store: RideStore, clock: RideClock = SlewingClock.system,
                faults: (any StoreFaultInjection)? = nil, outbox: WebhookOutbox? = nil) throws(ServerError) {
        self.config = config
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: config.publicDir, isDirectory: &isDir), isDir.boolValue else {
            throw ServerError("--public \(config.publicDir): no such folder (it holds the page: index.html, app.js, …)")
        }
        let publicDir = URL(fileURLWithPath: config.publicDir).standardizedFileURL.path
        let signer: TokenSigner?, verifier: TokenVerifier?
        if case .jwt(let secret) = config.auth {
            guard secret != nil || !config.identityKeys.isEmpty || config.jwksURL != nil else {
                throw ServerError("tokens required but neither an HS256 secret nor an identity provider's key is configured")
            }
            signer = secret.map { TokenSigner(secret: $0) }
            verifier = TokenVerifier(secret: secret, keys: config.identityKeys, policy: config.tokenPolicy)
        } else {
            signer = nil
            verifier = nil
        }
        listener = try Listener(host: config.host, port: config.port)

        // In dependency order, each piece handed what it uses: the feed, the registry, the
        // rides from the store, the coordinator, the worker, RideServer, the ticker; then the C
        // structures lws keeps, then the service threads (which need all of it), and last the
        // mailboxes they are reached by.
        let threads = max(1, config.threads)
        let pre = Int(clws_pre())  // the socket layer's headroom, handed to the service's encoders
        let ops = OpsFeed(threads: threads, pre: pre), metrics = Metrics()
        let registry = RideRegistry(plans: config.plans, shards: threads, clock: clock, metrics: metrics, ops: ops, pre: pre,
                                    devicePush: config.devicePush)
        let (book, cluster): (RideBook, ClusterCatchUp?)
        do throws(ServerError) { (book, cluster) = try StartupLoad.load(store, plans: config.plans, into: registry) } catch {
            close(listener.fd)
            throw error
        }
        let mailboxes = self.mailboxes
        if !config.webhooks.isEmpty, outbox == nil {
            close(listener.fd)
            throw ServerError("--webhook needs the store's webhook outbox")
        }
        let outbox = config.webhooks.isEmpty ? nil : outbox
        let client: HTTPClient?
        do { client = outbox == nil ? nil : try HTTPClient(caFile: config.outboundCAFile) } catch {
            close(listener.fd)
            throw ServerError("--outbound-ca-file: \(error.message)")
        }
        outbound = client
        let sender = outbox.map { outbox in
            var settings = WebhookSender.Settings(roster: config.webhookRoster)
            settings.client = client
            return WebhookSender(settings: settings, outbox: outbox) { a in
                // The delivery log: every attempt, so a receiver's outage reads as attempts and order.
                Log.info("webhook \(a.row.eventID) (ride \(a.row.rideID)) to \(a.row.endpoint): attempt \(a.update.attemptCount) \(a.result.summary), \(a.update.outcome(at: a.at))",
                         ["event": .string(a.row.eventID), "ride": .string(a.row.rideID), "endpoint": .string(a.row.endpoint),
                          "attempt": .int(Int64(a.update.attemptCount)), "result": .string(a.result.summary)])
            }
        }
        webhookSender = sender
        let webhookDesk = outbox.flatMap { o in sender.map { WebhookDesk(outbox: o, sender: $0, roster: config.webhookRoster, healthAge: config.webhookHealthAge, clock: clock) } }
        let desk = GeoDesk(zones: config.zones, config: RideGeo.Config(limits: TraceFilter.Limits(maxSpeedKph: config.maxSpeedKph)),
                           clock: clock)
        var parts = RideServer.Parts(geoCounters: desk.counters)
        parts.webhookSender = sender
        let coordinator = StoreCoordinator(book: book, registry: registry, clock: clock, metrics: metrics, cluster: cluster,
                                           recentReplies: (store as? StoreTraits)?.keepsRecentReplies == true ? 0 : RecentReplies.defaultCapacity,
                                           maxOpenRides: config.maxOpenRidesPerRider, webhooks: config.webhookRoster,
                                           eventsCommitted: { sender?.poke() }, desk: desk) { i, events in mailboxes.post(i, events) }
        let worker = StoreWorker(store: store, client: coordinator, faults: faults) { error in
            // The fate of that transaction is unknown: stop, and let a restart read the file
            // (PostgreSQL's answer to a failed fsync). Nobody was told it was recorded.
            FileHandle.standardError.write(Data("ridepush: FATAL: the ride store failed at COMMIT or at its log sync, so it is unknown whether the last groups of transitions are durable: \(error.message). Stopping; a restart recovers from the file.\n".utf8))
            exit(70)
        }
        storeWorker = worker
        let retention = config.retainEndedDays.map { Retention(days: $0) }
        parts.retention = retention
        if let shared = store as? ClusterFeedSource {
            parts.storeHealth = shared.health
            parts.storeSettles = shared.settles
            clusterFeed = shared.clusterFeed(log: { warning, message in warning ? Log.warn(message) : Log.notice(message) }) { hints, catchUp in
                worker.submit([.cluster(hints: hints, catchUp: catchUp)])
            }
            parts.clusterFeed = clusterFeed
        }
        let service = RideServer(config: config, clock: clock, metrics: metrics, registry: registry, ops: ops, verifier: verifier,
                                 signer: signer, publicDir: publicDir, webhookDesk: webhookDesk, worker: worker, parts: parts,
                                 threads: threads, build: (BuildInfo.version, BuildInfo.commit))
        self.service = service
        ticker = Ticker(service: service, jobs: worker, mailboxes: mailboxes, threads: threads, retention: retention)

        protocols = .allocate(capacity: 3)
        protocols[0] = lws_protocols()
        protocols[0].name = UnsafePointer(strdup("ride.v1"))
        protocols[0].callback = rideProtocolCallback
        // None: the session is the wsi's opaque user data (Shard.session).
        protocols[0].per_session_data_size = 0
        // Bytes lws holds per connection (its rx buffer, allocated at the upgrade): longer messages
        // arrive in pieces. 128 is the least that still holds a whole control frame (125 bytes of
        // ping or close payload plus its header), which lws does not split.
        protocols[0].rx_buffer_size = 128
        // Without this lws splits sends at the rx buffer size, and the tail of a 300-byte
        // state reply waited for the client's delayed ACK (about 40 ms).
        protocols[0].tx_packet_size = 16384
        protocols[1] = lws_protocols()
        protocols[1].name = UnsafePointer(strdup("ridepush-accept"))
        protocols[1].callback = acceptCallback
        protocols[2] = lws_protocols()


        if let cert = config.tlsCert, let key = config.tlsKey { tlsPathsC = (strdup(cert)!, strdup(key)!) } else { tlsPathsC = nil }
        noValidityTimers = .allocate(capacity: 1)
        noValidityTimers.initialize(to: lws_retry_bo_t())

        let headers = SecurityHeaders.all
        securityHeaders = .allocate(capacity: headers.count)
        for (i, h) in headers.enumerated() {
            securityHeaders[i] = lws_protocol_vhost_options(
                next: i + 1 < headers.count ? UnsafePointer(securityHeaders + i + 1) : nil,
                options: nil, name: UnsafePointer(strdup(h.name)), value: UnsafePointer(strdup(h.value)))
        }

        do throws(ServerError) {
            for i in 0..<threads {
                let context = try makeContext()
                shards.append(Shard(index: i, service: service, ticker: ticker, listenFD: listener.fd, context: context,
                                    firstContext: shards.first?.context ?? context.0))
            }
        } catch {
            // A refused start (TLS files, a port in use by a later thread) leaves nothing behind.
            for shard in shards { lws_context_destroy(shard.context) }
            freeContextStructures()
            close(listener.fd)
            throw error
        }
        mailboxes.shards = shards
        ops.deliver = { [shards] item in for s in shards { s.post(.ops(item)) } }
    }

    /// Services every thread until `shutdown()`; returns when all sessions were closed.
    public func run() {
        storeWorker.start()
        webhookSender?.start()
        config.devicePush?.start()
        clusterFeed?.start()
        let trimmer = HeapTrimmer(connections: { [threads = service.threads] in threads.reduce(0) { $0 + $1.connections.load(ordering: .relaxed) } },
                                  trim: { _ = malloc_trim(0) })
        trimmer.start()
        let done = DispatchGroup()
        service.threadsLooping.store(shards.count, ordering: .relaxed)
        for shard in shards {
            done.enter()
            let t = Thread {
                shard.run()
                done.leave()
            }
            t.name = "lws-\(shard.index)"
            t.stackSize = 1 << 20
            t.start()
        }
        done.wait()
        for shard in shards { lws_context_destroy(shard.context) }
        freeContextStructures()
        close(listener.fd)
        clusterFeed?.stop()
        storeWorker.stop()
        // After the worker: no commit pokes it any more. Before the caller closes the outbox.
        webhookSender?.stop()
        config.devicePush?.stop()
        trimmer.stop()
    }

    /// SIGHUP: re-reads the key files on the caller's thread (RideServer.reloadKeys).
    public func reloadKeys() { service.reloadKeys() }

    /// Drains and stops (docs/operations.md#rolling-restarts): /healthz says `draining` (503) at
    /// once, the listening socket stops listening (new connections are refused, so a load
    /// balancer's next try goes to another node), and every thread closes its WebSockets with
    /// 1012 spread over `drainSeconds` (DrainPlan), answering what it already received; `run`
    /// returns once none is left. 0: all at once, within 3 s as before drains. Callable from any
    /// thread; a second call changes nothing.
    public func shutdown(drainSeconds: Int = 0) {
        guard service.beginDrain(seconds: drainSeconds) else { return }
        // shutdown(2) on a listening socket stops it listening for every descriptor that shares
        // it (each thread's duplicate too): connections waiting in its backlog are reset and new
        // ones refused, here and now rather than when the last thread stops watching it.
        _ = Glibc.shutdown(listener.fd, Int32(SHUT_RD))
        for shard in shards { shard.post(.shutdown) }
    }
}
