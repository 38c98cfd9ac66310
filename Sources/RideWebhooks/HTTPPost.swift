import Glibc
import RideCore

/// One HTTP/1.1 POST with a hard deadline over its whole life (connect, TLS, write, the status line),
/// on a non-blocking socket waited on with poll(2): a receiver that accepts and then says
/// nothing costs `timeout`, never more. Only the status code is read; the connection is closed
/// after it (`Connection: close`), so no response body is buffered. Blocks the calling thread:
/// run it on the sender's own threads, never a service or store thread.
///
/// Name resolution (getaddrinfo) is outside the deadline, as libc offers no bound on it; use an
/// address or a host the resolver answers locally.
public enum HTTPPost {
    public static let defaultTimeout: Int64 = 5_000
    /// A status line and headers longer than this are not a webhook receiver's answer.
    static let maxResponseHead = 16 * 1024

    /// `tls`: the context for an `https` URL (nil: the system's trust store).
    public static func send(to url: WebhookURL, headers: [(String, String)], body: [UInt8],
                            timeout: Int64 = defaultTimeout, tls: TLSClient? = nil) -> DeliveryResult {
        var head = "POST \(url.target) HTTP/1.1\r\nHost: \(url.hostHeader)\r\n"
        head += "User-Agent: RidePush-Webhooks/1\r\nContent-Type: application/json\r\n"
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n"
        for (name, value) in headers {
            // Our own values; a CR or LF would split the request, so refuse rather than send.
            guard !name.utf8.contains(where: { $0 < 0x21 || $0 == UInt8(ascii: ":") }),
                  !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else {
                return .failed("invalid header \(name)")
            }
            head += "\(name): \(value)\r\n"
        }
        head += "\r\n"
        let deadline = systemMicros(CLOCK_MONOTONIC) / 1000 + timeout
        let fd: Int32
        switch connect(host: url.host, port: url.port, deadline: deadline) {
        case .success(let socket): fd = socket
        case .failure(let failure): return failure.result
        }
        defer { close(fd) }
        var session: TLSSession?
        if url.secure {
            let client: TLSClient
            if let tls { client = tls } else {
                switch TLSClient.system {
                case .success(let system): client = system
                case .failure(let error): return .failed(error.message)
                }
            }
            switch client.connect(fd: fd, host: url.host, deadline: deadline) {
            case .success(let s): session = s
            case .failure(let failure): return failure.result
            }
        }
        defer { session?.close() }
        let stream = Stream(fd: fd, tls: session)
        if let failure = stream.write(Array(head.utf8) + body, deadline: deadline) { return failure.result }
        return readStatus(stream, deadline: deadline)
    }

    /// The connected socket, with TLS on it or not.
    private struct Stream {
        let fd: Int32
        let tls: TLSSession?

        func write(_ bytes: [UInt8], deadline: Int64) -> Failure? {
            if let tls { return tls.write(fd: fd, bytes, deadline: deadline) }
            return HTTPPost.writeAll(fd, bytes, deadline: deadline)
        }

        func read(into chunk: inout [UInt8], deadline: Int64) -> Result<Int, Failure> {
            if let tls { return tls.read(fd: fd, into: &chunk, deadline: deadline) }
            return HTTPPost.readSome(fd, into: &chunk, deadline: deadline)
        }
    }

    struct Failure: Error { let result: DeliveryResult }

    private static func remaining(_ deadline: Int64) -> Int32 {
        Int32(clamping: max(0, deadline - systemMicros(CLOCK_MONOTONIC) / 1000))
    }

    /// Waits for `events` on `fd` until the deadline: true when ready, false on timeout.
    static func wait(_ fd: Int32, _ events: Int16, deadline: Int64) -> Bool {
        while true {
            let left = remaining(deadline)
            guard left > 0 else { return false }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&p, 1, left)
            if n > 0 { return true }
            if n == 0 { return false }
            if errno != EINTR { return true }  // let the following call report the error
        }
    }

    private static func connect(host: String, port: UInt16, deadline: Int64) -> Result<Int32, Failure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(Failure(result: .failed("cannot resolve \(host): \(String(cString: gai_strerror(status)))")))
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address for \(host)"
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { lastError = "socket: \(String(cString: strerror(errno)))"; continue }
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return .success(fd) }
            guard errno == EINPROGRESS else {
                lastError = "connect: \(String(cString: strerror(errno)))"
                close(fd)
                continue
            }
            guard wait(fd, Int16(POLLOUT), deadline: deadline) else {
                close(fd)
                return .failure(Failure(result: .timeout))
            }
            var soError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
            if soError == 0 { return .success(fd) }
            lastError = "connect: \(String(cString: strerror(soError)))"
            close(fd)
        }
        return .failure(Failure(result: .failed(lastError)))
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], deadline: Int64) -> Failure? {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { offset += n; continue }
            if n < 0, errno == EINTR { continue }
            guard n < 0, errno == EAGAIN || errno == EWOULDBLOCK else {
                return Failure(result: .failed("send: \(String(cString: strerror(errno)))"))
            }
            guard wait(fd, Int16(POLLOUT), deadline: deadline) else { return Failure(result: .timeout) }
        }
        return nil
    }

    private static func readSome(_ fd: Int32, into chunk: inout [UInt8], deadline: Int64) -> Result<Int, Failure> {
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 { return .success(n) }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else {
                return .failure(Failure(result: .failed("recv: \(String(cString: strerror(errno)))")))
            }
            guard wait(fd, Int16(POLLIN), deadline: deadline) else { return .failure(Failure(result: .timeout)) }
        }
    }

    /// Reads until the final (non-1xx) status line is complete and returns its code.
    private static func readStatus(_ stream: Stream, deadline: Int64) -> DeliveryResult {
        var received = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            switch parseStatus(received) {
            case .status(let code): return .status(code)
            case .invalid: return .failed("not an HTTP response")
            case .incomplete: break
            }
            guard received.count < maxResponseHead else { return .failed("response head too long") }
            switch stream.read(into: &chunk, deadline: deadline) {
            case .success(0):
                return .failed(received.isEmpty ? "connection closed without a response" : "connection closed mid-response")
            case .success(let n):
                received += chunk.prefix(n)
            case .failure(let failure):
                return failure.result
            }
        }
    }

    enum Parsed: Equatable { case status(Int), incomplete, invalid }

    /// The first final status in `bytes`: 1xx interim responses (with their headers) are
    /// skipped. Internal for tests.
    static func parseStatus(_ bytes: [UInt8]) -> Parsed {
        var start = 0
        while true {
            // "HTTP/1.x NNN": each byte checked as it arrives, so a wrong answer is known early.
            let available = min(bytes.count - start, 12)
            for i in 0..<available {
                let c = bytes[start + i]
                let fits = switch i {
                case 0..<7: c == Array("HTTP/1.".utf8)[i]
                case 7: c == UInt8(ascii: "0") || c == UInt8(ascii: "1")
                case 8: c == UInt8(ascii: " ")
                default: c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")
                }
                guard fits else { return .invalid }
            }
            guard available == 12 else { return .incomplete }
            let digits = bytes[start + 9..<start + 12]
            let code = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard code >= 100, code <= 599 else { return .invalid }
            if code >= 200 { return .status(code) }
            // An interim response: skip to the end of its header block.
            guard let end = headEnd(bytes, from: start) else { return .incomplete }
            start = end
        }
    }

    private static func headEnd(_ bytes: [UInt8], from: Int) -> Int? {
        var i = from
        while i + 3 < bytes.count {
            if bytes[i] == 0x0D, bytes[i + 1] == 0x0A, bytes[i + 2] == 0x0D, bytes[i + 3] == 0x0A { return i + 4 }
            i += 1
        }
        return nil
    }
}
