import CLibWebSockets
import RideAuth
import RideCore
import RideProtocol
import RideService

extension Shard {
    /// The ride.v1 protocol callback: one switch over what lws tells us.
    func callback(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                  _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        // The main thread creates and destroys contexts (callbacks then, with no service
        // thread running); any service thread but this context's own is a bug.
        assert(ServiceThread.current == -1 || ServiceThread.current == index,
               "lws context \(index) called back on service thread \(ServiceThread.current)")
        switch reason {
        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let s = session(wsi) else { return 0 }
            return writable(s)
        case LWS_CALLBACK_RECEIVE:
            guard let s = session(wsi) else { return 0 }
            receive(s, wsi, input, len)
            return 0
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainMailbox()
            return 0
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return confirmSubprotocol(wsi)
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            if answeredNUL(wsi) { return -1 }
            return filterUpgrade(wsi)
        case LWS_CALLBACK_ESTABLISHED:
            established(wsi)
            return 0
        case LWS_CALLBACK_CLOSED:
            if let s = session(wsi) { closed(s, wsi) }
            return 0
        case LWS_CALLBACK_HTTP:
            if answeredNUL(wsi) { return -1 }  // answered 400 already (RequestLineCheck.swift)
            bodyCompleted.remove(wsi)  // a new request on the connection
            if let r = httpLimits.begin(wsi, peer: clientAddress(wsi), take: service.admit, limit: service.config.maxConnectionsPerIP, hasBody:
                lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0, now: coarseMillis(), timeoutSeconds: service.config.handshakeTimeout) {
                service.metrics.add(service.metrics.refusedConnections)
                answerAndClose(wsi, r.status, r.body)
                return -1
            }
            return http(wsi, input, len)
        case LWS_CALLBACK_HTTP_BODY:
            if httpLimits.overdue(wsi, now: coarseMillis()) { return -1 }  // however steadily it trickles
            return serverAPIBody(wsi, input, len)
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            // Once per request; a second one closes the connection (ServerAPIRoutes.swift says why).
            guard bodyCompleted.insert(wsi).inserted else { return -1 }
            httpLimits.bodyDone(wsi)
            return serverAPIBodyComplete(wsi)
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return httpWritable(wsi)
        case LWS_CALLBACK_HTTP_FILE_COMPLETION:
            return transactionCompleted(wsi)
        case LWS_CALLBACK_WSI_DESTROY:
            httpBodies[wsi] = nil
            awaitingStore.forget(wsi)
            deferredResponses[wsi] = nil
            deferredHeaders[wsi] = nil
            apiBodies[wsi] = nil
            bodyCompleted.remove(wsi)
            if let peer = httpLimits.forget(wsi) { service.release(peer) }
            // Admitted by the filter but never established: give its address's place back.
            if let p = pendingUpgrades.removeValue(forKey: wsi) { service.release(p.peer) }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, len)
        }
    }

    /// The connection's session, kept in lws's opaque user data rather than in per-session
    /// data: lws allocates per-session data on its own (8 bytes, a 32-byte heap block per
    /// connection); the opaque pointer is a field of the wsi itself.
    func session(_ wsi: OpaquePointer) -> Session? {
        guard let p = lws_get_opaque_user_data(wsi) else { return nil }
        return Unmanaged<Session>.fromOpaque(p).takeUnretainedValue()
    }

    /// Before the upgrade (UpgradeRoute decides): only `/ws`, only allowed origins, a bounded
    /// number per address, and for /echo a valid token. A /ws token (query `token=` or
    /// `Authorization: Bearer`) is kept for ESTABLISHED, where a bad one can be answered with an
    /// `unauthorized` error and close code 4401.
    func filterUpgrade(_ wsi: OpaquePointer) -> Int32 {
        // HTTP/1.1 upgrades carry the path as GET; WebSockets over HTTP/2 (RFC 8441, what
        // Chromium uses on an https page) arrive as CONNECT with it in `:path`.
        var path = header(wsi, WSI_TOKEN_GET_URI) ?? header(wsi, WSI_TOKEN_HTTP_COLON_PATH) ?? ""
        if let q = path.firstIndex(of: "?") { path = String(path[..<q]) }
        let endpoint: UpgradeRoute.Endpoint
        switch UpgradeRoute.endpoint(path: path, echoEnabled: service.config.wsEcho != nil, origin: header(wsi, WSI_TOKEN_ORIGIN),
                                     allowedOrigins: service.config.allowedOrigins) {
        case .success(let e): endpoint = e
        case .failure(let r): return refuseUpgrade(wsi, r)
        }
        if let before = httpLimits.forget(wsi) { service.release(before) }  // HTTP before: the session counts it now
        let peer = clientAddress(wsi)
        guard service.admit(peer) else {
            service.metrics.add(service.metrics.refusedConnections)
            return refuseUpgrade(wsi, UpgradeRoute.tooManyConnections(from: peer, limit: service.config.maxConnectionsPerIP))
        }
        let token = requestToken(wsi)
        if let r = UpgradeRoute.tokenRefusal(endpoint, token: token, verifier: service.verifier, wall: WallClock.seconds()) {
            service.release(peer)
            return refuseUpgrade(wsi, r)
        }
        pendingUpgrades[wsi] = PendingUpgrade(peer: peer, token: token, echo: endpoint == .echo)
        return 0
    }

    /// Before lws looks at the offered subprotocols (HTTP_CONFIRM_UPGRADE): a client that
    /// offers some, none of them ride.v1, gets a 400 and the reason like the other refusals.
    func confirmSubprotocol(_ wsi: OpaquePointer) -> Int32 {
        guard let r = UpgradeRoute.subprotocolRefusal(offered: header(wsi, WSI_TOKEN_PROTOCOL)) else { return 0 }
        return refuseUpgrade(wsi, r)
    }

    func established(_ wsi: OpaquePointer) {
        let pending = pendingUpgrades.removeValue(forKey: wsi)
        let s = Session(handle: ConnectionHandle(bits: UInt(bitPattern: wsi)), peer: pending?.peer ?? peerName(wsi), serial: sessions.nextSerial(), pre: pre)
        // Its own connection, TCP or TLS: not a stream inside an HTTP/2 connection (TickStaging.swift).
        s.writesDirectly = lws_get_network_wsi(wsi) == wsi
        if pending?.echo == true, let limit = service.config.wsEcho { s.echo = EchoQueue(limit: limit) }
        lws_set_opaque_user_data(wsi, Unmanaged.passRetained(s).toOpaque())
        sessions.add(s)
        service.metrics.add(service.metrics.connections)
        pulse.connections.wrappingAdd(1, ordering: .relaxed)
        // Accepted just before the drain began: off to another node at once.
        if stopping { closeForRestart(s) }
        if let token = pending?.token { perform(s, s.conn.upgradeToken(token, service)) }
    }

    func closed(_ s: Session, _ wsi: OpaquePointer) {
        for sub in s.subscriptions { detach(s, sub) }
        s.subscriptions.removeAll()
        dropOpsWatcher(s)
        sessions.remove(s.serial)
        service.release(s.peer)
        service.metrics.add(service.metrics.connections, -1)
        pulse.connections.wrappingAdd(-1, ordering: .relaxed)
        lws_set_opaque_user_data(wsi, nil)
        Unmanaged.passUnretained(s).release()
    }

    /// Takes `s` out of its slot of `sub.live` (the caller removes it from the session's list).
    func detach(_ s: Session, _ sub: Subscription) {
        supersedeTick(sub)
        let slot = sub.live.slot(index)
        let i = Int(sub.index)
        let last = slot.pointee.subscribers.count - 1
        if i != last {
            slot.pointee.subscribers.swapAt(i, last)
            // The one moved into its place is found there by its own session from now on.
            slot.pointee.subscribers[i].session.subscriptions.moved(sub.live, to: sub.index)
        }
        slot.pointee.subscribers.removeLast()  // frees the others' array with the last of them
        sub.live.subscriberCount.wrappingAdd(-1, ordering: .relaxed)
        service.metrics.add(service.metrics.subscribers, -1)
    }

    /// Collects a message's fragments; a message over the frame limit is skipped to its end
    /// and answered with `too_large`, and the connection stays open.
    func receive(_ s: Session, _ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ len: Int) {
        // Once we decided to close (4401, 1008, 4008, 1001), nothing more is read into work.
        guard s.closing == nil else { return }
        if s.outbox.count + Int(s.pendingTicks) >= Outbox.limit || s.conn.inFlight >= Connection.maxInFlight * 4 {
            // It keeps sending but does not read its replies: a slow consumer, not a queue to grow.
            return slowConsumer(s, "slow consumer: \(Outbox.limit) replies not read")
        }
        if s.rxSince == 0 { s.rxSince = coarseMillis() }
        if s.rx.count + len > s.echo?.limit ?? service.config.maxFrame {
            if let e = s.echo { return closeHard(s, code: 1009, reason: "message larger than \(e.limit) bytes") }
            s.rxTooLarge = true
            s.rx.removeAll(keepingCapacity: false)
        } else if !s.rxTooLarge, let input {
            s.rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len))
        }
        guard lws_is_final_fragment(wsi) != 0, lws_remaining_packet_payload(wsi) == 0 else { return }
        defer {
            s.rx.removeAll(keepingCapacity: false)  // most clients go quiet: hold no buffer
            s.rxTooLarge = false
            s.rxSince = 0
        }
        if let e = s.echo {
            echo(s, e, binary: lws_frame_is_binary(wsi) != 0)
        } else if s.rxTooLarge {
            reply(s, ProtocolError(.tooLarge, "message larger than \(service.config.maxFrame) bytes"))
        } else if lws_frame_is_binary(wsi) != 0 {
            reply(s, ProtocolError(.badRequest, "binary frames are not part of ride.v1; send JSON text"))
        } else {
            handleMessage(s, s.rx)
        }
    }

    /// Closes with `code` once what is queued is written, and in any case within 5 s, so a
    /// peer that stops reading cannot hold a closing connection (and its queue) open.
    func closeHard(_ s: Session, code: UInt16, reason: String) {
        logClose(s, code: code, reason: reason)
        s.close(code: code, reason: reason)
        lws_set_timeout(s.wsi, PENDING_TIMEOUT_CLOSE_SEND, 5)
    }

    // MARK: lws helpers

    func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let n = lws_hdr_total_length(wsi, token)
        guard n > 0, n < 8192 else { return nil }
        var buf = [CChar](repeating: 0, count: Int(n) + 1)
        guard lws_hdr_copy(wsi, &buf, Int32(buf.count), token) >= 0 else { return nil }
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func urlArg(_ wsi: OpaquePointer, _ name: String) -> String? {
        var buf = [CChar](repeating: 0, count: 4096)
        guard let p = lws_get_urlarg_by_name(wsi, name + "=", &buf, Int32(buf.count)) else { return nil }
        let v = String(cString: p)
        return v.isEmpty ? nil : v
    }

    func peerName(_ wsi: OpaquePointer) -> String {
        var buf = [CChar](repeating: 0, count: 64)
        guard let p = lws_get_peer_simple(wsi, &buf, buf.count) else { return "?" }
        return String(cString: p)
    }

    /// The address the per-address limit counts (ClientAddress decides, --trust-proxy).
    func clientAddress(_ wsi: OpaquePointer) -> String {
        ClientAddress.of(peer: peerName(wsi), trustProxy: service.config.trustProxy,
                         forwarded: header(wsi, WSI_TOKEN_HTTP_X_REAL_IP) ?? header(wsi, WSI_TOKEN_X_FORWARDED_FOR))
    }
}

struct PendingUpgrade {
    let peer: String
    let token: String?
    /// An upgrade to /echo (--ws-echo).
    let echo: Bool
}
