import Glibc

/// Plain HTTP connections' limits (issue 36, finding 2), decided here for the adapter's
/// handles (lws's wsi): each connection holds a place in the per-address limit, like a
/// WebSocket session, from its first request (with --trust-proxy the address the proxy names,
/// which only the headers say) until it goes, once per connection, not per request; and each
/// request with a body has one deadline, --handshake-timeout from its start, where lws's own
/// timeout restarts on every chunk (it re-arms PENDING_TIMEOUT_HTTP_CONTENT after each body
/// callback), so a body trickled a byte at a time would never time out.
package struct HTTPConnections<Handle: Hashable> {
    private var places: [Handle: String] = [:]
    private var deadlines: [Handle: Int64] = [:]

    package init() {}

    /// A request begins on `h`: nil if it may go on (its place taken now, or on an earlier
    /// request), else the 429 to answer before the connection is closed. `take` is the shared
    /// per-address count (RideServer.admit); a request that declares a body gets its deadline.
    package mutating func begin(_ h: Handle, peer: @autoclosure () -> String, take: (String) -> Bool, limit: Int,
                                hasBody: Bool, now: Int64, timeoutSeconds: Int) -> HTTPAnswer? {
        if places[h] == nil {
            let p = peer()
            guard take(p) else { return HTTPRouter.tooManyConnections(from: p, limit: limit) }
            places[h] = p
        }
        if hasBody { deadlines[h] = now + Int64(timeoutSeconds) * 1000 }
        return nil
    }

    /// Whether a body chunk arriving now is past its request's deadline (then: close).
    package func overdue(_ h: Handle, now: Int64) -> Bool { deadlines[h].map { now >= $0 } ?? false }

    /// The body is complete: no deadline until the next request.
    package mutating func bodyDone(_ h: Handle) { deadlines[h] = nil }

    /// Requests past their deadline with their body still arriving, to be closed (swept once
    /// a second, so a body whose next byte never comes is closed too).
    package mutating func takeOverdue(now: Int64) -> [Handle] {
        let due = deadlines.filter { $0.value <= now }.map(\.key)
        for h in due { deadlines[h] = nil }
        return due
    }

    /// The connection goes, or becomes a WebSocket session (which counts itself): the address
    /// whose place to give back, if it held one.
    package mutating func forget(_ h: Handle) -> String? {
        deadlines[h] = nil
        return places.removeValue(forKey: h)
    }
}

/// The address the per-address limit counts. With --trust-proxy and a loopback peer (a
/// reverse proxy on this host), the client's address from `X-Real-IP`, else the last
/// `X-Forwarded-For` entry (the one the proxy added); otherwise, and for anything that is
/// not an IP address, the TCP peer: a client cannot choose its address by a header.
package enum ClientAddress {
    package static func of(peer: String, trustProxy: Bool, forwarded: @autoclosure () -> String?) -> String {
        guard trustProxy, peer.hasPrefix("127.") || peer == "::1" || peer.hasPrefix("::ffff:127.") else { return peer }
        guard let last = forwarded()?.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).last,
              isIPAddress(String(last)) else { return peer }
        return String(last)
    }

    /// An IPv4 or IPv6 address in text form (what a proxy's X-Real-IP should hold).
    package static func isIPAddress(_ s: String) -> Bool {
        guard s.utf8.count < 64 else { return false }
        var v6 = in6_addr()
        return inet_pton(AF_INET, s, &v6) == 1 || inet_pton(AF_INET6, s, &v6) == 1
    }
}
