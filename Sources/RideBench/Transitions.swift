import Glibc
import RideOptions

/// `ridepush bench --transitions`: durable transitions per second. N connections each keep
/// `depth` requests in flight, every lane running start -> end cycles on rides of its own;
/// a reply is only sent after its transition is committed, so replies/s is durable
/// transitions/s. Also measures, in the same run, how many fsyncs/s the disk itself does
/// (`--disk DIR`, the store's directory) and reads the server's store commits from /metrics.
/// `--one-ride N`: one connection pausing and resuming one ride N times, one at a time,
/// printing the latency of the first and last 1,000 (a journal's cost must stay flat).
/// `--open-rides N`: lanes only start rides, until N are open (a city's worth, left open for
/// the measurements of scripts/bench-city.py); prints how long that took.
public struct TransitionOptions: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8080
    public var path = "/ws"
    public var connections = 64
    public var depth = 2          // with --one-ride: 1 unless given
    public var duration = 10
    public var disk = "."
    public var oneRide: Int?
    public var openRides: Int?
    public var token: String?
    public var json = false

    public var help = false

    public init() {}

    /// One line per option; `usage` (the help) is printed from the same table.
    static let table: OptionTable = {
        let d = TransitionOptions()
        return OptionTable(usage: """
            usage: ridepush bench --transitions [--url ws://127.0.0.1:8080/ws] [-n CONNECTIONS] [--depth K]
                                  [--duration S] [--disk DIR] [--one-ride N | --open-rides N] [--token T] [--json]
            """, about: """
            Run the server with a high --control-rate (e.g. 1000000): every lane sends as fast as
            replies come back.
            """, options: [
            .flag("--transitions", help: "this benchmark (instead of the tick fan-out one)"),
            .string("--url", placeholder: "URL", default: "ws://\(d.host):\(d.port)\(d.path)", help: "ws://HOST[:PORT]/PATH, IPv4 or localhost"),
            .int("-n", "--connections", "--clients", range: 1...4096, default: d.connections, help: "connections"),
            .int("--depth", placeholder: "K", range: 1...64, default: d.depth, help: "requests in flight per connection, one per lane; 1 with --one-ride unless given"),
            .int("-d", "--duration", placeholder: "S", range: 1...3600, default: d.duration, help: "seconds of load"),
            .string("--disk", placeholder: "DIR", default: d.disk, help: "where to measure the disk's own fsync rate: the store's directory"),
            .int("--one-ride", placeholder: "N", range: 1...1_000_000, help: "instead: N pause/resume on one ride, first/last 1,000 latencies"),
            .int("--open-rides", placeholder: "N", range: 1...10_000_000, help: "instead: start N rides and leave them open (no time limit on the load)"),
            .string("--token", placeholder: "T", help: "append ?token=T to the URL"),
            .flag("--json", help: "print only the JSON result on stdout"),
        ])
    }()

    public static let usage = table.help

    public static func parse(_ args: [String]) throws(BenchError) -> TransitionOptions {
        let p: ParsedOptions
        do { p = try table.parse(args) } catch { throw BenchError.usage(error.description) }
        var o = TransitionOptions()
        if p.help { o.help = true; return o }
        if let stray = p.positional.first { throw BenchError.usage(OptionError.unexpectedArgument(stray).description) }
        (o.host, o.port, o.path) = try BenchOptions.parseURL(p.string("--url")!)
        o.connections = p.int("--connections")!
        o.duration = p.int("--duration")!
        o.disk = p.string("--disk")!
        o.oneRide = p.int("--one-ride")
        o.openRides = p.int("--open-rides")
        if o.oneRide != nil && o.openRides != nil { throw BenchError.usage("--one-ride and --open-rides are two different benchmarks; give one") }
        o.depth = o.oneRide != nil && !p.isGiven("--depth") ? 1 : p.int("--depth")!
        o.token = p.string("--token")
        o.json = p.flag("--json")
        return o
    }
}

/// A blocking client connection, read through epoll by the bench loop.
final class BenchSocket {
    let fd: Int32
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    var filled = 0

    init(host: String, port: UInt16, target: String) throws(BenchError) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .failed("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { close(fd); throw .failed("connect \(host):\(port): \(String(cString: strerror(errno)))") }
        let request = "GET \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ride.v1\r\n\r\n"
        send(Array(request.utf8))
        // Headers, byte by byte up to the blank line: what follows belongs to the frame parser.
        var head: [UInt8] = []
        var b: UInt8 = 0
        while !(head.count >= 4 && head.suffix(4).elementsEqual([13, 10, 13, 10])) {
            guard recv(fd, &b, 1, 0) == 1 else { close(fd); throw .failed("handshake: connection closed") }
            head.append(b)
            if head.count > 8192 { close(fd); throw .failed("handshake: headers too long") }
        }
        guard String(decoding: head.prefix(12), as: UTF8.self) == "HTTP/1.1 101" else {
            close(fd)
            throw .failed("handshake refused: \(String(decoding: head.prefix(80), as: UTF8.self))")
        }
    }

    func send(_ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + off, bytes.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { if errno == EINTR { continue }; return }
            off += n
        }
    }

    func sendText(_ s: String) { send(maskedFrame(opcode: WSOpcode.text, payload: Array(s.utf8), mask: 0x1234_5678)) }

    /// Reads what is there (non-blocking) and calls `onText` for each text message.
    /// Returns false when the peer closed.
    func drain(_ onText: (UnsafeRawBufferPointer) -> Void) -> Bool {
        while true {
            if filled == buffer.count { return false }
            let room = buffer.count - filled
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + filled, room, Int32(MSG_DONTWAIT)) }
            if n == 0 { return false }
            if n < 0 { return errno == EAGAIN || errno == EINTR }
            filled += n
            // A read that did not fill the room took everything there was: return without the
            // read that would only say EAGAIN (epoll is level-triggered and reports what comes next).
            let more = n == room
            let used = buffer.withUnsafeMutableBytes { p -> Int? in
                consumeFrames(UnsafeMutableRawBufferPointer(rebasing: p[..<filled]), maxFrame: p.count) { op, payload in
                    if op == WSOpcode.text { onText(payload) }
                    return op != WSOpcode.close
                }
            }
            guard let used else { return false }
            if used > 0 {
                buffer.withUnsafeMutableBytes { p in
                    if used < filled { memmove(p.baseAddress!, p.baseAddress! + used, filled - used) }
                }
                filled -= used
            }
            if !more { return true }
        }
    }

    /// Blocks until the next text message (for the one-ride mode).
    func next() -> [UInt8]? {
        var out: [UInt8]?
        while out == nil {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 10_000) == 1 else { return nil }
            var got: [[UInt8]] = []
            guard drain({ got.append(Array($0)) }) else { return got.first }
            out = got.first
            if got.count > 1 { return nil }  // one request in flight: never more than one reply
        }
        return out
    }

    deinit { close(fd) }
}

enum TransitionBench {
    static func run(_ o: TransitionOptions) -> Int32 {
        do {
            if let n = o.oneRide { return try oneRide(o, n) }
            return try load(o)
        } catch {
            printErr("ridepush bench --transitions: \(error)")
            return 1
        }
    }

    static func target(_ o: TransitionOptions) -> String {
        guard let t = o.token else { return o.path }
        return o.path + (o.path.contains("?") ? "&" : "?") + "token=" + percentEncode(t)
    }

    /// The disk's own rate: append 4 KiB and fsync, over and over, for `seconds`.
    static func rawFsyncRate(dir: String, seconds: Double) -> Double {
        let path = dir + "/ridepush-bench-fsync-\(getpid()).tmp"
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_APPEND, 0o600)
        guard fd >= 0 else { return 0 }
        defer { close(fd); unlink(path) }
        let block = [UInt8](repeating: 0x61, count: 4096)
        let start = monotonicMicros()
        var n = 0
        while Double(monotonicMicros() - start) < seconds * 1e6 {
            _ = block.withUnsafeBytes { write(fd, $0.baseAddress!, 4096) }
            fsync(fd)
            n += 1
        }
        return Double(n) / (Double(monotonicMicros() - start) / 1e6)
    }

    /// A counter from the server's /metrics, or nil (an older server without it).
    static func storeCounter(_ o: TransitionOptions, _ name: String) -> Double? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = o.port.bigEndian
        inet_pton(AF_INET, o.host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { return nil }
        let req = Array("GET /metrics HTTP/1.1\r\nHost: \(o.host)\r\nConnection: close\r\n\r\n".utf8)
        _ = req.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n <= 0 { break }
            body += chunk[..<n]
        }
        let text = String(decoding: body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    static func load(_ o: TransitionOptions) throws(BenchError) -> Int32 {
        let goal = o.openRides
        let fsyncRate = goal == nil ? rawFsyncRate(dir: o.disk, seconds: 2) : 0
        guard let ep = Epoll() else { throw .failed("epoll unavailable") }
        var socks: [BenchSocket] = []
        for _ in 0..<o.connections {
            let s = try BenchSocket(host: o.host, port: o.port, target: target(o))
            ep.ctl(Epoll.ctlAdd, s.fd, events: Epoll.IN, token: UInt32(socks.count))
            socks.append(s)
        }
        var lanes = TransitionLanes(count: o.connections * o.depth, run: Int(getpid()), startsOnly: goal != nil)
        var outstanding = 0
        var ok = 0, errors = 0
        var firstError: String?
        var stray: String?
        var hist = LatencyHistogram()
        // One send per connection per turn: the requests its replies made room for go out
        // together (a pipelining client's writes), each timed from that send.
        var out = [UInt8]()
        out.reserveCapacity(4096)
        var batch: [Int] = []
        func flush(_ s: BenchSocket) {
            guard !out.isEmpty else { return }
            let t = monotonicMicros()
            for lane in batch { lanes.sentAt[lane] = t }
            outstanding += batch.count
            s.send(out)
            out.removeAll(keepingCapacity: true)
            batch.removeAll(keepingCapacity: true)
        }
        let commits0 = storeCounter(o, "ridepush_store_commits_total"), syncs0 = storeCounter(o, "ridepush_store_syncs_total")
        let start = monotonicMicros()
        // With a target count of rides there is no time limit: at most a day, every wait bounded.
        let stopAt = start + Int64(goal == nil ? o.duration : 86_400) * 1_000_000
        var sent = 0
        /// Whether another request may go out: the time is not up, nor (with --open-rides) the count.
        func more() -> Bool {
            guard let goal else { return true }
            guard sent < goal else { return false }
            sent += 1
            return true
        }
        for (c, s) in socks.enumerated() {
            for lane in c * o.depth..<(c + 1) * o.depth where more() { lanes.appendRequest(lane, to: &out); batch.append(lane) }
            flush(s)
        }
        var events = [UInt8](repeating: 0, count: Epoll.eventSize * 256)
        var sending = true
        let drainDeadline = stopAt + 15_000_000
        while outstanding > 0 {
            let now = monotonicMicros()
            if sending, now >= stopAt { sending = false }
            if now > drainDeadline { throw .failed("\(outstanding) replies missing 15 s after the load stopped") }
            let n = events.withUnsafeMutableBytes { ep.wait($0.baseAddress!, capacity: 256, timeoutMillis: 100) }
            for i in 0..<max(0, Int(n)) {
                let (_, token) = events.withUnsafeMutableBytes { Epoll.event($0.baseAddress!, i) }
                let s = socks[Int(token)]
                let alive = s.drain { payload in
                    guard let lane = lanes.lane(answeredBy: payload) else {
                        // Not the reply to a request in flight: the figures would not be what they say.
                        stray = stray ?? String(decoding: payload.prefix(200), as: UTF8.self)
                        return
                    }
                    let t = monotonicMicros()
                    outstanding -= 1
                    if isStateReply(payload) {
                        ok += 1
                        hist.record(micros: t - lanes.sentAt[lane])
                    } else {
                        errors += 1
                        if firstError == nil { firstError = String(decoding: payload, as: UTF8.self) }
                    }
                    lanes.answered(lane)
                    if sending, more() { lanes.appendRequest(lane, to: &out); batch.append(lane) }
                }
                flush(s)
                if let stray { throw .failed("a message that answers no request in flight: \(stray)") }
                if !alive { throw .failed("the server closed a connection (\(firstError ?? "no error message"))") }
            }
        }
        let elapsed = Double(monotonicMicros() - start) / 1e6
        let commits1 = storeCounter(o, "ridepush_store_commits_total"), syncs1 = storeCounter(o, "ridepush_store_syncs_total")
        let rate = Double(ok) / elapsed
        var commitsPerSecond: Double?
        if let a = commits0, let b = commits1 { commitsPerSecond = (b - a) / elapsed }
        // A store that syncs its log apart from its commits fsyncs once per sync, else once per commit.
        var fsyncsPerSecond = commitsPerSecond
        if let a = syncs0, let b = syncs1, b > a { fsyncsPerSecond = (b - a) / elapsed }
        let p50 = hist.percentileMillis(0.5) ?? 0, p99 = hist.percentileMillis(0.99) ?? 0
        if let goal {
            if o.json {
                print(#"{"open_rides":\#(ok),"target":\#(goal),"seconds":\#(String(format: "%.2f", elapsed)),"starts_per_s":\#(Int(rate)),"p99_ms":\#(p99),"errors":\#(errors)}"#)
            } else {
                print(String(format: "open rides: %d of %d started in %.1f s (%.0f/s, reply p99 %.1f ms, %d errors)", ok, goal, elapsed, rate, p99, errors))
                if let firstError { print("  first error: \(firstError)") }
            }
            return errors == 0 && ok == goal ? 0 : 1
        }
        let fsyncText = fsyncsPerSecond.map { String(format: "%.0f", $0) } ?? "n/a (server has no store metric)"
        let commitText = commitsPerSecond.map { String(format: "%.0f", $0) } ?? "n/a"
        if o.json {
            print(#"{"connections":\#(o.connections),"depth":\#(o.depth),"transitions_per_s":\#(Int(rate)),"p50_ms":\#(p50),"p99_ms":\#(p99),"store_fsyncs_per_s":\#(fsyncsPerSecond.map { String(Int($0)) } ?? "null"),"store_commits_per_s":\#(commitsPerSecond.map { String(Int($0)) } ?? "null"),"disk_fsyncs_per_s":\#(Int(fsyncRate)),"errors":\#(errors)}"#)
        } else {
            print("transitions: \(o.connections) connections x \(o.depth) in flight for \(String(format: "%.1f", elapsed)) s")
            print(String(format: "  durable transitions/s  %.0f  (%d replies, %d errors)", rate, ok, errors))
            print(String(format: "  reply latency          p50 %.1f ms  p99 %.1f ms  max %.1f ms", p50, p99, hist.maxMillis ?? 0))
            print("  store fsyncs/s         \(fsyncText)  (commits/s \(commitText))")
            print(String(format: "  disk's own fsyncs/s    %.0f  (4 KiB append + fsync in %@, measured first)", fsyncRate, o.disk))
            print(String(format: "  transitions per fsync the disk allows: %.2f", fsyncRate > 0 ? rate / fsyncRate : 0))
            if let firstError { print("  first error: \(firstError)") }
        }
        return errors == 0 ? 0 : 1
    }

    static func oneRide(_ o: TransitionOptions, _ n: Int) throws(BenchError) -> Int32 {
        let s = try BenchSocket(host: o.host, port: o.port, target: target(o))
        let ride = "one-\(getpid())"
        s.sendText(#"{"type":"start","id":"s","ride":"\#(ride)"}"#)
        guard let r = s.next(), String(decoding: r, as: UTF8.self).contains(#""state""#) else { throw .failed("start refused") }
        // `depth` requests in flight on the one ride (pause, resume, pause, … in order: the
        // server decides each against the one before it), each timed from send to reply.
        var latencies = [Int64](repeating: 0, count: n)
        var sentAt = [Int64](repeating: 0, count: n)
        var next = 0, done = 0
        func send() {
            let cmd = next % 2 == 0 ? "pause" : "resume"
            sentAt[next] = monotonicMicros()
            s.sendText(#"{"type":"\#(cmd)","id":"o\#(next)","ride":"\#(ride)"}"#)
            next += 1
        }
        let t0 = monotonicMicros()
        while next < min(n, o.depth) { send() }
        var failure: String?
        while done < n, failure == nil {
            var pfd = pollfd(fd: s.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 15_000) == 1 else { throw .failed("no reply to request \(done) in 15 s") }
            let alive = s.drain { payload in
                let text = String(decoding: payload, as: UTF8.self)
                guard text.hasPrefix(#"{"type":"state""#), let r = stringRange(payload, key: "id") else {
                    failure = failure ?? text
                    return
                }
                let id = String(decoding: UnsafeRawBufferPointer(rebasing: payload[r]), as: UTF8.self)
                guard let i = Int(id.dropFirst()), i < n else { return }
                latencies[i] = monotonicMicros() - sentAt[i]
                done += 1
                if next < n { send() }
            }
            if !alive { throw .failed("the server closed the connection") }
        }
        if let failure { throw .failed("refused after \(done): \(failure)") }
        let total = Double(monotonicMicros() - t0) / 1e6
        func mean(_ xs: ArraySlice<Int64>) -> Double { Double(xs.reduce(0, +)) / Double(max(1, xs.count)) / 1000 }
        func p99(_ xs: ArraySlice<Int64>) -> Double { let s = xs.sorted(); return Double(s[min(s.count - 1, s.count * 99 / 100)]) / 1000 }
        let k = min(1000, n)
        let first = latencies.prefix(k), last = latencies.suffix(k)
        print("one ride: \(n) pause/resume, \(o.depth) in flight, \(String(format: "%.1f", total)) s (\(String(format: "%.0f", Double(n) / total))/s)")
        print(String(format: "  first %d: mean %.2f ms  p99 %.2f ms", k, mean(first), p99(first)))
        print(String(format: "  last  %d: mean %.2f ms  p99 %.2f ms  (last/first mean %.2f)", k, mean(last), p99(last), mean(last) / max(0.001, mean(first))))
        // Every tenth of the run, so a trend shows apart from a burst of machine load.
        let tenth = max(1, n / 10)
        let means = stride(from: 0, to: n, by: tenth).map { String(format: "%.2f", mean(latencies[$0..<min(n, $0 + tenth)])) }
        print("  mean ms by tenth: " + means.joined(separator: " "))
        s.sendText(#"{"type":"end","id":"e","ride":"\#(ride)"}"#)
        _ = s.next()
        return 0
    }
}
