import CLibWebSockets
import Foundation
import RideAuth
import RideCore
import RideProtocol

/// HTTP on the WebSocket port: the page from `public/`, `/healthz`, `/metrics`, `/rides/{id}`,
/// `/plans`, `/quote`.
extension Shard {
    func http(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        guard let input else { return -1 }
        let path = String(decoding: UnsafeRawBufferPointer(start: input, count: len), as: UTF8.self)
        // HEAD wherever GET is (uptime checkers use it): the same status and headers, no body.
        guard lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 || isHead(wsi) else {
            answerAndClose(wsi, 405, errorJSON("method_not_allowed", "only GET and HEAD are served"), allow: "GET, HEAD")
            return -1
        }
        switch path {
        case "/healthz":
            let h = hub.health()
            return respond(wsi, h.ok ? 200 : 503, json: h.json)
        case "/metrics": return respond(wsi, 200, type: "text/plain; version=0.0.4; charset=utf-8", body: Array(hub.metricsText().utf8))
        case "/plans": return respond(wsi, 200, json: hub.plansDocument())
        case "/quote": return quoteProblem(wsi).map { respond(wsi, 400, json: errorJSON("bad_request", $0)) } ?? quote(wsi)
        case "/rides": return ridesListing(wsi)
        default:
            if path.hasPrefix("/rides/") { return rideDocument(wsi, String(path.dropFirst(7))) }
            return staticFile(wsi, path)
        }
    }

    /// `GET /rides/{id}`: the id is checked first (no store lookup, nothing echoed), then the
    /// token, then the ride from memory or the store; the journal (`?journal=1`, operators) is
    /// read only once the token is known to allow the ride.
    func rideDocument(_ wsi: OpaquePointer, _ id: String) -> Int32 {
        guard ClientCodec.isValidRideID(id) else {
            return respond(wsi, 400, json: errorJSON("bad_request", "a ride id is 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . :"))
        }
        var claims: TokenClaims?
        if hub.authRequired {
            switch httpToken(wsi) {
            case .success(let c): claims = c
            case .failure(let refusal): return respond(wsi, 401, json: errorJSON("unauthorized", refusal.message))
            }
        }
        let journal = urlArg(wsi, "journal") == "1" || claims?.ops == true
        if let live = hub.registry.find(id) {
            let (status, body) = rideResponse(id, claims, live, nil)
            // Operators (and ?journal=1) also get the journal, read by the store worker (OpsRequests.swift).
            if status == 200, journal { return rideDocumentWithJournal(wsi, id, claims) }
            return respond(wsi, status, json: body)
        }
        // Not in memory: the store worker reads it; this thread serves others meanwhile.
        let token = awaitingStore.add(wsi, id)
        hub.registry.submit(.lookup(id, from: Requester(shard: index, session: 0), then: .http(token: token, claims: claims, journal: journal)))
        return 0
    }

    /// A refused HTTP token, said as the WebSocket says it.
    struct TokenRefusal: Error {
        let message: String
    }

    /// The request's token (`Authorization: Bearer`, else `?token=`), verified on the wall clock.
    func httpToken(_ wsi: OpaquePointer) -> Result<TokenClaims, TokenRefusal> {
        var token: String?
        if let h = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION), h.hasPrefix("Bearer ") { token = String(h.dropFirst(7)) }
        if token == nil { token = urlArg(wsi, "token") }
        guard let token, let signer = hub.signer else {
            return .failure(TokenRefusal(message: "a valid token is required (?token= or Authorization: Bearer)"))
        }
        do { return .success(try signer.verify(token, now: WallClock.seconds())) } catch {
            if error.kind == .expired { return .failure(TokenRefusal(message: "token expired; get a new one")) }
            return .failure(TokenRefusal(message: "token refused: \(error.message)"))
        }
    }

    func rideResponse(_ id: String, _ claims: TokenClaims?, _ live: LiveRide?, _ failure: ProtocolError?) -> (UInt32, [UInt8]) {
        guard let live else {
            let e = failure ?? ProtocolError(.rideNotFound, "no ride \"\(id)\"")
            return (e.code == .rideNotFound ? 404 : 503, errorJSON(e.code.rawValue, e.message))
        }
        let ride = hub.registry.snapshot(live)
        if let claims, !Access(claims).mayWatch(rideID: id, rideOwner: ride.owner) {
            return (403, errorJSON("forbidden", "this token may not read ride \"\(id)\""))
        }
        return (200, ServerMessages.rideDocument(ride: ride, plan: live.plan, at: hub.clock.now()))
    }

    /// The store worker answered a `GET /rides/{id}`: respond on HTTP_WRITEABLE, if the
    /// connection is still there (or, allowed a journal, have the worker read it now).
    func rideFound(_ token: UInt64, _ claims: TokenClaims?, journal: Bool, _ live: LiveRide?, _ failure: ProtocolError?) {
        guard let waiting = awaitingStore.take(token) else { return }
        let wsi = waiting.handle
        let response = rideResponse(waiting.what, claims, live, failure)
        if response.0 == 200, journal {
            _ = rideDocumentWithJournal(wsi, waiting.what, claims)
            return
        }
        deferredResponses[wsi] = response
        lws_callback_on_writable(wsi)
    }

    func quote(_ wsi: OpaquePointer) -> Int32 {
        guard hub.quoteRate.allow(clientAddress(wsi), now: monotonicMillis()) else {
            hub.metrics.add(hub.metrics.rateLimited)
            return respond(wsi, 429, json: errorJSON("rate_limited", "more than \(hub.config.controlRate) quotes per second; slow down"))
        }
        let planID = urlArg(wsi, "plan")
        guard let seconds = urlArg(wsi, "seconds").flatMap(InputBounds.quantity) else {
            return respond(wsi, 400, json: errorJSON("bad_request", "seconds= is required: whole seconds of riding, 0 to \(InputBounds.maxQuantity)"))
        }
        guard let paused = urlArg(wsi, "paused").map(InputBounds.quantity) ?? 0 else {
            return respond(wsi, 400, json: errorJSON("bad_request", "paused= must be whole seconds, 0 to \(InputBounds.maxQuantity)"))
        }
        guard let plan = hub.registry.plan(planID) else {
            return respond(wsi, 404, json: errorJSON("plan_not_found", "no plan \"\(planID ?? "")\""))
        }
        let q = FareEngine.quote(plan, riding: seconds, paused: paused)
        return respond(wsi, 200, json: ServerMessages.quote(id: nil, plan: plan, quote: q, seconds: seconds, paused: paused))
    }

    func staticFile(_ wsi: OpaquePointer, _ path: String) -> Int32 {
        var rel = path
        if rel.hasSuffix("/") { rel += "index.html" }
        let parts = rel.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.contains(where: { $0 == ".." || $0.hasPrefix(".") }) else {
            return respond(wsi, 404, json: errorJSON("not_found", "no such file"))
        }
        let file = hub.publicDir + "/" + parts.joined(separator: "/")
        var st = stat()
        guard stat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            return respond(wsi, 404, json: errorJSON("not_found", "no such file: \(path)"))
        }
        let ext = parts.last.flatMap { $0.split(separator: ".").last.map(String.init) } ?? ""
        let mime = Shard.mimeTypes[ext.lowercased()] ?? "application/octet-stream"
        if isHead(wsi) { return respondHead(wsi, 200, type: mime, length: Int(st.st_size), cache: "no-cache") }
        // Extra headers made by lws itself: over HTTP/2 (https with ALPN h2, what browsers
        // use) they must be HPACK-encoded, and a raw "name: value\r\n" string breaks the stream.
        var extra = [UInt8](repeating: 0, count: 128)
        let n = extra.withUnsafeMutableBufferPointer { b -> Int32 in
            let start = b.baseAddress!
            var p: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_header_by_name(wsi, "cache-control:", "no-cache", 8, &p, start + b.count) != 0 { return -1 }
            return lws_serve_http_file(wsi, file, mime, UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self),
                                       Int32(p! - start))
        }
        if n < 0 { return -1 }
        if n > 0, lws_http_transaction_completed(wsi) != 0 { return -1 }
        return 0
    }

    static let mimeTypes: [String: String] = [
        "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "json": "application/json", "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon",
        "woff2": "font/woff2", "txt": "text/plain; charset=utf-8", "webmanifest": "application/manifest+json",
    ]

    /// Writes the headers now and the body on HTTP_WRITEABLE.
    func respond(_ wsi: OpaquePointer, _ status: UInt32, type: String = "application/json", json: [UInt8]) -> Int32 {
        respond(wsi, status, type: type, body: json)
    }

    func respond(_ wsi: OpaquePointer, _ status: UInt32, type: String, body: [UInt8]) -> Int32 {
        if isHead(wsi) { return respondHead(wsi, status, type: type, length: body.count, cache: "no-store") }
        var buf = [UInt8](repeating: 0, count: pre + 2048)
        return buf.withUnsafeMutableBufferPointer { b -> Int32 in
            let start = b.baseAddress! + pre
            var p: UnsafeMutablePointer<UInt8>? = start
            let end = b.baseAddress! + b.count - 1
            if lws_add_http_common_headers(wsi, status, type, lws_filepos_t(body.count), &p, end) != 0 { return 1 }
            if lws_add_http_header_by_name(wsi, "cache-control:", "no-store", 8, &p, end) != 0 { return 1 }
            if lws_finalize_write_http_header(wsi, start, &p, end) != 0 { return 1 }
            httpBodies[wsi] = [UInt8](repeating: 0, count: pre) + body
            lws_callback_on_writable(wsi)
            return 0
        }
    }

    func isHead(_ wsi: OpaquePointer) -> Bool { lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0 }

    /// A HEAD answer: the headers GET would send, `content-length` included, and no body.
    func respondHead(_ wsi: OpaquePointer, _ status: UInt32, type: String, length: Int, cache: String) -> Int32 {
        var buf = [UInt8](repeating: 0, count: pre + 2048)
        return buf.withUnsafeMutableBufferPointer { b -> Int32 in
            let start = b.baseAddress! + pre
            var p: UnsafeMutablePointer<UInt8>? = start
            let end = b.baseAddress! + b.count - 1
            if lws_add_http_common_headers(wsi, status, type, lws_filepos_t(length), &p, end) != 0 { return 1 }
            if lws_add_http_header_by_name(wsi, "cache-control:", cache, Int32(cache.utf8.count), &p, end) != 0 { return 1 }
            if lws_finalize_write_http_header(wsi, start, &p, end) != 0 { return 1 }
            return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
        }
    }

    func httpWritable(_ wsi: OpaquePointer) -> Int32 {
        if let r = deferredResponses.removeValue(forKey: wsi) { return respond(wsi, r.status, json: r.body) }
        guard var body = httpBodies.removeValue(forKey: wsi) else { return 0 }
        let pre = self.pre
        let n = body.withUnsafeMutableBufferPointer { p in
            lws_write(wsi, p.baseAddress! + pre, p.count - pre, LWS_WRITE_HTTP_FINAL)
        }
        if n < body.count - pre { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    func errorJSON(_ code: String, _ message: String) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("error")
        w.beginObject()
        w.key("code"); w.string(code)
        w.key("message"); w.string(message)
        w.endObject()
        w.endObject()
        return w.bytes
    }
}
