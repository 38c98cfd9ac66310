import CLibWebSockets
import RideAuth
import RideCore
import RideService

/// The server API on the HTTP side (ServerAPIRequest.swift decides, StoreCoordinator applies):
/// a POST's headers are kept while its body arrives, then the request is admitted and handed
/// to the store worker like a ride.v1 request, and answered on HTTP_WRITEABLE once committed.
/// Only HTTP/1.1 bodies are read: Debian's lws 4.1.6 fails POST bodies over HTTP/2.
extension Shard {
    /// A server API POST the router took (its token already checked from the headers): the
    /// body is read, then admitted.
    func serverAPI(_ wsi: OpaquePointer, _ path: String) -> Int32 {
        var pending = ServerAPIBody(path: path, idempotencyKey: customHeaderBytes(wsi, "idempotency-key:"), token: requestToken(wsi))
        // lws reads a body only when a length is declared; without one the body is empty,
        // and a chunked one is refused rather than taken for empty.
        // Strictly digits and no larger than admission takes (ServerAPIRequest.declaredLength):
        // refused before a byte of the body is read.
        let declared: Int?
        switch ServerAPIRequest.declaredLength(header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH)) {
        case .success(let n): declared = n
        case .failure(let refusal):
            answerAndClose(wsi, refusal.answer.status, refusal.answer.body)
            return -1
        }
        let length = declared ?? 0
        if length == 0, header(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) != nil {
            // lws 4.1.6 reads no chunked request body: say so (answered like any other, not
            // closed at once, which could reset the connection before the answer is read).
            let a = HTTPAnswer.error(400, "bad_request", "send the body with a Content-Length; chunked bodies are not read")
            deferredResponses[wsi] = (a.status, a.body)
            lws_callback_on_writable(wsi)
            return 0
        }
        // With no Content-Length lws announces no body; with one (`0` included) it calls
        // HTTP_BODY_COMPLETION once the body is read, and that is where the request goes on.
        if declared == nil {
            return serverAPIBodyDone(wsi, &pending)
        }
        apiBodies[wsi] = pending
        return 0
    }

    func serverAPIBody(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        guard let input else { return 0 }
        apiBodies[wsi]?.append(UnsafeRawBufferPointer(start: input, count: len))
        return 0
    }

    /// A request's body is complete: a server API POST's is admitted; any other request's
    /// body (a GET that sent one) was not read and its answer goes on.
    ///
    /// lws calls this once per request, except for a request pipelined behind another one:
    /// lws 4.1.6 parses it from the connection's input buffer list, then `lws_handshake_server`
    /// reads that same list again as its body (the body it hands over starts at the request
    /// line) and loops calling HTTP_BODY_COMPLETION with nothing consumed for as long as the
    /// callback returns 0: a service thread at 100 % CPU, reachable without a token (issue 36,
    /// finding 1). So a second completion for one request (LwsCallback.swift counts them)
    /// returns -1 and lws closes the connection, which ends its loop; answers already written
    /// (the request before) stay written.
    func serverAPIBodyComplete(_ wsi: OpaquePointer) -> Int32 {
        guard var pending = apiBodies.removeValue(forKey: wsi) else { return 0 }
        return serverAPIBodyDone(wsi, &pending)
    }

    private func serverAPIBodyDone(_ wsi: OpaquePointer, _ pending: inout ServerAPIBody) -> Int32 {
        switch ServerAPIRequest.admit(method: "POST", path: pending.path, idempotencyKeyBytes: pending.idempotencyKey,
                                      token: pending.token, body: pending.bytes, verifier: service.verifier, wall: WallClock.seconds()) {
        case .failure(let refusal):
            deferredResponses[wsi] = (refusal.answer.status, refusal.answer.body)
            lws_callback_on_writable(wsi)
        case .success(let call):
            let token = awaitingStore.add(wsi, pending.path)
            service.submit(.api(call, from: Requester(shard: index, session: 0, http: token)))
        }
        return 0
    }

    /// A header lws has no token for (by name, lower-cased, with its colon), as the bytes
    /// that arrived: the service refuses what is not UTF-8 and counts the bytes themselves.
    func customHeaderBytes(_ wsi: OpaquePointer, _ name: String) -> [UInt8]? {
        let n = lws_hdr_custom_length(wsi, name, Int32(name.utf8.count))
        guard n >= 0, n < 65536 else { return nil }
        var buf = [CChar](repeating: 0, count: Int(n) + 1)
        guard lws_hdr_custom_copy(wsi, &buf, Int32(buf.count), name, Int32(name.utf8.count)) >= 0 else { return nil }
        return buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }
    }
}
