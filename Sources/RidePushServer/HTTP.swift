import CLibWebSockets
import Foundation
import RideAuth
import RideCore
import RideProtocol
import RideService

/// HTTP on the WebSocket port: the page from `public/`, `/healthz`, `/metrics`, `/rides/{id}`,
/// `/plans`, `/quote`, `/v1/webhooks/dead` (WebhookRoutes.swift), and the server API's POSTs
/// under `/v1/rides` (ServerAPIRoutes.swift).
extension Shard {
    /// One request: HTTPRouter finds its endpoint and checks its token (RideService decides
    /// both); this side reads what lws parsed and writes what the handler answers.
    func http(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        guard let input else { return -1 }
        let path = String(decoding: UnsafeRawBufferPointer(start: input, count: len), as: UTF8.self)
        let match: HTTPRouter.Match
        let cut = lws_get_network_wsi(wsi) == wsi && lws_hdr_total_length(wsi, WSI_TOKEN_HTTP) == 0  // HTTP/1, no version
        switch HTTPRouter.route(method(wsi), path, query: queryFragments(wsi), lineCut: cut) {
        case .success(let m): match = m
        case .failure(let refusal):
            guard refusal.close else { return respond(refusal.answer, wsi) }
            answerAndClose(wsi, refusal.answer.status, refusal.answer.body, allow: refusal.allow)
            return -1
        }
        let claims: TokenClaims?
        switch HTTPRouter.authorize(match.access, token: requestToken(wsi), verifier: service.verifier, wall: WallClock.seconds()) {
        case .success(let c): claims = c
        case .failure(let refusal):
            // A POST refused from its headers: its body is never read, so the answer ends the connection.
            guard case .serverAPI = match.endpoint else { return respond(refusal.answer, wsi) }
            answerAndClose(wsi, refusal.answer.status, refusal.answer.body)
            return -1
        }
        switch match.endpoint {
        case .health:
            let h = service.health()
            return respond(wsi, h.ok ? 200 : 503, json: h.json)
        case .metrics: return respond(wsi, 200, type: "text/plain; version=0.0.4; charset=utf-8", body: Array(service.metricsText(process: ProcessStats.figures()).utf8))
        case .plans: return respond(wsi, 200, json: service.plansDocument())
        case .zones: return respond(service.zonesRoute.answer(), wsi)
        case .quote: return quoteProblem(wsi).map { respond(wsi, 400, json: errorJSON("bad_request", $0)) } ?? quote(wsi)
        case .ridesListing: return ridesListing(wsi)
        case .webhooks(let op): return webhooks(wsi, op)
        case .rideDocument(let id): return rideDocument(wsi, id, claims)
        case .serverAPI: return serverAPI(wsi, path)
        case .file(let path): return staticFile(wsi, path)
        }
    }

    /// The method lws parsed. HEAD is served wherever GET is (uptime checkers use it): the
    /// same status and headers, no body.
    func method(_ wsi: OpaquePointer) -> HTTPMethod {
        if lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 { return .get }
        if lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0 { return .post }
        if isHead(wsi) { return .head }
        return .other
    }

    /// `GET /rides/{id}` once the router checked the id and the token: the ride from memory
    /// or the store; the journal (`?journal=1`, operators) is read only once the token is
    /// known to allow the ride.
    func rideDocument(_ wsi: OpaquePointer, _ id: String, _ claims: TokenClaims?) -> Int32 {
        let journal = RideDocumentRoute.wantsJournal(asked: urlArg(wsi, "journal") == "1", claims: claims)
        if let live = service.registry.find(id) {
            let answer = rideAnswer(id, claims, live, nil)
            // Operators (and ?journal=1) also get the journal, read by the store worker (OpsRequests.swift).
            if answer.status == 200, journal { return rideDocumentWithJournal(wsi, id, claims) }
            return respond(answer, wsi)
        }
        // Not in memory: the store worker reads it; this thread serves others meanwhile.
        let token = awaitingStore.add(wsi, id)
        service.submit(.lookup(id, from: Requester(shard: index, session: 0),
                                    then: .http(token: token, claims: claims, journal: journal)))
        return 0
    }

    /// The request's token, for HTTP and WebSocket upgrades alike: `?token=`, else
    /// `Authorization: Bearer`.
    func requestToken(_ wsi: OpaquePointer) -> String? {
        if let t = urlArg(wsi, "token") { return t }
        if let h = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION), h.hasPrefix("Bearer ") { return String(h.dropFirst(7)) }
        return nil
    }

    func rideAnswer(_ id: String, _ claims: TokenClaims?, _ live: LiveRide?, _ failure: ProtocolError?) -> HTTPAnswer {
        RideDocumentRoute.answer(id: id, claims: claims, ride: live.map(service.registry.snapshot), plan: live?.plan,
                                 failure: failure, at: service.clock.now())
    }

    /// The store worker answered a `GET /rides/{id}`: respond on HTTP_WRITEABLE, if the
    /// connection is still there (or, allowed a journal, have the worker read it now).
    func rideFound(_ token: UInt64, _ claims: TokenClaims?, journal: Bool, _ live: LiveRide?, _ failure: ProtocolError?) {
        guard let waiting = awaitingStore.take(token) else { return }
        let wsi = waiting.handle
        let answer = rideAnswer(waiting.what, claims, live, failure)
        if answer.status == 200, journal {
            _ = rideDocumentWithJournal(wsi, waiting.what, claims)
            return
        }
        deferredResponses[wsi] = (answer.status, answer.body)
        lws_callback_on_writable(wsi)
    }

    func quote(_ wsi: OpaquePointer) -> Int32 {
        guard service.quoteRate.allow(clientAddress(wsi), now: monotonicMillis()) else {
            service.metrics.add(service.metrics.rateLimited)
            return respond(wsi, 429, json: errorJSON("rate_limited", "more than \(service.config.controlRate) quotes per second; slow down"))
        }
        let answer = QuoteRoute.answer(plan: urlArg(wsi, "plan"), seconds: urlArg(wsi, "seconds"), paused: urlArg(wsi, "paused"),
                                       plans: service.registry.plan)
        return respond(answer, wsi)
    }

    /// The reason a `/quote` query is refused, or nil.
    func quoteProblem(_ wsi: OpaquePointer) -> String? {
        QuoteQuery.problem(queryArguments(wsi))
    }

    /// The query's `name=value` fragments as lws %-decoded them, at most 16, bytes as sent
    /// (a decoded %00 included: the copy's length says where each ends).
    func queryFragments(_ wsi: OpaquePointer) -> [String] {
        var out: [String] = []
        guard lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) > 0 else { return out }
        var buf = [CChar](repeating: 0, count: 1024)
        for i in 0..<16 {
            let n = lws_hdr_copy_fragment(wsi, &buf, Int32(buf.count), WSI_TOKEN_HTTP_URI_ARGS, Int32(i))
            guard n > 0 else { break }
            out.append(String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return out
    }

    /// Every `name=value` of the query string (lws has already %-decoded them), at most 16.
    func queryArguments(_ wsi: OpaquePointer) -> [(name: String, value: String)] {
        queryFragments(wsi).map { frag in
            guard let eq = frag.firstIndex(of: "=") else { return (frag, "") }
            return (String(frag[..<eq]), String(frag[frag.index(after: eq)...]))
        }
    }

    func staticFile(_ wsi: OpaquePointer, _ path: String) -> Int32 {
        var rel = path
        if rel.hasSuffix("/") { rel += "index.html" }
        let parts = rel.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.contains(where: { $0 == ".." || $0.hasPrefix(".") }) else {
            return respond(wsi, 404, json: errorJSON("not_found", "no such file"))
        }
        let file = service.publicDir + "/" + parts.joined(separator: "/")
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
        if n > 0, transactionCompleted(wsi) != 0 { return -1 }
        return 0
    }

    static let mimeTypes: [String: String] = [
        "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "json": "application/json", "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon",
        "woff2": "font/woff2", "txt": "text/plain; charset=utf-8", "webmanifest": "application/manifest+json",
    ]

    /// Writes a service-made answer: the headers now and the body on HTTP_WRITEABLE.
    func respond(_ answer: HTTPAnswer, _ wsi: OpaquePointer) -> Int32 {
        respond(wsi, answer.status, json: answer.body)
    }

    /// Writes the headers now and the body on HTTP_WRITEABLE.
    func respond(_ wsi: OpaquePointer, _ status: UInt32, type: String = "application/json", json: [UInt8]) -> Int32 {
        respond(wsi, status, type: type, body: json)
    }

    func respond(_ wsi: OpaquePointer, _ status: UInt32, type: String, body: [UInt8],
                 headers: [(name: String, value: String)] = []) -> Int32 {
        if isHead(wsi) { return respondHead(wsi, status, type: type, length: body.count, cache: "no-store") }
        var buf = [UInt8](repeating: 0, count: pre + 2048)
        return buf.withUnsafeMutableBufferPointer { b -> Int32 in
            let start = b.baseAddress! + pre
            var p: UnsafeMutablePointer<UInt8>? = start
            let end = b.baseAddress! + b.count - 1
            if lws_add_http_common_headers(wsi, status, type, lws_filepos_t(body.count), &p, end) != 0 { return 1 }
            if lws_add_http_header_by_name(wsi, "cache-control:", "no-store", 8, &p, end) != 0 { return 1 }
            for h in headers {
                if lws_add_http_header_by_name(wsi, h.name, h.value, Int32(h.value.utf8.count), &p, end) != 0 { return 1 }
            }
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
            return transactionCompleted(wsi)
        }
    }

    func httpWritable(_ wsi: OpaquePointer) -> Int32 {
        if let r = deferredResponses.removeValue(forKey: wsi) {
            return respond(wsi, r.status, type: "application/json", body: r.body, headers: deferredHeaders.removeValue(forKey: wsi) ?? [])
        }
        guard var body = httpBodies.removeValue(forKey: wsi) else { return 0 }
        let pre = self.pre
        let n = body.withUnsafeMutableBufferPointer { p in
            lws_write(wsi, p.baseAddress! + pre, p.count - pre, LWS_WRITE_HTTP_FINAL)
        }
        if n < body.count - pre { return -1 }
        return transactionCompleted(wsi)
    }

    func errorJSON(_ code: String, _ message: String) -> [UInt8] { HTTPAnswer.errorJSON(code, message) }
}
