import RideAuth
import RideProtocol

/// What an HTTP request asks for, once its route is found. The adapter runs the handler each
/// case names; it decides nothing about paths, methods or tokens.
package enum HTTPEndpoint: Equatable, Sendable {
    case health, metrics, plans, zones, quote, ridesListing
    /// Under `/v1/webhooks/` (WebhookDesk.swift).
    case webhooks(WebhookOp)
    /// `GET /rides/{id}`: the id is checked before the token is (it is never echoed).
    case rideDocument(id: String)
    /// A server API POST (ServerAPIRequest.swift admits its body).
    case serverAPI(ServerAPIRoute)
    /// Anything else under GET: a file of the page's folder (or 404).
    case file(path: String)
}

/// Who may call a route; judged by `HTTPRouter.authorize`, the one token check of every route.
package enum HTTPAccess: Equatable, Sendable {
    case anyone
    /// With authentication on, a valid token; the handler judges it against what it reads (the
    /// ride's owner).
    case token
    /// With authentication on, an operator (`ops`) token; `what` names the route in the 403.
    case ops(what: String)
}

package enum HTTPMethod: Equatable, Sendable {
    case get, head, post
    /// Anything else lws parsed (PUT, DELETE, OPTIONS, PATCH…).
    case other
}

/// The table of every HTTP route, in the manner of Hummingbird's router: a method and a path
/// in, the endpoint and who may call it out, or the refusal to send. Pure: tested request in,
/// answer out, no socket (HTTPRouterTests).
package enum HTTPRouter {
    package struct Match: Equatable, Sendable {
        package let endpoint: HTTPEndpoint
        package let access: HTTPAccess
    }

    /// A request no route takes. `allow`: the methods the path takes (405); `close`: the answer
    /// ends the connection (a request whose body, if any, was not read).
    package struct Refusal: Error, Equatable, Sendable {
        package let answer: HTTPAnswer
        package var allow: String?
        package var close = true
    }

    /// The read-only routes: exact paths, GET and HEAD.
    static let reads: [String: (HTTPEndpoint, HTTPAccess)] = [
        "/healthz": (.health, .anyone),
        "/metrics": (.metrics, .anyone),
        "/plans": (.plans, .anyone),
        "/zones": (.zones, .anyone),
        "/quote": (.quote, .anyone),
        "/rides": (.ridesListing, .ops(what: "listing rides")),
    ]

    /// `query`: the query's raw `name=value` fragments, as lws decoded them. `lineCut`: an
    /// HTTP/1 request line lws ended before its HTTP version, which a `%0D` or `%0A` does (lws
    /// looks for the line's end after decoding): the path is only what came before it.
    package static func route(_ method: HTTPMethod, _ path: String, query: [String] = [], lineCut: Bool = false) -> Result<Match, Refusal> {
        if lineCut {
            return .failure(Refusal(answer: .error(400, "bad_request",
                "the request line has no HTTP version: a %0D or %0A in the path or query ends it there")))
        }
        // A NUL or another control byte (lws has %-decoded the path) is no route's and no
        // file's: answered, not dropped (a NUL would cut the path short in any C string).
        if path.utf8.contains(where: isControl) || query.contains(where: { $0.utf8.contains(where: isControl) }) {
            return .failure(Refusal(answer: .error(400, "bad_request", "the path or query holds a control character (%00-%1F, %7F)"),
                                    close: false))
        }
        if let api = ServerAPIRoute(path: path) {
            if api == .unknown { return .failure(Refusal(answer: .error(404, "not_found", "no such route: \(path)"))) }
            if case .read(let id) = api { return readRide(method, id, query: query) }
            guard method == .post else {
                return .failure(Refusal(answer: .error(405, "method_not_allowed", "\(path) takes POST only"),
                                        allow: ServerAPIRequest.allow))
            }
            return .success(Match(endpoint: .serverAPI(api), access: .token))
        }
        if let webhooks = WebhookOp.route(method, path, query: query) { return webhooks }
        guard method == .get || method == .head else {
            return .failure(Refusal(answer: .error(405, "method_not_allowed", "only GET and HEAD are served"), allow: "GET, HEAD"))
        }
        if let (endpoint, access) = reads[path] { return .success(Match(endpoint: endpoint, access: access)) }
        // Bytes, not Characters (see ServerAPIRoute.init).
        if path.utf8.starts(with: "/rides/".utf8) {
            let id = String(decoding: path.utf8.dropFirst("/rides/".utf8.count), as: UTF8.self)
            guard ClientCodec.isValidRideID(id) else {
                return .failure(Refusal(answer: .error(400, "bad_request",
                                                       "a ride id is 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . :"),
                                        close: false))
            }
            return .success(Match(endpoint: .rideDocument(id: id), access: .token))
        }
        return .success(Match(endpoint: .file(path: path), access: .anyone))
    }

    static func isControl(_ b: UInt8) -> Bool { b < 0x20 || b == 0x7F }

    /// `GET /v1/rides/{id}`: the server API's read, answered as `GET /rides/{id}` is (the same
    /// endpoint); unlike that older route it refuses parameters it does not know, as the API does.
    static func readRide(_ method: HTTPMethod, _ id: String, query: [String]) -> Result<Match, Refusal> {
        guard method == .get || method == .head else {
            return .failure(Refusal(answer: .error(405, "method_not_allowed", "/v1/rides/{id} takes GET and HEAD"), allow: "GET, HEAD"))
        }
        guard ClientCodec.isValidRideID(id) else { return .failure(Refusal(answer: ServerAPIRequest.badRideID, close: false)) }
        let known = ["journal", "token"]
        if let name = query.lazy.map({ String($0.prefix { $0 != "=" }) }).first(where: { !known.contains($0) }) {
            return .failure(Refusal(answer: .error(400, "bad_request", "unknown parameter \"\(name.prefix(40))\" (known: journal, token)"),
                                    close: false))
        }
        return .success(Match(endpoint: .rideDocument(id: id), access: .token))
    }

    /// An HTTP connection over the per-address limit (`--max-connections-per-ip`, which counts
    /// HTTP connections as it counts WebSocket sessions): refused before it is routed.
    package static func tooManyConnections(from peer: String, limit: Int) -> HTTPAnswer {
        .error(429, "too_many_connections", "more than \(limit) connections from \(peer); close some or retry later")
    }

    /// The token check of every route: nil claims with authentication off (`verifier` nil) or
    /// for a route anyone may call; the refusal (401, or 403 for a route that needs ops) is the
    /// answer to send.
    package static func authorize(_ access: HTTPAccess, token: String?, verifier: TokenVerifier?,
                                  wall: Int64) -> Result<TokenClaims?, HTTPRefusalAnswer> {
        guard let verifier, access != .anyone else { return .success(nil) }
        switch HTTPToken.verify(token, verifier: verifier, wall: wall) {
        case .failure(let refusal):
            return .failure(HTTPRefusalAnswer(refusal.answer))
        case .success(let claims):
            if case .ops(let what) = access, !claims.ops {
                return .failure(HTTPRefusalAnswer(.error(403, "forbidden", "\(what) needs an operator (ops) token")))
            }
            return .success(claims)
        }
    }
}
