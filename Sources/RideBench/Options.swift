import Glibc
import RideOptions

/// `ridepush bench` flags. Workers get the parent's arguments plus `--worker I --procs P`,
/// so every derived default below is computed the same way in every process.
public struct BenchOptions: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    public var path = "/ws"
    public var tls = false             // wss://: every connection speaks TLS (verified against --ca)
    public var caFile: String?         // the PEM the server's certificate must chain to (default: the system's)
    public var clients = 1000
    public var rides: Int?             // default clients / 2: two subscribers per ride
    public var duration = 20           // seconds of measurement window
    public var ramp = 2000             // connects per second (all processes together)
    public var inflight = 512          // handshakes in flight (all processes together)
    public var sources = 4             // 127.0.0.1 ... 127.0.0.S
    public var procs: Int?             // default ceil(clients / 9000)
    public var serverPID: Int32?
    public var json = false
    public var token: String?
    public var authFrame = false       // send the token in a first `auth` frame, as the page and the SDK do
    public var create: Bool?           // default: on when path is /ws (RidePush needs rides started)
    public var connectTimeout = 60     // seconds for the whole connect phase
    public var warmup = 1              // whole seconds between "all connected" and the window
    public var grace = 3               // seconds to keep reading after the window for late ticks
    public var workerIndex: Int?       // internal: this process is worker I of P
    public var help = false

    public init() {}

    public var effectiveRides: Int { max(1, rides ?? clients / 2) }
    public var effectiveProcs: Int { max(1, procs ?? (clients + Self.perProcess - 1) / Self.perProcess) }
    public var effectiveCreate: Bool { create ?? (path == "/ws" || path.hasPrefix("/ws?")) }
    /// Connections per worker: the per-process open-file limit here is 20,000, and a
    /// worker also needs a few descriptors of its own.
    public static let perProcess = 9000
    public static let maxPerProcess = 19_000

    /// Request target: the path plus `token=` when a token is given (and not sent in a frame).
    public var requestTarget: String {
        guard let token, !authFrame else { return path }
        return path + (path.contains("?") ? "&" : "?") + "token=" + percentEncode(token)
    }

    /// One line per option; `usage` (the help) is printed from the same table.
    static let table: OptionTable = {
        let d = BenchOptions()
        return OptionTable(usage: """
            usage: ridepush bench [--url ws://127.0.0.1:8080/ws] [-n CLIENTS] [-r RIDES] [--duration S]
                                  [--ramp CONNECTS_PER_S] [--inflight K] [--sources S] [--procs P]
                                  [--pid SERVER_PID] [--token T [--auth-frame]] [--create | --no-create] [--json]
            """, about: """
            Opens CLIENTS WebSocket connections (ride.v1), subscribes them to RIDES rides (two per
            ride by default), waits until every connection is open or failed, then measures ticks
            for --duration seconds and reports messages/s, fan-out latency (receive time - the
            tick's "at"), missed ticks (seq gaps), and - with --pid - the server's CPU per delivered
            tick and RSS per subscriber.
            """, options: [
            .string("--url", placeholder: "URL", default: "ws://\(d.host):\(d.port)\(d.path)", help: "ws://HOST[:PORT]/PATH or wss://…, IPv4 or localhost"),
            .string("--ca", placeholder: "PEM", help: "wss://: the CA (or self-signed certificate) the server's must chain to; default the system's"),
            .int("-n", "--clients", range: 1...1_000_000, default: d.clients, help: "connections"),
            .int("-r", "--rides", placeholder: "R", range: 1...1_000_000, help: "rides (default N/2: two subscribers per ride)"),
            .int("-d", "--duration", placeholder: "S", range: 1...3600, default: d.duration, help: "measurement window in seconds after all connected"),
            .int("-c", "--ramp", placeholder: "RATE", range: 1...1_000_000, default: d.ramp, help: "connection attempts per second, all processes together"),
            .int("-i", "--inflight", placeholder: "K", range: 1...1_000_000, default: d.inflight, help: "handshakes in flight, all processes together"),
            .int("-s", "--sources", placeholder: "S", range: 1...254, default: d.sources, help: "spread source addresses over 127.0.0.1..127.0.0.S"),
            .int("--procs", placeholder: "P", range: 1...256, help: "worker processes (default ceil(N/\(perProcess)); at most \(maxPerProcess) connections each)"),
            .int("-P", "--pid", placeholder: "PID", range: 1...Int(Int32.max), help: "server process to sample in /proc (CPU and RSS)"),
            .string("--token", placeholder: "T", help: "append ?token=T to the URL"),
            .flag("--auth-frame", help: "send the token in a first {\"type\":\"auth\"} frame instead, as the page and the SDK do"),
            .flag("--create", help: "first client of each ride sends {\"type\":\"start\"} before subscribing (default when the path is /ws)"),
            .flag("--no-create", help: "do not; the later of --create and --no-create counts"),
            .int("--connect-timeout", placeholder: "S", range: 1...3600, default: d.connectTimeout, help: "give up on connections still pending after S seconds"),
            .int("--warmup", placeholder: "S", range: 0...60, default: d.warmup, help: "seconds between all connected and the window"),
            .int("--grace", placeholder: "S", range: 0...60, default: d.grace, help: "seconds to keep reading after the window for late ticks"),
            .flag("--json", help: "print only the JSON result on stdout"),
            .int("--worker", placeholder: "I", range: 0...255, help: "internal: this process is worker I of --procs", hidden: true),
        ], footer: """
            ridepush bench --transitions --help: durable transitions per second instead.
            ridepush bench --tick-encode --help: the CPU of one second's tick batch, no sockets.
            """)
    }()

    public static let usage = table.help

    /// Parses flags; later flags override earlier ones (workers rely on that).
    public static func parse(_ args: [String]) throws(BenchError) -> BenchOptions {
        let p: ParsedOptions
        do { p = try table.parse(args) } catch { throw BenchError.usage(error.description) }
        var o = BenchOptions()
        if p.help { o.help = true; return o }
        if let stray = p.positional.first { throw BenchError.usage(OptionError.unexpectedArgument(stray).description) }
        let url = p.string("--url")!
        if url.hasPrefix("wss://") {
            o.tls = true
            (o.host, o.port, o.path) = try parseURL("ws://" + url.dropFirst(6), defaultPort: 443)
        } else {
            (o.host, o.port, o.path) = try parseURL(url)
        }
        o.caFile = p.string("--ca")
        if o.caFile != nil && !o.tls { throw BenchError.usage("--ca is for wss:// URLs") }
        o.clients = p.int("--clients")!
        o.rides = p.int("--rides")
        o.duration = p.int("--duration")!
        o.ramp = p.int("--ramp")!
        o.inflight = p.int("--inflight")!
        o.sources = p.int("--sources")!
        o.procs = p.int("--procs")
        o.serverPID = p.int("--pid").map { Int32($0) }
        o.json = p.flag("--json")
        o.token = p.string("--token")
        o.authFrame = p.flag("--auth-frame")
        if o.authFrame && o.token == nil { throw BenchError.usage("--auth-frame needs --token") }
        if let last = p.given.last(where: { $0.name == "--create" || $0.name == "--no-create" }) { o.create = last.name == "--create" }
        o.connectTimeout = p.int("--connect-timeout")!
        o.warmup = p.int("--warmup")!
        o.grace = p.int("--grace")!
        o.workerIndex = p.int("--worker")
        let procs = o.effectiveProcs
        if (o.clients + procs - 1) / procs > maxPerProcess {
            throw BenchError.usage("\(o.clients) clients over \(procs) processes is more than \(maxPerProcess) per process (file limit); raise --procs")
        }
        if procs > o.clients { throw BenchError.usage("--procs \(procs) is more than --clients \(o.clients)") }
        if let w = o.workerIndex, w >= procs { throw BenchError.usage("--worker \(w) out of range for --procs \(procs)") }
        return o
    }

    static func parseURL(_ url: String, defaultPort: UInt16 = 80) throws(BenchError) -> (String, UInt16, String) {
        if url.hasPrefix("wss://") { throw BenchError.usage("wss:// is not supported here; bench the plain ws:// listener") }
        guard url.hasPrefix("ws://") else { throw BenchError.usage("--url must start with ws://, got \(url)") }
        let rest = url.dropFirst(5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = slash == rest.endIndex ? "/" : String(rest[slash...])
        var host = String(authority)
        var port = defaultPort
        if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let p = UInt16(authority[authority.index(after: colon)...]), p > 0 else {
                throw BenchError.usage("bad port in \(url)")
            }
            port = p
        }
        if host == "localhost" { host = "127.0.0.1" }
        var addr = in_addr()
        guard inet_pton(AF_INET, host, &addr) == 1 else {
            throw BenchError.usage("host must be an IPv4 address or localhost, got \(host)")
        }
        return (host, port, path)
    }
}

public enum BenchError: Error, CustomStringConvertible {
    case usage(String)
    case failed(String)
    public var description: String {
        switch self {
        case .usage(let m): return m
        case .failed(let m): return m
        }
    }
}

func percentEncode(_ s: String) -> String {
    var out = ""
    for b in s.utf8 {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            let hex = Array("0123456789ABCDEF".utf8)
            out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
        }
    }
    return out
}
