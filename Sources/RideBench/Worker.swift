import CBenchTLS
import Glibc

private let IP_BIND_ADDRESS_NO_PORT: Int32 = 24  // linux/in.h; not exported by Glibc
private let bufferSize = 4096                    // per connection; a tick is ~150 bytes
private let stdinToken = UInt32.max

private enum ConnState: UInt8 {
    case idle, connecting, tlsHandshake, sendingRequest, awaitingResponse, open, done
}

private struct Conn {
    var fd: Int32 = -1
    var tls: UnsafeMutableRawPointer?   // the connection's TLS session (wss://), owned here
    var state: ConnState = .idle
    var openAtT0 = false
    var len = 0             // bytes in this connection's receive buffer
    var written = 0         // bytes of the upgrade request already sent
    var ride = 0
    var creator = false     // sends {"type":"start"} for its ride before subscribing
    var seq = SeqTracker()
    var windowTicks: Int32 = 0
    var subscribeRetries: UInt8 = 0
}

/// One worker process: connects its share of the clients (index i belongs to worker
/// i mod P, so all workers walk the rides in the same order and a ride's creator connects
/// well before its other subscribers), speaks just enough RFC 6455 over non-blocking
/// sockets and one epoll, and reports to the parent over stdout.
final class Worker {
    let o: BenchOptions
    let index: Int
    let procs: Int
    let mine: [Int]                 // global client indices of this worker
    private var conns: UnsafeMutablePointer<Conn>
    private let buffers: UnsafeMutablePointer<UInt8>
    private let accepts: UnsafeMutablePointer<UInt8>   // expected Sec-WebSocket-Accept, 28 bytes each
    private var requests: [Int: [UInt8]] = [:]          // only while an upgrade request is partly written
    private let ep: Epoll
    private var rng = XorShiftRandom()
    private var report = WorkerReport()
    private var histogram = LatencyHistogram()
    private var window: BenchWindow?
    private var retries: [(due: Int64, conn: Int)] = []
    private var stdinBuffer: [UInt8] = []
    private var stdinClosed = false
    private var t0Done = false, t1Done = false
    private var cpuAtT0 = 0.0
    private let dst: sockaddr_in
    private let srcBase: UInt32
    private let tlsContext: UnsafeMutableRawPointer?

    init(options: BenchOptions, index: Int) {
        o = options
        self.index = index
        procs = options.effectiveProcs
        mine = Array(stride(from: index, to: options.clients, by: procs))
        conns = .allocate(capacity: mine.count)
        conns.initialize(repeating: Conn(), count: mine.count)
        // malloc'd but untouched pages cost nothing until a connection actually reads.
        buffers = .allocate(capacity: mine.count * bufferSize)
        accepts = .allocate(capacity: mine.count * 28)
        guard let e = Epoll() else { fatalError("epoll unavailable") }
        ep = e
        var d = sockaddr_in()
        d.sin_family = sa_family_t(AF_INET)
        d.sin_port = options.port.bigEndian
        inet_pton(AF_INET, options.host, &d.sin_addr)
        dst = d
        var s = in_addr()
        inet_pton(AF_INET, "127.0.0.1", &s)
        srcBase = UInt32(bigEndian: s.s_addr)
        if options.tls {
            guard let c = cbenchtls_ctx_new(options.caFile) else { fatalError("TLS: cannot load \(options.caFile ?? "the system's CA store")") }
            tlsContext = c
        } else {
            tlsContext = nil
        }
        report.worker = index
        report.attempted = mine.count
        let rides = options.effectiveRides
        for k in 0..<mine.count {
            let g = mine[k]
            conns[k].ride = g % rides
            conns[k].creator = options.effectiveCreate && g < rides
        }
    }

    deinit {
        conns.deinitialize(count: mine.count)
        conns.deallocate()
        buffers.deallocate()
        accepts.deallocate()
        close(ep.fd)
        if let tlsContext { cbenchtls_ctx_free(tlsContext) }
    }

    // MARK: - Run

    func run() -> Int32 {
        raiseFileLimit()
        signal(SIGPIPE, SIG_IGN)
        _ = fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK)
        ep.ctl(Epoll.ctlAdd, 0, events: Epoll.IN, token: stdinToken)

        let count = mine.count
        let rate = Double(o.ramp) / Double(procs)
        let inflightCap = max(1, o.inflight / procs)
        let start = monotonicMicros()
        let connectDeadline = start + Int64(o.connectTimeout) * 1_000_000
        var next = 0
        var inflight: Int
        var ready = false
        let events = UnsafeMutableRawPointer.allocate(byteCount: 4096 * Epoll.eventSize, alignment: 8)
        defer { events.deallocate() }

        while !stdinClosed {
            let now = monotonicMicros()
            let wall = realtimeMillis()
            if !ready {
                let allowed = min(count, Int(Double(now - start) / 1e6 * rate) + 1)
                inflight = next - report.failed - report.connected
                while next < allowed && inflight < inflightCap {
                    startConnect(next)
                    next += 1
                    inflight = next - report.failed - report.connected
                }
                inflight = next - report.failed - report.connected
                if (next == count && inflight == 0) || now > connectDeadline {
                    for k in 0..<count where conns[k].state != .open && conns[k].state != .done {
                        fail(k, "timeout")
                    }
                    report.connectSeconds = Double(monotonicMicros() - start) / 1e6
                    report.readyAtMillis = Int64(realtimeMillis())
                    ready = true
                    var r = report
                    r.event = "ready"
                    emit(r)
                }
            }
            processRetries(now: now)
            if let w = window {
                if !t0Done, Int64(wall) >= w.t0 {
                    t0Done = true
                    for k in 0..<count where conns[k].state == .open { conns[k].openAtT0 = true; report.openAtT0 += 1 }
                    cpuAtT0 = selfCPUSeconds()
                }
                if t0Done, !t1Done, Int64(wall) >= w.t1 {
                    t1Done = true
                    report.cpuSecondsInWindow = selfCPUSeconds() - cpuAtT0
                }
                if Int64(wall) >= w.end { break }
            }

            var timeout: Int32 = 100
            if !ready && next < count { timeout = 1 }
            if !retries.isEmpty { timeout = min(timeout, 20) }
            if let w = window {
                let target = Int64(wall) < w.t0 ? w.t0 : (Int64(wall) < w.t1 ? w.t1 : w.end)
                timeout = Int32(clamping: max(0, min(Int64(timeout), target - Int64(wall) + 1)))
            }
            let n = ep.wait(events, capacity: 4096, timeoutMillis: timeout)
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            for e in 0..<Int(n) {
                let (evs, token) = Epoll.event(events, e)
                if token == stdinToken { readStdin(); continue }
                if Int(token) < count { onEvent(Int(token), evs) }
            }
        }
        finish()
        return 0
    }

    // MARK: - Parent channel

    private func readStdin() {
        var tmp = [UInt8](repeating: 0, count: 512)
        while true {
            let r = tmp.withUnsafeMutableBytes { read(0, $0.baseAddress, 512) }
            if r > 0 { stdinBuffer += tmp[0..<r]; continue }
            if r == 0 { stdinClosed = true }  // parent gone: stop
            break
        }
        while let nl = stdinBuffer.firstIndex(of: 0x0A) {
            let line = String(decoding: stdinBuffer[..<nl], as: UTF8.self)
            stdinBuffer.removeSubrange(...nl)
            let parts = line.split(separator: " ")
            if parts.count == 4, parts[0] == "window", let a = Int64(parts[1]), let b = Int64(parts[2]), let c = Int64(parts[3]) {
                window = BenchWindow(t0: a, t1: b, end: c)
            }
        }
    }

    private func emit(_ r: WorkerReport) {
        guard let line = encodeJSONLine(r) else { return }
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        var off = 0
        while off < bytes.count {
            let w = bytes.withUnsafeBytes { write(1, $0.baseAddress! + off, bytes.count - off) }
            if w <= 0 { if errno == EINTR || errno == EAGAIN { continue }; return }
            off += w
        }
    }

    private func finish() {
        let count = mine.count
        var counts: [Int: Int] = [:]
        for k in 0..<count {
            let c = conns[k]
            if c.state == .open { report.openAtEnd += 1 }
            if c.openAtT0 { counts[Int(c.windowTicks), default: 0] += 1 }
            report.seqGaps += c.seq.gaps
            report.seqDuplicates += c.seq.duplicates
        }
        report.windowCounts = counts.sorted { $0.key < $1.key }.map { [$0.key, $0.value] }
        report.latency = histogram.sparse
        report.event = "result"
        emit(report)
        // RST instead of FIN: no TIME_WAIT pile-up on the client side between runs.
        for k in 0..<count where conns[k].fd >= 0 { closeConn(k, reset: true) }
    }

    // MARK: - Connections

    private func startConnect(_ k: Int) {
        let g = mine[k]
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { report.failed += 1; report.failReasons["socket", default: 0] += 1; conns[k].state = .done; return }
        conns[k].fd = fd
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if isLoopback {
            // Pick the port at connect() time (4-tuple unique), and spread the source
            // address so 19,000+ connections never run out of ephemeral ports.
            setsockopt(fd, Int32(IPPROTO_IP), IP_BIND_ADDRESS_NO_PORT, &one, socklen_t(MemoryLayout<Int32>.size))
            var src = sockaddr_in()
            src.sin_family = sa_family_t(AF_INET)
            src.sin_addr.s_addr = (srcBase + UInt32(g % o.sources)).bigEndian
            let b = withUnsafePointer(to: &src) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if b < 0 { fail(k, "address"); return }
        }
        var d = dst
        let r = withUnsafePointer(to: &d) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if r < 0 && errno != EINPROGRESS {
            fail(k, errno == EADDRNOTAVAIL || errno == EADDRINUSE ? "address" : "connect")
            return
        }
        if ep.ctl(Epoll.ctlAdd, fd, events: Epoll.IN | Epoll.OUT, token: UInt32(k)) < 0 { fail(k, "other"); return }
        conns[k].state = .connecting
    }

    private var isLoopback: Bool { o.host.hasPrefix("127.") }

    private func fail(_ k: Int, _ reason: String) {
        report.failed += 1
        report.failReasons[reason, default: 0] += 1
        closeConn(k, reset: true)
        conns[k].state = .done
    }

    private func lost(_ k: Int) {
        report.closedAfterOpen += 1
        if conns[k].openAtT0, let w = window, Int64(realtimeMillis()) < w.t1 { report.closedInWindow += 1 }
        closeConn(k, reset: true)
        conns[k].state = .done
    }

    private func closeConn(_ k: Int, reset: Bool) {
        let fd = conns[k].fd
        guard fd >= 0 else { return }
        if reset {
            var l = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        }
        if let t = conns[k].tls { cbenchtls_free(t); conns[k].tls = nil }
        close(fd)
        conns[k].fd = -1
        requests[k] = nil
    }

    private func upgradeRequest(_ k: Int) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 16)
        for i in 0..<16 { key[i] = UInt8.random(in: 0...255, using: &rng) }
        let keyString = Base64.encode(key)
        let accept = Array(websocketAccept(key: keyString).utf8)
        for i in 0..<28 { accepts[k * 28 + i] = accept[i] }
        let req = "GET \(o.requestTarget) HTTP/1.1\r\n" +
            "Host: \(o.host):\(o.port)\r\n" +
            "Upgrade: websocket\r\n" +
            "Connection: Upgrade\r\n" +
            "Sec-WebSocket-Key: \(keyString)\r\n" +
            "Sec-WebSocket-Version: 13\r\n" +
            "Sec-WebSocket-Protocol: ride.v1\r\n\r\n"
        return Array(req.utf8)
    }

    private func writeRequest(_ k: Int) {
        let req = requests[k] ?? upgradeRequest(k)
        let fd = conns[k].fd
        while conns[k].written < req.count {
            let off = conns[k].written
            let w = req.withUnsafeBytes { ioWrite(k, $0.baseAddress! + off, req.count - off) }
            if w < 0 {
                if errno == EAGAIN { requests[k] = req; return }
                fail(k, conns[k].tls == nil ? "connect" : "tls"); return
            }
            conns[k].written += w
        }
        requests[k] = nil
        conns[k].state = .awaitingResponse
        ep.ctl(Epoll.ctlMod, fd, events: Epoll.IN, token: UInt32(k))
    }

    /// Small control frames go out in one send; if the socket buffer is full (never for
    /// a client that only sends a subscribe and the odd pong) the frame is dropped.
    @discardableResult
    private func sendFrame(_ k: Int, opcode: UInt8, _ payload: some Collection<UInt8>) -> Bool {
        let f = maskedFrame(opcode: opcode, payload: payload, mask: UInt32.random(in: 0...UInt32.max, using: &rng))
        let w = f.withUnsafeBytes { ioWrite(k, $0.baseAddress!, f.count) }
        return w == f.count
    }

    /// recv(2) or TLS: bytes read, 0 at the end, -1 with errno (EAGAIN: nothing now).
    private func ioRead(_ k: Int, _ buf: UnsafeMutablePointer<UInt8>, _ len: Int) -> Int {
        guard let t = conns[k].tls else { return recv(conns[k].fd, buf, len, 0) }
        let r = cbenchtls_read(t, buf, len)
        if r > 0 { return r }
        switch Int32(r) {
        case CBENCHTLS_CLOSED: return 0
        case CBENCHTLS_WANT_READ, CBENCHTLS_WANT_WRITE: errno = EAGAIN; return -1
        default: errno = ECONNRESET; return -1
        }
    }

    /// send(2) or TLS: bytes written, or -1 with errno (EAGAIN: the socket buffer is full).
    private func ioWrite(_ k: Int, _ buf: UnsafeRawPointer, _ len: Int) -> Int {
        guard let t = conns[k].tls else { return send(conns[k].fd, buf, len, Int32(MSG_NOSIGNAL)) }
        let w = cbenchtls_write(t, buf, len)
        if w > 0 { return w }
        errno = w == CBENCHTLS_WANT_READ || w == CBENCHTLS_WANT_WRITE ? EAGAIN : ECONNRESET
        return -1
    }

    private func subscribe(_ k: Int) -> Bool {
        sendFrame(k, opcode: WSOpcode.text, Array("{\"type\":\"subscribe\",\"ride\":\"r\(conns[k].ride)\"}".utf8))
    }

    private func processRetries(now: Int64) {
        guard !retries.isEmpty else { return }
        var keep: [(due: Int64, conn: Int)] = []
        for r in retries {
            if r.due > now { keep.append(r); continue }
            if conns[r.conn].state == .open { _ = subscribe(r.conn) }
        }
        retries = keep
    }

    private func onEvent(_ k: Int, _ events: UInt32) {
        let st = conns[k].state
        if st == .done || conns[k].fd < 0 { return }
        if st == .connecting {
            guard events & (Epoll.OUT | Epoll.ERR | Epoll.HUP) != 0 else { return }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(conns[k].fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err != 0 { fail(k, err == EADDRNOTAVAIL ? "address" : "connect"); return }
            if let ctx = tlsContext {
                guard let t = cbenchtls_new(ctx, conns[k].fd, o.host) else { fail(k, "tls"); return }
                conns[k].tls = t
                conns[k].state = .tlsHandshake
            } else {
                conns[k].state = .sendingRequest
                conns[k].written = 0
            }
        }
        if conns[k].state == .tlsHandshake {
            switch cbenchtls_handshake(conns[k].tls) {
            case CBENCHTLS_DONE:
                conns[k].state = .sendingRequest
                conns[k].written = 0
                ep.ctl(Epoll.ctlMod, conns[k].fd, events: Epoll.IN | Epoll.OUT, token: UInt32(k))
            case CBENCHTLS_WANT_READ: ep.ctl(Epoll.ctlMod, conns[k].fd, events: Epoll.IN, token: UInt32(k)); return
            case CBENCHTLS_WANT_WRITE: ep.ctl(Epoll.ctlMod, conns[k].fd, events: Epoll.IN | Epoll.OUT, token: UInt32(k)); return
            default: fail(k, "tls"); return
            }
        }
        if conns[k].state == .sendingRequest { writeRequest(k); return }

        let buf = buffers + k * bufferSize
        for _ in 0..<64 {
            let have = conns[k].len
            if have >= bufferSize { report.protocolErrors += 1; break }
            let r = ioRead(k, buf + have, bufferSize - have)
            if r < 0 {
                if errno == EAGAIN || errno == EINTR { return }
                break
            }
            if r == 0 { break }
            let now = realtimeMillis()   // one receive time per read, like a real client
            conns[k].len += r
            if conns[k].state == .awaitingResponse {
                switch handleResponse(k) {
                case .failed: return
                case .needMore: continue
                case .open: break
                }
            }
            if !parseFrames(k, now: now) { break }
            // Drained; level-triggered epoll re-reports, except what TLS already decrypted.
            if r < bufferSize - have, conns[k].tls.map({ cbenchtls_pending($0) == 0 }) ?? true { return }
        }
        if conns[k].state == .open { lost(k) }
        else if conns[k].state == .awaitingResponse { fail(k, "eof") }
    }

    private enum Handshake { case failed, needMore, open }

    private func handleResponse(_ k: Int) -> Handshake {
        let buf = buffers + k * bufferSize
        let n = conns[k].len
        let bytes = UnsafeBufferPointer(start: buf, count: n)
        var end = -1
        if n >= 4 {
            for i in 0...(n - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
                end = i; break
            }
        }
        if end < 0 {
            if n >= bufferSize { fail(k, "handshake") ; return .failed }
            return .needMore
        }
        let head = String(decoding: bytes[0..<end], as: UTF8.self)
        guard head.hasPrefix("HTTP/1.1 101") else { fail(k, "handshake"); return .failed }
        var acceptOK = false
        let expected = String(decoding: UnsafeBufferPointer(start: accepts + k * 28, count: 28), as: UTF8.self)
        for line in head.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == "sec-websocket-accept" {
                acceptOK = line[line.index(after: colon)...].trimmingSpaces == expected
            }
        }
        guard acceptOK else { fail(k, "handshake"); return .failed }
        let rest = n - (end + 4)
        if rest > 0 { memmove(buf, buf + end + 4, rest) }
        conns[k].len = rest

        let c = conns[k]
        if o.authFrame, let token = o.token {
            let auth = "{\"type\":\"auth\",\"token\":\"\(token)\"}"
            guard sendFrame(k, opcode: WSOpcode.text, Array(auth.utf8)) else { fail(k, "handshake"); return .failed }
        }
        if c.creator {
            let start = "{\"type\":\"start\",\"id\":\"b-\(c.ride)\",\"ride\":\"r\(c.ride)\"}"
            guard sendFrame(k, opcode: WSOpcode.text, Array(start.utf8)) else { fail(k, "handshake"); return .failed }
        }
        guard subscribe(k) else { fail(k, "handshake"); return .failed }
        conns[k].state = .open
        report.connected += 1
        return .open
    }

    /// Parses every complete frame in the connection's buffer; false when the
    /// connection must be closed.
    private func parseFrames(_ k: Int, now: Double) -> Bool {
        let buf = UnsafeMutableRawBufferPointer(start: buffers + k * bufferSize, count: conns[k].len)
        var keep = true
        let consumed = consumeFrames(buf, maxFrame: bufferSize) { op, payload in
            switch op {
            case WSOpcode.text:
                onText(k, payload, now: now)
            case WSOpcode.ping:
                report.pings += 1
                sendFrame(k, opcode: WSOpcode.pong, payload)
            case WSOpcode.close:
                report.closesReceived += 1
                sendFrame(k, opcode: WSOpcode.close, payload.prefix(2))
                keep = false
                return false
            case WSOpcode.pong:
                break
            default:
                report.protocolErrors += 1
            }
            return true
        }
        guard let consumed else { report.protocolErrors += 1; return false }
        let left = conns[k].len - consumed
        if consumed > 0 && left > 0 { memmove(buf.baseAddress!, buf.baseAddress! + consumed, left) }
        conns[k].len = left
        return keep
    }

    private func onText(_ k: Int, _ p: UnsafeRawBufferPointer, now: Double) {
        report.messages += 1
        switch scanMessage(p) {
        case let .tick(seq, at):
            report.ticksTotal += 1
            conns[k].seq.observe(seq)
            if let w = window, w.contains(at: at) {
                conns[k].windowTicks += 1
                report.ticksInWindow += 1
                if report.windowMinSeq < 0 || seq < report.windowMinSeq { report.windowMinSeq = seq }
                if seq > report.windowMaxSeq { report.windowMaxSeq = seq }
                histogram.record(micros: Int64(((now - Double(at)) * 1000).rounded(.down)))
            }
        case let .error(code):
            if code == "conflict" { return }   // the ride is already running: fine
            if code == "ride_not_found", conns[k].subscribeRetries < 40 {
                // Its creator (maybe in another worker) has not started it yet: retry.
                conns[k].subscribeRetries += 1
                retries.append((monotonicMicros() + 250_000, k))
                return
            }
            report.errors[code.isEmpty ? "unknown" : code, default: 0] += 1
        case .other:
            break
        case .malformed:
            report.malformed += 1
        }
    }
}

extension Substring {
    var trimmingSpaces: String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

func raiseFileLimit() {
    var rl = rlimit()
    if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0 && rl.rlim_cur < rl.rlim_max {
        rl.rlim_cur = rl.rlim_max
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl)
    }
}

func selfCPUSeconds() -> Double {
    var ru = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &ru)
    return Double(ru.ru_utime.tv_sec) + Double(ru.ru_utime.tv_usec) / 1e6 +
        Double(ru.ru_stime.tv_sec) + Double(ru.ru_stime.tv_usec) / 1e6
}

/// Masking keys and handshake nonces need to be unpredictable to intermediaries, not
/// cryptographic: SystemRandomNumberGenerator costs a getrandom() syscall per call, which
/// showed up in profiles of the connect phase. Seeded once from the system generator.
struct XorShiftRandom: RandomNumberGenerator {
    private var state: UInt64
    init() {
        var sys = SystemRandomNumberGenerator()
        state = sys.next() | 1
    }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
