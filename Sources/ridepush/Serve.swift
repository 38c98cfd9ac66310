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

  --host ADDR              address to bind: IPv4, IPv6 (::1, :: for every interface) or
                           localhost (RIDEPUSH_HOST, default 127.0.0.1; 0.0.0.0: every IPv4 interface)
  --port N                 port, 0 picks a free one (RIDEPUSH_PORT, default 8080)
  --public DIR             the page's folder (RIDEPUSH_PUBLIC, default ./public)
  --store PATH|memory|postgresql://USER@HOST:PORT/DB
                           SQLite ride journal (RIDEPUSH_STORE, default ./ridepush.db);
                           memory keeps rides only while the process runs; a libpq URI
                           shares one PostgreSQL store between nodes (deploy/README.md)
  --create-store           make the SQLite store file if it does not exist (RIDEPUSH_CREATE_STORE=1);
                           without it a missing file is refused, so a mistyped path cannot
                           start an empty store
  --store-password-file F  PostgreSQL password, first line of F (RIDEPUSH_STORE_PASSWORD_FILE;
                           else from the URI, PGPASSFILE or ~/.pgpass)
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
  --log-format text|json   text (default): libwebsockets' lines; json: one object per line
                           with time, level, message and fields (RIDEPUSH_LOG_FORMAT)
  --allow-origin ORIGIN    allowed browser Origin (repeatable; RIDEPUSH_ALLOW_ORIGIN as a
                           comma-separated list; default: any)
  --help
"""

func serveCommand(_ args: [String]) -> Int32 {
    let valued: Set<String> = ["--host", "--port", "--public", "--store", "--plans", "--auth", "--jwt-secret-file",
                               "--tls-cert", "--tls-key", "--threads", "--max-frame", "--max-subscriptions",
                               "--max-connections-per-ip", "--control-rate", "--keepalive", "--handshake-timeout",
                               "--slow-consumer-lag", "--allow-origin", "--log-format",
                               "--store-password-file", "--ws-echo"]
    let a: Arguments
    do { a = try Arguments(args, valued: valued, switches: ["--help", "-h", "--trust-proxy", "--create-store"]) } catch {
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
        let format = opt("--log-format", "RIDEPUSH_LOG_FORMAT") ?? "text"
        guard let logFormat = Log.Format(rawValue: format) else { throw ServerError("--log-format \(format): expected text or json") }
        Log.use(logFormat)
        c.host = opt("--host", "RIDEPUSH_HOST") ?? c.host
        c.port = try int("--port", "RIDEPUSH_PORT", c.port, min: 0, max: 65535)
        c.publicDir = opt("--public", "RIDEPUSH_PUBLIC") ?? c.publicDir
        c.store = opt("--store", "RIDEPUSH_STORE") ?? c.store
        c.threads = try int("--threads", "RIDEPUSH_THREADS", ProcessInfo.processInfo.activeProcessorCount, max: 64)
        c.maxFrame = try int("--max-frame", nil, c.maxFrame, min: 64, max: 1 << 20)
        c.maxSubscriptions = try int("--max-subscriptions", nil, c.maxSubscriptions)
        // Tests only, so not in --help: the Autobahn echo endpoint (README, Testing).
        if a["--ws-echo"] != nil { c.wsEcho = try int("--ws-echo", nil, 0, min: 64, max: 64 << 20) }
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
        let plansPath = opt("--plans", "RIDEPUSH_PLANS")
        if let path = plansPath {
            let data = try readPlansFile(path)
            do { c.plans = try GBFSPlans.load(data) } catch { throw ServerError("--plans \(path): \(error)") }
        }
        let authMode = opt("--auth", "RIDEPUSH_AUTH") ?? "jwt"
        var printToken: String?
        switch authMode {
        case "none":
            guard c.host.hasPrefix("127.") || c.host == "localhost" || c.host == "::1" || c.host == "[::1]" else {
                throw ServerError("--auth none is refused with --host \(c.host): anyone on the network could end anyone's ride. Bind 127.0.0.1 or use tokens.")
            }
            Log.warn("authentication is OFF (--auth none): anyone who can reach the port may start, end and watch any ride")
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
        } else if PostgresSettings.isURI(c.store) {
            store = try openPostgres(c.store, passwordFile: opt("--store-password-file", "RIDEPUSH_STORE_PASSWORD_FILE"))
        } else {
            let create = a.has("--create-store") || ["1", "true", "yes"].contains(env["RIDEPUSH_CREATE_STORE"] ?? "")
            let parent = URL(fileURLWithPath: c.store).deletingLastPathComponent().path
            if !create, !FileManager.default.fileExists(atPath: c.store), FileManager.default.fileExists(atPath: parent) {
                throw ServerError("--store \(c.store): no such file. Check the path; to start a new, empty store there, add --create-store (RIDEPUSH_CREATE_STORE=1)")
            }
            do { store = try SQLiteStore(path: c.store) } catch { throw ServerError("--store \(c.store): \(error.message)") }
        }
        let hub = try Hub(config: c, store: store, faults: .fromEnvironment())
        let scheme = c.tlsCert == nil ? "http" : "https"
        // What is really bound; for every interface also where this machine reaches it.
        let bound = hub.urlHost, shown = hub.localURLHost
        print("ridepush: serving \(scheme)://\(bound):\(hub.port)/ (WebSocket \(scheme == "https" ? "wss" : "ws")://\(bound):\(hub.port)/ws, \(c.threads) threads, store \(PostgresSettings.redact(c.store)))")
        if hub.listensEverywhere {
            print("ridepush: listening on every \(bound == "0.0.0.0" ? "IPv4 " : "")interface; on this machine: \(scheme)://\(shown):\(hub.port)/")
        }
        print("ridepush: \(c.plans.count == 1 ? "plan" : "plans") \(plansPath.map { "from \($0)" } ?? "built in"): "
              + c.plans.map { "\($0.id) \"\($0.displayName)\" \($0.currency.code)" }.joined(separator: ", "))
        if logFormat == .json {  // the text format's stdout lines above already say it
            Log.info("serving", ["url": .string("\(scheme)://\(bound):\(hub.port)/"), "threads": .int(Int64(c.threads)),
                             "version": .string(BuildInfo.version), "commit": .string(BuildInfo.commit)])
        }
        if let t = printToken {
            print("ridepush: open \(scheme)://\(shown):\(hub.port)/?token=\(t)")
            print("ridepush: device client: RIDEPUSH_TOKEN=\(t) \(CommandLine.arguments[0]) ride start --url \(scheme == "https" ? "wss" : "ws")://\(shown):\(hub.port)/ws")
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
        Log.info("signal \(sig): closing connections", ["signal": .int(Int64(sig))])
        stop()
    }
}

/// The plans file's bytes, or why not in words: missing, a directory, not readable.
func readPlansFile(_ path: String) throws(ServerError) -> [UInt8] {
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
        throw ServerError("--plans \(path): no such file (give the path of a GBFS system_pricing_plans.json; see plans.example.json)")
    }
    if isDir.boolValue {
        throw ServerError("--plans \(path): is a directory; give the path of the JSON file in it (e.g. \(path.hasSuffix("/") ? path : path + "/")system_pricing_plans.json)")
    }
    guard let f = fopen(path, "r") else {
        let why = errno == EACCES ? "permission denied (the server runs as uid \(getuid()))" : String(cString: strerror(errno))
        throw ServerError("--plans \(path): cannot open the file: \(why)")
    }
    defer { fclose(f) }
    var out = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n > 0 { out += buf[0..<n] }
        if n < buf.count { break }
        // A pricing file is kilobytes; refuse a mistaken multi-megabyte one before parsing it.
        guard out.count <= 4 << 20 else { throw ServerError("--plans \(path): larger than 4 MiB; is it the right file?") }
    }
    if ferror(f) != 0 { throw ServerError("--plans \(path): cannot read the file: \(String(cString: strerror(errno)))") }
    return out
}

/// The PostgreSQL store named by a `--store` URI: connects (every failure names the URI with
/// its password hidden), creates or upgrades the schema.
func openPostgres(_ uri: String, passwordFile: String?) throws(ServerError) -> RideStore {
    var settings = PostgresSettings(uri: uri)
    do throws(StoreError) {
        if let passwordFile { settings.password = try PostgresSettings.password(fromFile: passwordFile) }
        return try PostgresStore(settings)
    } catch {
        throw ServerError("--store: \(error.message)")
    }
}

func fail(_ message: String) -> Int32 {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    return 2
}
