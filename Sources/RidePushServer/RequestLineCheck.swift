import CEpoll
import CLibWebSockets
import Glibc
import RideService

/// A NUL in a request's path or query gets a 400 (RequestLineNUL says why lws cannot): each
/// plain-HTTP connection is marked in the thread's epoll loop while it awaits a request, and
/// the loop's hook hands it to `peekRequestLine` before lws reads it. One peek per request;
/// over TLS the bytes are ciphertext, so nothing is marked.
extension Shard {
    static let nulAnswer = RequestLineNUL.answer(headers: SecurityHeaders.all)

    var checksRequestLines: Bool { loop != nil && service.config.tlsCert == nil }

    func installRequestHook() {
        guard checksRequestLines else { return }
        cepoll_loop_set_request_hook(loop, { ctx, fd in
            Unmanaged<Shard>.fromOpaque(ctx!).takeUnretainedValue().peekRequestLine(fd)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A new connection, or one whose answer is out and that stays open for the next request.
    func awaitRequest(_ fd: Int32) {
        guard checksRequestLines, fd >= 0 else { return }
        nulAnswered.remove(fd)
        cepoll_loop_mark_request(loop, fd, 1)
    }

    /// Inside poll(), before lws reads `fd`: the request line it is about to parse.
    func peekRequestLine(_ fd: Int32) {
        assert(ServiceThread.current == index, "request hook of thread \(index) on thread \(ServiceThread.current)")
        cepoll_loop_mark_request(loop, fd, 0)  // once per request: bodies and frames are not looked at
        let n = recv(fd, peekBuffer, RequestLineNUL.peekLimit, Int32(MSG_PEEK | MSG_DONTWAIT))
        guard n > 0, RequestLineNUL.found(in: UnsafeRawBufferPointer(start: peekBuffer, count: n)) else { return }
        // The whole answer fits an empty send buffer; lws then drops the connection (or, for
        // `/%00`, is stopped at the callback by `nulAnswered`), and no byte of its follows.
        _ = Self.nulAnswer.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        shutdown(fd, Int32(SHUT_WR))
        nulAnswered.insert(fd)
    }

    /// True for a request whose line was answered 400 here (`GET /%00`, which lws routes as `/`).
    func answeredNUL(_ wsi: OpaquePointer) -> Bool {
        !nulAnswered.isEmpty && nulAnswered.remove(lws_get_socket_fd(wsi)) != nil
    }

    /// lws_http_transaction_completed, and the connection awaits its next request when it
    /// stays open with nothing of ours still buffered (a peeked answer must not cut into one).
    func transactionCompleted(_ wsi: OpaquePointer) -> Int32 {
        if lws_http_transaction_completed(wsi) != 0 { return -1 }
        if lws_partial_buffered(wsi) == 0, lws_get_network_wsi(wsi) == wsi { awaitRequest(lws_get_socket_fd(wsi)) }
        return 0
    }
}
