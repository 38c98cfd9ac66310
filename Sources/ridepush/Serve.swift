import CLibWebSockets
import Foundation
import RideAuth
import RideCore
import RidePushServer
import RideStore

let serveUsage = """
usage: ridepush serve [options]

Serves the page, /healthz, /metrics, /rides/{id}, /plans, /quote and the WebSocket
protocol ride.v1 at /ws, on one port. Every option can also come from the environment.

  --host ADDR              IPv4 address to bind (RIDEPUSH_HOST, default 127.0.0.1)
  --port N                 port, 0 picks a free one (RIDEPUSH_PORT, default 8080)
  --public DIR             the page's folder (RIDEPUSH_PUBLIC, default ./public)
  --store PATH|memory      SQLite ride journal (RIDEPUSH_STORE, default ./ridepush.db);
                           memory keeps rides only while the process runs
  --plans FILE             GBFS system_pricing_plans.json with the fare plans (RIDEPUSH_PLANS)
  --auth jwt|none          jwt (default): tokens required; none: anyone may do anything
                           (RIDEPUSH_AUTH; refused with a non-loopback --host)
  --jwt-secret-file FILE   HS256 secret (or RIDEPUSH_JWT_SECRET); without one a random
                           secret is made for this process and a page URL with a token printed
  --tls-cert FILE          PEM certificate: serve https:// and wss:// (RIDEPUSH_TLS_CERT)
  --tls-key FILE           PEM private key (RIDEPUSH_TLS_KEY)
  --threads N              service threads (RIDEPUSH_THREADS, default: number of cores)
  --max-frame BYTES        largest client message (default 4096)
  --max-subscriptions N    per connection (default 32)
  --max-connections-per-ip N  WebSocket connections per client address
                           (RIDEPUSH_MAX_CONNECTIONS_PER_IP, default 4096)
  --trust-proxy            behind a reverse proxy on this host: count connections from a
                           loopback peer by their X-Real-IP (or last X-Forwarded-For) address
                           (RIDEPUSH_TRUST_PROXY=1; without it those headers are ignored)
  --control-rate N         control messages per second per connection (default 20)
  --keepalive SECONDS      drop peers silent this long; ping at half (RIDEPUSH_KEEPALIVE, default 30)
  --handshake-timeout S    (default 10)
  --slow-consumer-lag S    disconnect a subscriber that has not read its ticks for S seconds (default 10)
  --allow-origin ORIGIN    allowed browser Origin (repeatable; RIDEPUSH_ALLOW_ORIGIN as a
                           comma-separated list; default: any)
  --help
"""

func serveCommand(_ args: [String]) -> Int32 {
    let valued: Set<String> = ["--host", "--port", "--public", "--store", "--plans", "--auth", "--jwt-secret-file",
                               "--tls-cert", "--tls-key", "--threads", "--max-frame", "--max-subscriptions",
                               "--max-connections-per-ip", "--control-rate", "--keepalive", "--handshake-timeout",
                               "--slow-consumer-lag", "--allow-origin"]
    let a: Arguments
    do { a = try Arguments(args, valued: valued, switches: ["--help", "-h", "--trust-proxy"]) } catch {
        return fail("serve: \(error)")
    }
    if a.has("--help") || a.has("-h") { print(serveUsage); return 0 }
    let env = ProcessInfo.processInfo.environment
    func opt(_ flag: String, _ envName: String?) -> String? {
        a[flag] ?? envName.flatMap { env[$0] }.flatMap { $0.isEmpty ? nil : $0 }
    }
    func int(_ flag: String, _ envName: String?, _ def: Int, min: Int = 1, max: Int = Int.max) throws(ServerError) -> Int {
        guard let s = opt(flag, envName) else { return def }
        guard let v = Int(s), v >= min, v <= max else { throw ServerError("\(flag) \(s): expected a whole number from \(min) to \(max)") }
        return v
    }
    var c = ServerConfig()
    do throws(ServerError) {
        c.host = opt("--host", "RIDEPUSH_HOST") ?? c.host
        c.port = try int("--port", "RIDEPUSH_PORT", c.port, min: 0, max: 65535)
        c.publicDir = opt("--public", "RIDEPUSH_PUBLIC") ?? c.publicDir
        c.store = opt("--store", "RIDEPUSH_STORE") ?? c.store
        c.threads = try int("--threads", "RIDEPUSH_THREADS", ProcessInfo.processInfo.activeProcessorCount, max: 64)
        c.maxFrame = try int("--max-frame", nil, c.maxFrame, min: 64, max: 1 << 20)
        c.maxSubscriptions = try int("--max-subscriptions", nil, c.maxSubscriptions)
        c.maxConnectionsPerIP = try int("--max-connections-per-ip", "RIDEPUSH_MAX_CONNECTIONS_PER_IP", c.maxConnectionsPerIP)
        switch a.has("--trust-proxy") ? "1" : env["RIDEPUSH_TRUST_PROXY"] ?? "" {
        case "1", "true", "yes": c.trustProxy = true
        case "", "0", "false", "no": c.trustProxy = false
        case let v: throw ServerError("RIDEPUSH_TRUST_PROXY=\(v): expected 1 or 0")
        }
        c.controlRate = try int("--control-rate", nil, c.controlRate)
        c.keepalive = try int("--keepalive", "RIDEPUSH_KEEPALIVE", c.keepalive, min: 2, max: 3600)
        c.handshakeTimeout = try int("--handshake-timeout", nil, c.handshakeTimeout, max: 600)
        c.slowConsumerLag = try int("--slow-consumer-lag", nil, c.slowConsumerLag, max: 3600)
        c.allowedOrigins = a.multi["--allow-origin"]
            ?? (env["RIDEPUSH_ALLOW_ORIGIN"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        c.tlsCert = opt("--tls-cert", "RIDEPUSH_TLS_CERT")
        c.tlsKey = opt("--tls-key", "RIDEPUSH_TLS_KEY")
        if (c.tlsCert == nil) != (c.tlsKey == nil) { throw ServerError("--tls-cert and --tls-key go together") }
        for f in [c.tlsCert, c.tlsKey].compactMap({ $0 }) where !FileManager.default.isReadableFile(atPath: f) {
            throw ServerError("cannot read \(f) (TLS certificate or key)")
        }
        if let path = opt("--plans", "RIDEPUSH_PLANS") {
            guard let data = FileManager.default.contents(atPath: path) else { throw ServerError("--plans \(path): cannot read the file") }
            do { c.plans = try GBFSPlans.load(Array(data)) } catch { throw ServerError("--plans \(path): \(error)") }
        }
        let authMode = opt("--auth", "RIDEPUSH_AUTH") ?? "jwt"
        var printToken: String?
        switch authMode {
        case "none":
            guard c.host.hasPrefix("127.") || c.host == "localhost" else {
                throw ServerError("--auth none is refused with --host \(c.host): anyone on the network could end anyone's ride. Bind 127.0.0.1 or use tokens.")
            }
            clws_log_warn("authentication is OFF (--auth none): anyone who can reach the port may start, end and watch any ride")
        case "jwt":
            let secret: [UInt8]
            do {
                if let s = try loadSecret(file: a["--jwt-secret-file"], environment: env) {
                    secret = s
                } else {
                    secret = TokenSigner.randomSecret()
                    let now = Int64(Date().timeIntervalSince1970)
                    let claims = TokenClaims(sub: "local", scope: .control, exp: now + 12 * 3600, iat: now)
                    printToken = TokenSigner(secret: secret).sign(claims)
                }
            } catch { throw ServerError(error.message) }
            c.auth = .jwt(secret: secret)
        default:
            throw ServerError("--auth \(authMode): expected jwt or none")
        }
        let store: RideStore
        if c.store == "memory" {
            store = MemoryStore()
        } else {
            do { store = try SQLiteStore(path: c.store) } catch { throw ServerError("--store \(c.store): \(error.message)") }
        }
        let hub = try Hub(config: c, store: store, faults: .fromEnvironment())
        let scheme = c.tlsCert == nil ? "http" : "https"
        let shown = c.host == "0.0.0.0" ? "127.0.0.1" : c.host
        print("ridepush: serving \(scheme)://\(shown):\(hub.port)/ (WebSocket \(scheme == "https" ? "wss" : "ws")://\(shown):\(hub.port)/ws, \(c.threads) threads, store \(c.store))")
        if let t = printToken {
            print("ridepush: open \(scheme)://\(shown):\(hub.port)/?token=\(t)")
            print("ridepush: (no secret configured: a random one was made for this process; set RIDEPUSH_JWT_SECRET to keep tokens across restarts)")
        }
        fflush(nil)
        waitForSignals(then: { hub.shutdown() })
        hub.run()
        print("ridepush: stopped")
        return 0
    } catch {
        return fail("ridepush serve: \(error.description)")
    }
}

/// SIGINT and SIGTERM are blocked in every thread and taken by one waiting thread, which
/// asks the server to close its sockets with 1001 and stop.
func waitForSignals(then stop: @escaping @Sendable () -> Void) {
    signal(SIGPIPE, SIG_IGN)
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGINT)
    sigaddset(&set, SIGTERM)
    pthread_sigmask(SIG_BLOCK, &set, nil)
    let blocked = set
    Thread.detachNewThread {
        var s = blocked
        var sig: Int32 = 0
        sigwait(&s, &sig)
        clws_log_user("signal \(sig): closing connections")
        stop()
    }
}

func fail(_ message: String) -> Int32 {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    return 2
}
