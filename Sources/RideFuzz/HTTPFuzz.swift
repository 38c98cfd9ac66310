import RideAuth
import RideCore
import RideProtocol
import RideService

/// The `http` target: the input is a connection's bytes, one or more HTTP/1.1-like requests
/// back to back (pipelined), fed to a minimal request reader in chunks whose sizes come from
/// the input itself (a request split at arbitrary points). Each request goes the adapter's way
/// (RidePushServer/HTTP.swift, ServerAPIRoutes.swift): HTTPRouter.route, HTTPRouter.authorize
/// with a fixed HS256 verifier, the Content-Length rule, ServerAPIRequest.admit. libwebsockets
/// does the real parsing; what is fuzzed is what RidePush decides from what it parsed.
///
/// Invariants: no trap; the chunked reading gives the requests the whole one does; every
/// refusal is a 4xx whose body is `{"error":{"code":…}}`; a path or query with a control byte
/// is never routed; a routed ride document's id and an admitted call's ride ids pass
/// ClientCodec.isValidRideID; a server API route taken by the router is admitted or refused
/// for its headers or body, never answered 404/405 by admission.
///
/// A token `@ops`, `@rider` or `@watch` (`Authorization: Bearer @ops`, `?token=@rider`) stands
/// for a token signed by the fixed secret, so the seeds reach admitted calls.
enum HTTPFuzz {
    static let wall: Int64 = 1_764_430_000
    static let secret = Array("fuzz-http-secret-0123456789-abcdef".utf8)
    static let verifier = TokenVerifier(secret: secret)
    static let tokens: [String: String] = {
        let s = TokenSigner(secret: secret)
        return [
            "@ops": s.sign(TokenClaims(sub: "operator-1", scope: .control, ops: true, exp: wall + 600, iat: wall)),
            "@rider": s.sign(TokenClaims(sub: "rider-7", scope: .control, exp: wall + 600, iat: wall)),
            "@watch": s.sign(TokenClaims(sub: "rider-7", scope: .watch, exp: wall + 600, iat: wall)),
        ]
    }()

    /// One request as the reader saw it.
    struct Request: Equatable {
        var method: [UInt8] = []
        var target: [UInt8] = []
        var headers: [(name: String, value: [UInt8])] = []
        var body: [UInt8] = []
        /// Content-Length refused (the connection ends after the answer).
        var badLength: HTTPRefusalAnswer?

        static func == (a: Request, b: Request) -> Bool {
            a.method == b.method && a.target == b.target && a.body == b.body && a.badLength == b.badLength
                && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
        }

        func header(_ name: String) -> [UInt8]? { headers.first { $0.name == name }?.value }
    }

    /// A minimal incremental reader: a request ends at its blank line, plus the body its
    /// Content-Length declares (judged by ServerAPIRequest.declaredLength, as the server does).
    struct Reader {
        var buffer: [UInt8] = []
        var requests: [Request] = []
        var closed = false
        /// Where to look for the blank line (the bytes before were searched), and a head found
        /// whose body is still arriving: each byte is searched once, however the input is split.
        var scanFrom = 0
        var head: (start: Int, end: Int)?
        static let maxRequests = 16

        mutating func feed(_ chunk: ArraySlice<UInt8>) {
            guard !closed else { return }
            buffer.append(contentsOf: chunk)
            while !closed, let r = next() { requests.append(r) }
        }

        /// The next complete request, consumed from the buffer, or nil for more bytes.
        mutating func next() -> Request? {
            guard requests.count < Self.maxRequests else { closed = true; return nil }
            guard let end = head ?? Self.headEnd(buffer, from: scanFrom) else {
                scanFrom = max(0, buffer.count - 3)
                return nil
            }
            head = end
            var lines = buffer[..<end.start].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                .map { $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0 }
            while lines.first?.isEmpty == true { lines.removeFirst() }  // stray CRLF between requests
            var r = Request()
            if let line = lines.first {
                let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
                if parts.count >= 1 { r.method = Array(parts[0]) }
                if parts.count >= 2 { r.target = Array(parts[1]) }
            }
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
                r.headers.append((name, Array(trim(line[(colon + 1)...]))))
            }
            let declared = r.header("content-length").map { String(decoding: $0, as: UTF8.self) }
            var length = 0
            switch ServerAPIRequest.declaredLength(declared) {
            case .success(let n): length = n ?? 0
            case .failure(let refusal):
                r.badLength = refusal
                closed = true
                buffer.removeAll()
                head = nil
                return r
            }
            guard buffer.count - end.end >= length else { return nil }
            r.body = Array(buffer[end.end..<(end.end + length)])
            buffer.removeFirst(end.end + length)
            head = nil
            scanFrom = 0
            return r
        }

        /// Where the head ends (`\r\n\r\n` or `\n\n`): the blank line's start and the body's.
        static func headEnd(_ b: [UInt8], from: Int) -> (start: Int, end: Int)? {
            // Blank lines before a request line (between pipelined requests) end nothing.
            guard let first = b.firstIndex(where: { $0 != 0x0d && $0 != 0x0a }) else { return nil }
            var i = max(from, first)
            while i < b.count {
                if b[i] == UInt8(ascii: "\n") {
                    var j = i + 1
                    if j < b.count, b[j] == UInt8(ascii: "\r") { j += 1 }
                    if j < b.count, b[j] == UInt8(ascii: "\n") { return (i, j + 1) }
                }
                i += 1
            }
            return nil
        }

        func trim(_ s: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            var s = s
            while let f = s.first, f == 0x20 || f == 0x09 { s.removeFirst() }
            while let l = s.last, l == 0x20 || l == 0x09 { s.removeLast() }
            return s
        }
    }

    static func run(_ bytes: [UInt8]) {
        guard bytes.count <= 8192 else { return }
        var whole = Reader()
        whole.feed(bytes[...])
        // The same bytes split into chunks of 1-97 bytes, sizes taken from the bytes themselves.
        var split = Reader(), at = 0
        while at < bytes.count {
            let n = 1 + Int(bytes[at % bytes.count] % 97)
            split.feed(bytes[at..<min(bytes.count, at + n)])
            at += n
        }
        guard split.requests == whole.requests, split.closed == whole.closed else {
            fatalError("split reading gave \(split.requests.count) requests, whole \(whole.requests.count): \(show(bytes))")
        }
        for r in whole.requests {
            guard serve(r, bytes) else { break }
        }
    }

    /// One request the adapter's way; false when its answer ends the connection.
    static func serve(_ r: Request, _ input: [UInt8]) -> Bool {
        if let bad = r.badLength {
            refused(bad.answer, "Content-Length", input)
            return false
        }
        let method: HTTPMethod
        switch r.method {
        case Array("GET".utf8): method = .get
        case Array("HEAD".utf8): method = .head
        case Array("POST".utf8): method = .post
        default: method = .other
        }
        // lws %-decodes the path and each query argument; the query is split at `&`.
        let cut = r.target.firstIndex(of: UInt8(ascii: "?")) ?? r.target.count
        let pathBytes = percentDecoded(r.target[..<cut])
        let path = String(decoding: pathBytes, as: UTF8.self)
        let query = cut < r.target.count
            ? r.target[(cut + 1)...].split(separator: UInt8(ascii: "&")).map { String(decoding: percentDecoded($0), as: UTF8.self) }
            : []
        let control = path.utf8.contains(where: isControl) || query.contains { $0.utf8.contains(where: isControl) }
        let match: HTTPRouter.Match
        switch HTTPRouter.route(method, path, query: query) {
        case .failure(let refusal):
            refused(refusal.answer, "route", input)
            if refusal.answer.status == 405, refusal.allow == nil { fatalError("405 without Allow: \(show(input))") }
            return !refusal.close
        case .success(let m):
            guard !control else { fatalError("a path with a control byte was routed to \(m.endpoint): \(show(input))") }
            match = m
        }
        if case .rideDocument(let id) = match.endpoint, !ClientCodec.isValidRideID(id) {
            fatalError("ride document for an invalid id \(id): \(show(input))")
        }
        let token = token(r, query)
        let claims: TokenClaims?
        switch HTTPRouter.authorize(match.access, token: token, verifier: verifier, wall: wall) {
        case .failure(let refusal):
            refused(refusal.answer, "authorize", input)
            guard [401, 403].contains(refusal.answer.status) else { fatalError("authorize answered \(refusal.answer.status)") }
            if case .serverAPI = match.endpoint { return false }
            return true
        case .success(let c): claims = c
        }
        if match.access != .anyone, claims == nil { fatalError("\(match.access) passed without claims: \(show(input))") }
        if case .ops = match.access, claims?.ops != true { fatalError("ops route passed without ops: \(show(input))") }
        guard case .serverAPI(let api) = match.endpoint else { return true }
        guard method == .post, api != .unknown else { fatalError("router took \(api) for \(method)") }
        if r.header("content-length") == nil, r.header("transfer-encoding") != nil { return true }  // answered 400 by the adapter
        switch ServerAPIRequest.admit(method: "POST", path: path, idempotencyKeyBytes: r.header("idempotency-key"),
                                      token: token, body: r.body, verifier: verifier, wall: wall) {
        case .failure(let refusal):
            refused(refusal.answer, "admit", input)
            if [404, 405].contains(refusal.answer.status) { fatalError("admission refused a routed POST \(refusal.answer.status): \(show(input))") }
        case .success(let call):
            switch call.request {
            case .start(let ride, _, _, let owner):
                if let ride, !ClientCodec.isValidRideID(ride) { fatalError("admitted an invalid ride id \(ride)") }
                guard let owner, !owner.isEmpty else { fatalError("admitted a start without a rider") }
                if let a = call.access, !a.claims.ops, owner != a.rider { fatalError("admitted a start for another rider") }
                guard case .create = api, call.successStatus == 201 else { fatalError("start admitted on \(api)") }
            case .command(let c, let ride, let metres):
                guard ClientCodec.isValidRideID(ride) else { fatalError("admitted an invalid ride id \(ride): \(show(input))") }
                guard case .transition(c, ride) = api else { fatalError("admitted \(c) \(ride) on \(api)") }
                if let metres, metres < 0 { fatalError("negative distance admitted") }
            case .autoEnd:
                fatalError("admission made an autoEnd")
            }
            if call.access == nil { fatalError("admitted without access while authentication is on") }
        }
        return true
    }

    /// `?token=` first, then `Authorization: Bearer`, as the adapter reads them; `@name` is a
    /// fixed signed token.
    static func token(_ r: Request, _ query: [String]) -> String? {
        var t: String?
        if let q = query.first(where: { $0.hasPrefix("token=") }) {
            t = String(q.dropFirst("token=".count))
        } else if let a = r.header("authorization"), a.starts(with: Array("Bearer ".utf8)) {
            t = String(decoding: a.dropFirst(7), as: UTF8.self)
        }
        return t.map { tokens[$0] ?? $0 }
    }

    /// A refusal: a 4xx with `{"error":{"code":"…","message":"…"}}`.
    static func refused(_ a: HTTPAnswer, _ stage: String, _ input: [UInt8]) {
        guard (400...499).contains(a.status) else { fatalError("\(stage) refused with \(a.status): \(show(input))") }
        guard let j = try? JSON.parse(a.body), let e = j.object?["error"]?.object,
              let code = e["code"]?.string, !code.isEmpty, e["message"]?.string != nil else {
            fatalError("\(stage) refusal body is not {error:{code,message}}: \(String(decoding: a.body, as: UTF8.self))")
        }
    }

    static func isControl(_ b: UInt8) -> Bool { b < 0x20 || b == 0x7F }

    static func percentDecoded(_ s: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = [], i = s.startIndex
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        while i < s.endIndex {
            if s[i] == UInt8(ascii: "%"), i + 2 < s.endIndex, let h = hex(s[i + 1]), let l = hex(s[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(s[i])
                i += 1
            }
        }
        return out
    }

    static func show(_ b: [UInt8]) -> String { String(decoding: b.prefix(300), as: UTF8.self).debugDescription }
}
