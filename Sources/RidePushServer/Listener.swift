import RideService
import Glibc

/// The one listening socket. Each service thread adopts a duplicate of it and accepts from
/// it; the kernel hands each connection to one of them. Owning it (instead of letting lws
/// listen) gives a clear "port in use" error, port 0 for tests, and lets us back off at the
/// file limit instead of spinning.
struct Listener {
    let fd: Int32
    let port: Int
    /// The address really bound, as text ("127.0.0.1", "::1", "0.0.0.0", "::").
    let address: String
    let isIPv6: Bool

    /// `host` is an IPv4 or IPv6 address, or `localhost` (127.0.0.1: the loopback address
    /// every client resolves, where ::1 may be missing).
    init(host: String, port: Int) throws(ServerError) {
        let literal = host == "localhost" ? "127.0.0.1" : host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET)
                    $0.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                    $0.pointee.sin_addr = v4
                }
            }
        } else if inet_pton(AF_INET6, literal, &v6) == 1 {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6)
                    $0.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                    $0.pointee.sin6_addr = v6
                }
            }
        } else {
            throw ServerError("--host \(host): not an IP address or localhost (e.g. 127.0.0.1, 0.0.0.0 for every IPv4 interface, ::1, or :: for every interface)")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError("cannot create a socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            // "::" means every interface, IPv4 too (as ::ffff:a.b.c.d), whatever the sysctl default.
            var zero: Int32 = 0
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        let shown = family == AF_INET6 ? "[\(literal)]" : literal
        if bound != 0 {
            let e = errno
            close(fd)
            if e == EADDRINUSE {
                throw ServerError("port \(port) on \(shown) is already in use (another ridepush or program is listening there): pick another with --port N, or make run PORT=N")
            }
            if e == EADDRNOTAVAIL {
                throw ServerError("cannot listen on \(shown):\(port): no interface of this machine has that address")
            }
            throw ServerError("cannot listen on \(shown):\(port): \(String(cString: strerror(e)))")
        }
        guard listen(fd, 4096) == 0 else {
            let e = errno
            close(fd)
            throw ServerError("cannot listen on \(shown):\(port): \(String(cString: strerror(e)))")
        }
        var actual = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.isIPv6 = family == AF_INET6
        self.port = withUnsafePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        self.address = Listener.text(actual)
    }

    /// The URL host for the bound address ("[::1]" for IPv6).
    var urlHost: String { isIPv6 ? "[\(address)]" : address }

    /// Where a browser on this machine reaches it: the loopback address when bound to every interface.
    var localURLHost: String {
        switch address {
        case "0.0.0.0": return "127.0.0.1"
        case "::": return "[::1]"
        default: return urlHost
        }
    }

    var isWildcard: Bool { address == "0.0.0.0" || address == "::" }

    private static func text(_ a: sockaddr_storage) -> String {
        var a = a
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        withUnsafePointer(to: &a) { p in
            if Int32(p.pointee.ss_family) == AF_INET6 {
                p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                    var addr = s.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &addr, &buf, socklen_t(buf.count))
                }
            } else {
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                    var addr = s.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &addr, &buf, socklen_t(buf.count))
                }
            }
        }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
