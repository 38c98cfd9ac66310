import CCurl
import Foundation

/// The one thread that runs a client's libcurl multi handle: transfers queued from any thread
/// (under `lock`, then `curl_multi_wakeup`) are added there, driven by `curl_multi_perform`
/// and `curl_multi_poll`, and completed there. The multi handle keeps the connections, so a
/// request to a host already connected reuses the connection (keep-alive, or one more HTTP/2
/// stream on it).
final class TransferLoop: @unchecked Sendable {  // `queued`, `stopping` only under `lock`; `active` only on the loop thread; `multi` set in init
    private let multi: UnsafeMutableRawPointer
    private let caFile: String?
    private let lock = NSLock()
    private var queued: [Transfer] = []
    private var stopping = false
    private var active: [UnsafeMutableRawPointer: Transfer] = [:]
    private let finished = DispatchSemaphore(value: 0)

    init(caFile: String?, maxHostConnections: Int = 0) {
        HTTPClient.globalInit()
        guard let multi = curl_multi_init() else { fatalError("libcurl: curl_multi_init failed (out of memory)") }
        self.multi = multi
        self.caFile = caFile
        // Many requests to one HTTP/2 server share its connection as streams.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // At most a few connections per host when asked (the push sender's APNs and FCM, which
        // speak HTTP/2; webhooks to HTTP/1.1 receivers need one per request): without a cap libcurl opens another
        // connection whenever one's streams are all busy or it is not yet known to speak
        // HTTP/2, so a fare step of thousands of rides opened hundreds of them. Beyond the cap
        // transfers wait in libcurl's queue for a stream (their CURLOPT_TIMEOUT_MS counts the
        // wait, so a request's deadline still bounds it); CURLOPT_PIPEWAIT on each transfer
        // makes it wait for the first connection to say it can multiplex.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxHostConnections)
        let thread = Thread { [self] in run() }
        thread.name = "http-client"
        thread.start()
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    /// False when the loop has stopped (the transfer is then not taken).
    func enqueue(_ transfer: Transfer) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !stopping else { return false }
        queued.append(transfer)
        curl_multi_wakeup(multi)
        return true
    }

    /// Ends the loop: transfers not finished complete with `cancelled`. Waits for the thread.
    func stop() {
        lock.lock()
        let first = !stopping
        stopping = true
        curl_multi_wakeup(multi)
        lock.unlock()
        if first { finished.wait() }
    }

    private func run() {
        defer { finished.signal() }
        var running: Int32 = 0
        while true {
            lock.lock()
            let new = queued
            queued.removeAll()
            let stop = stopping
            lock.unlock()
            for transfer in new { start(transfer) }
            if stop { break }
            curl_multi_perform(multi, &running)
            collectFinished()
            // No timeout argument beyond a second: libcurl shortens the wait to its own next
            // timer (a transfer's deadline, a retry), and curl_multi_wakeup cuts it short.
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        let cancelled = HTTPClientError(kind: .cancelled, message: "the HTTP client was shut down")
        for (easy, transfer) in active {
            curl_multi_remove_handle(multi, easy)
            transfer.fail(cancelled)
        }
        active.removeAll()
    }

    private func start(_ transfer: Transfer) {
        let code = transfer.configure(caFile: caFile)
        guard code == CURLE_OK else {
            return transfer.fail(HTTPClientError(kind: .other, message: "libcurl: \(String(cString: curl_easy_strerror(code)))",
                                                 curlCode: Int32(code.rawValue)))
        }
        let added = curl_multi_add_handle(multi, transfer.easy)
        guard added == CURLM_OK else {
            return transfer.fail(HTTPClientError(kind: .other, message: "libcurl: \(String(cString: curl_multi_strerror(added)))"))
        }
        active[transfer.easy] = transfer
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_msg_result(message)
            curl_multi_remove_handle(multi, easy)
            active.removeValue(forKey: easy)?.finish(code)
        }
    }
}
