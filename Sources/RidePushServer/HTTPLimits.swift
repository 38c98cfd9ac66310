import CLibWebSockets
import RideCore
import RideService

/// Limits on plain HTTP connections (issue 36, finding 2): each holds a place in the
/// per-address limit like a WebSocket session, and each request with a body has one deadline
/// (--handshake-timeout from its start) instead of lws's timeout, which restarts on every
/// chunk so a body trickled a byte at a time was never timed out.
extension Shard {
    /// On a connection's first request: takes a place for its address (with --trust-proxy the
    /// address the proxy names, which only the headers say, so not before them). Over the
    /// limit the request is answered 429 and the connection closed: false.
    func admitHTTPConnection(_ wsi: OpaquePointer) -> Bool {
        guard httpPeers[wsi] == nil else { return true }  // counted once per connection, not per request
        let peer = clientAddress(wsi)
        guard hub.admit(peer) else {
            hub.metrics.add(hub.metrics.refusedConnections)
            let answer = HTTPRouter.tooManyConnections(from: peer, limit: hub.config.maxConnectionsPerIP)
            answerAndClose(wsi, answer.status, answer.body)
            return false
        }
        httpPeers[wsi] = peer
        return true
    }

    /// A request that declares a body gets its deadline now; lws calls BODY_COMPLETION for
    /// it (which clears it) or the connection goes (WSI_DESTROY clears it).
    func startRequestDeadline(_ wsi: OpaquePointer) {
        guard lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 else { return }
        requestDeadlines[wsi] = coarseMillis() + Int64(hub.config.handshakeTimeout) * 1000
    }

    func requestOverdue(_ wsi: OpaquePointer) -> Bool {
        guard let deadline = requestDeadlines[wsi] else { return false }
        return coarseMillis() >= deadline
    }

    /// Once a second (the connection timer): a body still arriving past its deadline is
    /// closed even if no byte comes to run HTTP_BODY's check. lws's own timeout cannot carry
    /// the deadline: it sets PENDING_TIMEOUT_HTTP_CONTENT again after each chunk's callback.
    func closeOverdueRequests(now: Int64) {
        guard !requestDeadlines.isEmpty else { return }
        for (wsi, deadline) in requestDeadlines where deadline <= now {
            requestDeadlines[wsi] = nil
            lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, LWS_TO_KILL_ASYNC)
        }
    }
}
