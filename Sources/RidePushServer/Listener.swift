import Glibc

/// The one listening socket. Each service thread adopts a duplicate of it and accepts from
/// it; the kernel hands each connection to one of them. Owning it (instead of letting lws
/// listen) gives a clear "port in use" error, port 0 for tests, and lets us back off at the
/// file limit instead of spinning.
struct Listener {
    let fd: Int32
    let port: Int

    init(host: String, port: Int) throws(ServerError) {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            throw ServerError("--host \(host): not an IPv4 address (use e.g. 127.0.0.1 or 0.0.0.0)")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError("cannot create a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound != 0 {
            let e = errno
            close(fd)
            if e == EADDRINUSE {
                throw ServerError("port \(port) on \(host) is already in use (another ridepush or program is listening there; pick another with --port)")
            }
            throw ServerError("cannot listen on \(host):\(port): \(String(cString: strerror(e)))")
        }
        guard listen(fd, 4096) == 0 else {
            let e = errno
            close(fd)
            throw ServerError("cannot listen on \(host):\(port): \(String(cString: strerror(e)))")
        }
        var actual = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.port = Int(UInt16(bigEndian: actual.sin_port))
    }
}

/// An IPv4 or IPv6 address in text form (what a proxy's X-Real-IP should hold).
func isIPAddress(_ s: String) -> Bool {
    guard s.utf8.count < 64 else { return false }
    var v6 = in6_addr()
    return inet_pton(AF_INET, s, &v6) == 1 || inet_pton(AF_INET6, s, &v6) == 1
}
