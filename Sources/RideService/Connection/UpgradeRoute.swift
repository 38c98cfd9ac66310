import RideAuth

/// A WebSocket upgrade, decided before lws upgrades it: request in (path, Origin, offered
/// subprotocols, token), refusal or endpoint out. The adapter answers a refusal with its HTTP
/// status and one line of JSON (UpgradeRefusal.swift) and counts the address in between.
package enum UpgradeRoute {
    package enum Endpoint: Equatable {
        /// `/ws`: ride.v1.
        case ws
        /// `/echo` (`--ws-echo`, tests only): every message sent back.
        case echo
    }

    package struct Refusal: Error, Equatable {
        package let status: UInt32
        package let code: String
        package let message: String

        package init(_ status: UInt32, _ code: String, _ message: String) {
            self.status = status
            self.code = code
            self.message = message
        }
    }

    /// Which endpoint `path` (query stripped) asks for, if it may: only `/ws` (and `/echo` when
    /// enabled), only from an allowed Origin when a list is given (no Origin: not a browser).
    package static func endpoint(path: String, echoEnabled: Bool, origin: String?,
                                 allowedOrigins: [String]) -> Result<Endpoint, Refusal> {
        let endpoint: Endpoint
        if path == "/ws" {
            endpoint = .ws
        } else if path == "/echo", echoEnabled {
            endpoint = .echo
        } else {
            return .failure(Refusal(404, "not_found", "no WebSocket at \(path.prefix(100)); the WebSocket is at /ws"))
        }
        if !allowedOrigins.isEmpty, let origin, !allowedOrigins.contains(origin) {
            return .failure(Refusal(403, "forbidden_origin", "origin \(origin.prefix(200)) is not allowed (--allow-origin)"))
        }
        return .success(endpoint)
    }

    /// An address over --max-connections-per-ip.
    package static func tooManyConnections(from peer: String, limit: Int) -> Refusal {
        Refusal(429, "too_many_connections", "more than \(limit) WebSocket connections from \(peer)")
    }

    /// The token an endpoint needs at the upgrade, with tokens required (`verifier`): `/echo`
    /// sends back whatever arrives, so it cannot wait for an `auth` message and takes a valid
    /// token here or none at all. `/ws` checks its token after the upgrade (so a bad one can be
    /// told `unauthorized` and closed 4401): nil.
    package static func tokenRefusal(_ endpoint: Endpoint, token: String?, verifier: TokenVerifier?, wall: Int64) -> Refusal? {
        guard endpoint == .echo, let verifier else { return nil }
        guard let token else {
            return Refusal(401, "unauthorized", "a valid token is required (?token= or Authorization: Bearer)")
        }
        do { _ = try verifier.verify(token, now: wall) } catch {
            return Refusal(401, "unauthorized", "token refused: \(error.message)")
        }
        return nil
    }

    /// Subprotocols offered (`Sec-WebSocket-Protocol`), none of them ride.v1: refused (lws would
    /// hang up without a word). None offered is fine: the connection speaks ride.v1.
    package static func subprotocolRefusal(offered: String?) -> Refusal? {
        guard let offered else { return nil }
        let names = offered.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        if names.isEmpty || names.contains("ride.v1") { return nil }
        return Refusal(400, "unsupported_subprotocol",
                       "this server speaks the WebSocket subprotocol ride.v1; offered: \(offered.prefix(100))")
    }
}
