import Glibc

/// `ridepush bench` flags. Workers get the parent's arguments plus `--worker I --procs P`,
/// so every derived default below is computed the same way in every process.
public struct BenchOptions: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    public var path = "/ws"
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

    /// Request target: the path plus `token=` when a token is given.
    public var requestTarget: String {
        guard let token else { return path }
        return path + (path.contains("?") ? "&" : "?") + "token=" + percentEncode(token)
    }

    public static let usage = """
    usage: ridepush bench [--url ws://127.0.0.1:8080/ws] [-n CLIENTS] [-r RIDES] [--duration S]
                          [--ramp CONNECTS_PER_S] [--inflight K] [--sources S] [--procs P]
                          [--pid SERVER_PID] [--token T] [--create | --no-create] [--json]

    Opens CLIENTS WebSocket connections (ride.v1), subscribes them to RIDES rides (two per
    ride by default), waits until every connection is open or failed, then measures ticks
    for --duration seconds and reports messages/s, fan-out latency (receive time - the
    tick's "at"), missed ticks (seq gaps), and - with --pid - the server's CPU per delivered
    tick and RSS per subscriber.

      --url URL            ws://HOST[:PORT]/PATH (IPv4 or localhost; default ws://127.0.0.1:8080/ws)
      -n, --clients N      connections (default 1000)
      -r, --rides R        rides (default N/2: two subscribers per ride)
      --duration S         measurement window in seconds after all connected (default 20)
      --ramp RATE          connection attempts per second, all processes together (default 2000)
      --inflight K         handshakes in flight, all processes together (default 512)
      --sources S          spread source addresses over 127.0.0.1..127.0.0.S (default 4)
      --procs P            worker processes (default ceil(N/9000); at most 19000 connections each)
      --pid PID            server process to sample in /proc (CPU and RSS)
      --token T            append ?token=T to the URL
      --create             first client of each ride sends {"type":"start"} before subscribing
                           (default when the path is /ws); --no-create turns it off
      --connect-timeout S  give up on connections still pending after S seconds (default 60)
      --warmup S, --grace S  seconds before the window / after it for late ticks (1 / 3)
      --json               print only the JSON result on stdout
      -h, --help           this help
    """

    /// Parses flags; later flags override earlier ones (workers rely on that).
    public static func parse(_ args: [String]) throws(BenchError) -> BenchOptions {
        var o = BenchOptions()
        var i = 0
        func value(_ flag: String) throws(BenchError) -> String {
            i += 1
            guard i < args.count else { throw BenchError.usage("\(flag) needs a value") }
            return args[i]
        }
        func int(_ flag: String, _ range: ClosedRange<Int>) throws(BenchError) -> Int {
            let s = try value(flag)
            guard let v = Int(s), range.contains(v) else {
                throw BenchError.usage("\(flag) must be an integer in \(range.lowerBound)...\(range.upperBound), got \(s)")
            }
            return v
        }
        while i < args.count {
            var a = args[i]
            // --flag=value form
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                let v = String(a[a.index(after: eq)...])
                a = String(a[..<eq])
                var rebuilt = Array(args[..<i]); rebuilt.append(a); rebuilt.append(v); rebuilt += args[(i + 1)...]
                return try parse(rebuilt)
            }
            switch a {
            case "--url":
                let (h, p, path) = try parseURL(try value(a))
                o.host = h; o.port = p; o.path = path
            case "-n", "--clients": o.clients = try int(a, 1...1_000_000)
            case "-r", "--rides": o.rides = try int(a, 1...1_000_000)
            case "--duration", "-d": o.duration = try int(a, 1...3600)
            case "--ramp", "-c": o.ramp = try int(a, 1...1_000_000)
            case "--inflight", "-i": o.inflight = try int(a, 1...1_000_000)
            case "--sources", "-s": o.sources = try int(a, 1...254)
            case "--procs": o.procs = try int(a, 1...256)
            case "--pid", "-P": o.serverPID = Int32(try int(a, 1...Int(Int32.max)))
            case "--json": o.json = true
            case "--token": o.token = try value(a)
            case "--create": o.create = true
            case "--no-create": o.create = false
            case "--connect-timeout": o.connectTimeout = try int(a, 1...3600)
            case "--warmup": o.warmup = try int(a, 0...60)
            case "--grace": o.grace = try int(a, 0...60)
            case "--worker": o.workerIndex = try int(a, 0...255)
            case "-h", "--help": o.help = true
            default: throw BenchError.usage("unknown argument \(a)")
            }
            i += 1
        }
        let p = o.effectiveProcs
        if (o.clients + p - 1) / p > maxPerProcess {
            throw BenchError.usage("\(o.clients) clients over \(p) processes is more than \(maxPerProcess) per process (file limit); raise --procs")
        }
        if p > o.clients { throw BenchError.usage("--procs \(p) is more than --clients \(o.clients)") }
        if let w = o.workerIndex, w >= p { throw BenchError.usage("--worker \(w) out of range for --procs \(p)") }
        return o
    }

    static func parseURL(_ url: String) throws(BenchError) -> (String, UInt16, String) {
        if url.hasPrefix("wss://") { throw BenchError.usage("wss:// is not supported; bench the plain ws:// listener") }
        guard url.hasPrefix("ws://") else { throw BenchError.usage("--url must start with ws://, got \(url)") }
        let rest = url.dropFirst(5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = slash == rest.endIndex ? "/" : String(rest[slash...])
        var host = String(authority)
        var port: UInt16 = 80
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
