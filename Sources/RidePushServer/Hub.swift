import CLibWebSockets
import Foundation
import RideAuth
import RideCore
import RideStore
import Synchronization

/// The server: shared state (registry, metrics, the ticker) and the service threads.
public final class Hub: @unchecked Sendable {  // fields are set once in init; shared state is locked or atomic
    let config: ServerConfig
    let clock: RideClock
    let metrics = Metrics()
    private(set) var registry: RideRegistry!
    private(set) var shards: [Shard] = []
    private(set) var ticker: Ticker!
    let signer: TokenSigner?
    var authRequired: Bool { signer != nil }
    let publicDir: String
    let listener: Listener
    private let perAddress = Mutex<[String: Int]>([:])
    /// The one thread that talks to the store (group commit); see StoreCoordinator.
    private(set) var storeWorker: StoreWorker<StoreCoordinator>!

    // C structures lws keeps pointers to for the life of the contexts.
    let protocols: UnsafeMutablePointer<lws_protocols>
    let securityHeaders: UnsafeMutablePointer<lws_protocol_vhost_options>
    /// All zero: turns off lws's per-connection validity timers. Keepalive is ours
    /// (Shard.sweepKeepalive); lws's timers re-insert into a sorted list on every pong and
    /// every new connection, O(connections) each.
    let noValidityTimers: UnsafeMutablePointer<lws_retry_bo_t>
    let vhostName = strdup("ridepush")!

    public var port: Int { listener.port }

    public init(config: ServerConfig, store: RideStore, clock: RideClock = SystemClock(),
                faults: StoreFaults = StoreFaults()) throws(ServerError) {
        self.config = config
        self.clock = clock
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: config.publicDir, isDirectory: &isDir), isDir.boolValue else {
            throw ServerError("--public \(config.publicDir): no such folder (it holds the page: index.html, app.js, …)")
        }
        publicDir = URL(fileURLWithPath: config.publicDir).standardizedFileURL.path
        if case .jwt(let secret) = config.auth { signer = TokenSigner(secret: secret) } else { signer = nil }
        listener = try Listener(host: config.host, port: config.port)

        protocols = .allocate(capacity: 3)
        protocols[0] = lws_protocols()
        protocols[0].name = UnsafePointer(strdup("ride.v1"))
        protocols[0].callback = rideProtocolCallback
        protocols[0].per_session_data_size = MemoryLayout<UnsafeMutableRawPointer?>.size
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


        noValidityTimers = .allocate(capacity: 1)
        noValidityTimers.initialize(to: lws_retry_bo_t())

        // Sent with every HTTP response: the page may run only its own scripts and talk only to
        // its own origin (which includes its WebSocket).
        let headers: [(String, String)] = [
            ("content-security-policy:", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
            ("x-content-type-options:", "nosniff"),
            ("referrer-policy:", "no-referrer"),
            ("x-frame-options:", "DENY"),
        ]
        securityHeaders = .allocate(capacity: headers.count)
        for (i, h) in headers.enumerated() {
            securityHeaders[i] = lws_protocol_vhost_options(
                next: i + 1 < headers.count ? UnsafePointer(securityHeaders + i + 1) : nil,
                options: nil, name: UnsafePointer(strdup(h.0)), value: UnsafePointer(strdup(h.1)))
        }

        ticker = Ticker(hub: self)
        let threads = max(1, config.threads)
        let registry = RideRegistry(plans: config.plans, shards: threads, clock: clock, metrics: metrics)
        self.registry = registry
        var book = RideBook(plans: config.plans)
        do {
            let open = try store.openRides()
            registry.publishing { v in
                for stored in open {
                    book.learn(RideBook.Entry(ride: stored.ride, seq: stored.seq))
                    _ = registry.add(stored.ride, &v)
                }
            }
        } catch {
            throw ServerError("cannot load rides: \(error.message)")
        }
        let coordinator = StoreCoordinator(book: book, registry: registry, clock: clock, metrics: metrics) {
            [unowned self] i, events in shards[i].post(events)
        }
        storeWorker = StoreWorker(store: store, client: coordinator, faults: faults) { error in
            // The fate of that transaction is unknown: stop, and let a restart read the file
            // (PostgreSQL's answer to a failed fsync). Nobody was told it was recorded.
            FileHandle.standardError.write(Data("ridepush: FATAL: the ride store failed at COMMIT, so it is unknown whether the last group of transitions is durable: \(error.message). Stopping; a restart recovers from the file.\n".utf8))
            exit(70)
        }
        registry.connect(storeWorker)
        for i in 0..<threads {
            let shard = Shard(index: i, hub: self, listenFD: listener.fd)
            try shard.create(config: config)
            shards.append(shard)
        }
    }

    /// Services every thread until `shutdown()`; returns when all sessions were closed.
    public func run() {
        storeWorker.start()
        let done = DispatchGroup()
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
        close(listener.fd)
        storeWorker.stop()
    }

    /// Asks every thread to close its sockets (1001) and stop. Callable from any thread.
    public func shutdown() {
        for shard in shards { shard.post(.shutdown) }
    }

    /// Per-address connection limit (WebSocket sessions).
    func admit(_ peer: String) -> Bool {
        perAddress.withLock { m in
            let n = m[peer, default: 0]
            guard n < config.maxConnectionsPerIP else { return false }
            m[peer] = n + 1
            return true
        }
    }

    func release(_ peer: String) {
        perAddress.withLock { m in
            if let n = m[peer] { m[peer] = n > 1 ? n - 1 : nil }
        }
    }

    func healthJSON() -> [UInt8] {
        let c = registry.counts
        var w = JSONWriter()
        w.beginObject()
        w.field("status", "ok")
        w.field("connections", Int64(metrics.connections.load(ordering: .relaxed)))
        w.field("subscribers", Int64(metrics.subscribers.load(ordering: .relaxed)))
        w.key("rides")
        w.beginObject()
        w.field("riding", Int64(c.riding))
        w.field("paused", Int64(c.paused))
        w.field("ended", Int64(c.ended))
        w.endObject()
        w.field("threads", Int64(shards.count))
        w.key("connections_per_thread")
        w.beginArray()
        for shard in shards { w.int(Int64(shard.connectionCount.load(ordering: .relaxed))) }
        w.endArray()
        w.field("ticks", Int64(metrics.tickRounds.load(ordering: .relaxed)))
        w.endObject()
        return w.bytes
    }

    /// The loaded plans as a GBFS `system_pricing_plans.json` document.
    func plansDocument() -> [UInt8] {
        GBFSPlans.document(config.plans, lastUpdated: clock.now() / 1000)
    }
}
