import RideAuth
import RideCore
import RideProtocol
import RideStore

/// The server API's routes (`POST /v1/rides`, `POST /v1/rides/{id}/pause|resume|end`,
/// `GET /v1/rides/{id}`), known by path alone so a wrong method is answered 405 rather than 404.
package enum ServerAPIRoute: Equatable, Sendable {
    case create
    case transition(RideCommand, ride: String)
    /// `GET /v1/rides/{id}`: the ride document of `GET /rides/{id}` (HTTPRouter routes it there).
    case read(ride: String)
    /// Under /v1/rides but no route of the API (`/v1/rides/x/fly`, `/v1/rides/`).
    case unknown

    /// nil: not a server API path at all.
    /// Compared as UTF-8 bytes, not Characters: a "/" followed by a combining mark is one
    /// Character to Swift, and the route would be missed.
    package init?(path: String) {
        let bytes = Array(path.utf8), base = Array("/v1/rides".utf8)
        guard bytes.starts(with: base) else { return nil }
        if bytes.count == base.count { self = .create; return }
        guard bytes[base.count] == UInt8(ascii: "/") else { return nil }
        let parts = bytes[(base.count + 1)...].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if parts.count == 1, !parts[0].isEmpty {
            self = .read(ride: String(decoding: parts[0], as: UTF8.self))
            return
        }
        guard parts.count == 2, let command = RideCommand(rawValue: String(decoding: parts[1], as: UTF8.self)) else {
            self = .unknown
            return
        }
        self = .transition(command, ride: String(decoding: parts[0], as: UTF8.self))
    }
}

/// A server API request the service accepted: what to decide, who asked, and the key its
/// answer is stored under. Built only by `ServerAPIRequest.admit`.
package struct ServerAPICall: Sendable, Equatable {
    package let request: RideBook.Request
    /// What ride.v1's `start` and `end` carry for the zones: a create's `lat`/`lon`/`vehicle_type`,
    /// an end's `force` (ops tokens only: admission refuses a rider's).
    package let geo: ZoneFields?
    /// The exactly-once store's key: the account's scope and "http:" + SHA-256(scope, key)
    /// (ServerAPIIdempotency.scope: one scope for every ops token, a rider's sub for theirs).
    package let key: ReplyKey
    /// An ops token's key as stored before keys were scoped per account, read when `key`
    /// has no answer (ServerAPIIdempotency.legacyKey).
    package let legacyKey: ReplyKey?
    /// SHA-256 of method, path and body, stored with the answer (422 when a key comes back with another).
    package let fingerprint: String
    /// nil with authentication off.
    package let access: Access?
    /// The status of a success: 201 for a new ride, 200 for a transition.
    package var successStatus: UInt32 { if case .start = request { return 201 }; return 200 }
}

/// Admission of a server API request, in an order that reveals nothing to whom it must not:
/// route and method, the token, the `Idempotency-Key`, the body, and what the token may do
/// (ownership of an existing ride is judged by the store worker, which knows the ride).
package enum ServerAPIRequest {
    /// Bodies are a few small fields; anything larger is refused unread.
    package static let maxBody = 4096
    /// What a wrong method is told it may use.
    package static let allow = "POST"

    package static func admit(method: String, path: String, idempotencyKey: String?, token: String?, body: [UInt8],
                              verifier: TokenVerifier?, wall: Int64) -> Result<ServerAPICall, HTTPRefusalAnswer> {
        admit(method: method, path: path, idempotencyKeyBytes: idempotencyKey.map { Array($0.utf8) }, token: token, body: body,
              verifier: verifier, wall: wall)
    }

    /// The same with the `Idempotency-Key` as its bytes arrived: its length is measured in
    /// them and a value that is not UTF-8 is refused (issue 36, finding 7), where decoding it
    /// with replacement characters first made different keys one and the same.
    package static func admit(method: String, path: String, idempotencyKeyBytes: [UInt8]?, token: String?, body: [UInt8],
                              verifier: TokenVerifier?, wall: Int64) -> Result<ServerAPICall, HTTPRefusalAnswer> {
        guard let route = ServerAPIRoute(path: path), route != .unknown else {
            return refuse(.error(404, "not_found", "no such route: \(path)"))
        }
        guard method == "POST" else {
            return refuse(.error(405, "method_not_allowed", "\(path) takes POST only"))
        }
        var claims: TokenClaims?
        if let verifier {
            switch HTTPToken.verify(token, verifier: verifier, wall: wall) {
            case .success(let c): claims = c
            case .failure(let r): return refuse(r.answer)
            }
        }
        guard let keyBytes = idempotencyKeyBytes, (1...ServerAPIIdempotency.maxKeyBytes).contains(keyBytes.count) else {
            return refuse(.error(400, "bad_request", idempotencyKeyBytes == nil
                ? "an Idempotency-Key header is required on every POST (1-\(ServerAPIIdempotency.maxKeyBytes) bytes, e.g. a UUID)"
                : "an Idempotency-Key is 1-\(ServerAPIIdempotency.maxKeyBytes) bytes"))
        }
        guard let key = String(validating: keyBytes, as: UTF8.self) else {
            return refuse(.error(400, "bad_request", "an Idempotency-Key is UTF-8 text (e.g. a UUID)"))
        }
        guard body.count <= maxBody else { return refuse(.error(413, "too_large", "a request body is at most \(maxBody) bytes")) }
        let request: RideBook.Request, geo: ZoneFields?
        switch parse(route, body) {
        case .success(let r): (request, geo) = r
        case .failure(let r): return .failure(r)
        }
        let access = claims.map(Access.init)
        if let access {
            guard access.mayStart() else { return refuse(.error(403, "forbidden", "this token may only watch rides")) }
            // ride.v1 ignores a rider's force; the server API says so rather than end it unforced.
            if geo?.force == true, !access.claims.ops {
                return refuse(.error(403, "forbidden", "\"force\" is for operator (ops) tokens: a rider's end is judged by the zones"))
            }
            if case .start(_, _, _, let rider?) = request, rider != access.rider, !access.claims.ops {
                return refuse(.error(403, "forbidden", "this token may start rides for \"\(access.rider)\" only; an ops token starts them for any rider"))
            }
        }
        return .success(ServerAPICall(request: request, geo: geo,
                                      key: ServerAPIIdempotency.replyKey(subject: ServerAPIIdempotency.scope(access), key: key),
                                      legacyKey: ServerAPIIdempotency.legacyKey(access, key: key),
                                      fingerprint: ServerAPIIdempotency.fingerprint(method: method, path: path, body: body),
                                      access: access))
    }

    /// A POST's `Content-Length` as it arrived (nil: no header, no body), judged before a byte
    /// of the body is read: strictly digits (lws reads `2x` as 2, `Int` as nothing: neither may
    /// guess, issue 36 finding 7), 400 otherwise; over `maxBody`, 413.
    package static func declaredLength(_ declared: String?) -> Result<Int?, HTTPRefusalAnswer> {
        guard let declared else { return .success(nil) }
        guard (1...18).contains(declared.utf8.count), declared.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let n = Int(declared) else {
            return refuse(.error(400, "bad_request", "Content-Length must be a whole number of bytes"))
        }
        guard n <= maxBody else { return refuse(.error(413, "too_large", "a request body is at most \(maxBody) bytes")) }
        return .success(n)
    }

    /// The body as a request and its zone fields: `{"rider","ride"?,"plan"?,"limit"?,"lat"?,"lon"?,
    /// "vehicle_type"?}` to create, `{"distance"?,"force"?}` to end, nothing (or `{}`) to pause or
    /// resume. Unknown fields are refused, not ignored: a misspelt `"limt"` must not start a ride
    /// without its limit. The zone fields are read by ride.v1's own rules (ClientCodec.zoneFields).
    package static func parse(_ route: ServerAPIRoute, _ body: [UInt8]) -> Result<(RideBook.Request, ZoneFields?), HTTPRefusalAnswer> {
        var fields: [String: JSON] = [:]
        if body.contains(where: { !$0.isJSONSpace }) {
            do throws(JSON.ParseError) {
                guard let o = try JSON.parse(body).object else { return refuse(.error(400, "bad_request", "the body must be a JSON object")) }
                fields = o
            } catch {
                return refuse(.error(400, "bad_request", "the body is not JSON: \(error.description)"))
            }
        }
        let allowed: Set<String>
        switch route {
        case .create: allowed = ["rider", "ride", "plan", "limit", "lat", "lon", "vehicle_type"]
        case .transition(.end, _): allowed = ["distance", "force"]
        default: allowed = []
        }
        if let extra = fields.keys.sorted().first(where: { !allowed.contains($0) }) {
            return refuse(.error(400, "bad_request", "unknown field \"\(extra)\"" + (allowed.isEmpty ? "; this route takes no body" : "; known: \(allowed.sorted().joined(separator: ", "))")))
        }
        let geo: ZoneFields?
        do throws(ProtocolError) {
            geo = try ClientCodec.zoneFields(fields, type: route == .create ? "start" : "end")
        } catch {
            return refuse(.error(400, "bad_request", error.message))
        }
        switch route {
        case .unknown:
            return refuse(.error(404, "not_found", "no such route"))
        case .read:
            return refuse(.error(405, "method_not_allowed", "/v1/rides/{id} takes GET and HEAD"))
        case .transition(let command, let ride):
            guard ClientCodec.isValidRideID(ride) else { return refuse(badRideID) }
            var metres: Int64?
            if let d = fields["distance"] {
                guard let m = d.wholeNumber, m >= 0 else {
                    return refuse(.error(400, "bad_request", "\"distance\" must be a whole number of metres, 0 or more (got \(describe(d)))"))
                }
                metres = m
            }
            return .success((.command(command, ride: ride, metres: metres), command == .end ? geo : nil))
        case .create:
            guard let r = fields["rider"], r != .null else {
                return refuse(.error(400, "bad_request", "\"rider\" is required: the rider's id (their tokens' sub), 1-\(maxRiderBytes) bytes"))
            }
            guard let rider = r.string else {
                return refuse(.error(400, "bad_request", "\"rider\" must be a string: the rider's id (their tokens' sub), got \(describe(r))"))
            }
            if let problem = riderProblem(rider) { return refuse(.error(400, "bad_request", "\"rider\" \(problem)")) }
            var ride: String?
            if let r = fields["ride"] {
                guard let s = r.string, ClientCodec.isValidRideID(s) else {
                    return refuse(.error(400, "bad_request", "\"ride\" must be a ride id: 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . : (got \(describe(r)))"))
                }
                ride = s
            }
            var plan: String?
            if let p = fields["plan"] {
                guard let s = p.string, !s.isEmpty else {
                    return refuse(.error(400, "bad_request", "\"plan\" must be a plan id from GET /plans, a non-empty string (got \(describe(p)))"))
                }
                plan = s
            }
            var limit: Int64?
            if let l = fields["limit"] {
                guard let n = l.wholeNumber, n > 0 else {
                    return refuse(.error(400, "bad_request", "\"limit\" must be a whole number of seconds, 1 or more (got \(describe(l)))"))
                }
                limit = n
            }
            return .success((.start(ride: ride, plan: plan, limit: limit, owner: rider), geo))
        }
    }

    package static let maxRiderBytes = 128

    static func isValidRider(_ s: String) -> Bool { riderProblem(s) == nil }

    /// Why a rider's id is refused (nil: it is not), after the field's name.
    static func riderProblem(_ s: String) -> String? {
        if s.isEmpty { return "is empty: give the rider's id (their tokens' sub)" }
        if s.utf8.count > maxRiderBytes { return "is \(s.utf8.count) bytes; a rider's id is at most \(maxRiderBytes)" }
        if s.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) { return "holds a control character (U+0000-U+001F, U+007F)" }
        return nil
    }

    /// A refused value as the message shows it: short, and no control bytes echoed.
    static func describe(_ v: JSON) -> String {
        switch v {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let text): return text.count <= 24 ? text : "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    static let badRideID = HTTPAnswer.error(400, "bad_request", "a ride id is 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . :")

    static func refuse<T>(_ a: HTTPAnswer) -> Result<T, HTTPRefusalAnswer> { .failure(HTTPRefusalAnswer(a)) }
}

private extension UInt8 {
    var isJSONSpace: Bool { self == 0x20 || self == 0x0a || self == 0x0d || self == 0x09 }
}

/// A server API POST while its body arrives: what the headers said, and the body so far,
/// kept to one byte past the limit (enough to refuse it as too large).
package struct ServerAPIBody: Sendable {
    package let path: String
    /// The header's bytes as sent (ServerAPIRequest.admit checks them).
    package let idempotencyKey: [UInt8]?
    package let token: String?
    package private(set) var bytes: [UInt8] = []

    package init(path: String, idempotencyKey: [UInt8]?, token: String?) {
        self.path = path
        self.idempotencyKey = idempotencyKey
        self.token = token
    }

    package mutating func append(_ chunk: UnsafeRawBufferPointer) {
        let room = ServerAPIRequest.maxBody + 1 - bytes.count
        if room > 0 { bytes.append(contentsOf: chunk.prefix(room)) }
    }
}
