import CLibWebSockets
import RideAuth
import RideCore

/// ride.v1 message handling: decode → check → registry → reply and push.
extension Shard {
    func handleMessage(_ s: Session, _ bytes: [UInt8]) {
        switch ClientCodec.decode(bytes) {
        case .success(let env): handle(s, env)
        case .failure(let e):
            if e.code == .unknownType, let ops = OpsRequest.decode(bytes) { return handleOps(s, ops) }
            hub.metrics.control("invalid", e.code.rawValue)
            answer(s, ServerMessages.error(e, prefix: pre))
        }
    }

    /// Sends a reply made on this thread, behind any the store worker still owes this session.
    func answer(_ s: Session, _ frame: [UInt8]) {
        if s.inFlight == 0 { return s.enqueue(frame) }
        toWorker(s, .lookup(nil, from: requester(s), then: .bytes(frame)))
    }

    func requester(_ s: Session) -> Requester { Requester(shard: index, session: s.serial) }

    func toWorker(_ s: Session, _ job: StoreJob) {
        s.inFlight += 1
        hub.registry.submit(job)
        if s.inFlight >= Shard.maxInFlight, !s.readingPaused {
            s.readingPaused = true
            lws_rx_flow_control(s.wsi, 0)
        }
    }

    /// One answer from the store worker arrived for `s`.
    func answered(_ s: Session) {
        s.inFlight -= 1
        if s.readingPaused, s.inFlight <= Shard.maxInFlight / 2 {
            s.readingPaused = false
            lws_rx_flow_control(s.wsi, 1)
        }
    }

    /// Handles one message. `inTurn`: the store worker handed it back after everything sent
    /// before it was answered, so it is answered now; otherwise, while earlier requests are
    /// still at the worker, anything answered here waits its turn there.
    func handle(_ s: Session, _ env: ClientEnvelope, inTurn: Bool = false) {
        // Reads and subscriptions wait behind the session's requests at the worker, so their
        // answers (and a new subscription's first tick) follow the earlier replies.
        if !inTurn, !env.message.isControl, s.inFlight > 0 {
            return toWorker(s, .lookup(Self.rideOf(env.message), from: requester(s), then: .message(env)))
        }
        func refusal(_ e: ProtocolError) {
            inTurn ? s.enqueue(ServerMessages.error(e, prefix: pre)) : reply(s, e)
        }
        if case .auth(let token) = env.message {
            return authenticate(s, token: token, id: env.id, replyOnSuccess: true)
        }
        if hub.authRequired, s.access == nil {
            return refuse(s, ProtocolError(.unauthorized, "authenticate first: a token in ?token=, an Authorization header or an auth message", id: env.id))
        }
        // A token is checked when it arrives; one that has expired since may not act any more.
        if let exp = s.access?.claims.exp, exp <= hub.clock.now() / 1000 - TokenSigner.leeway {
            return refuse(s, ProtocolError(.unauthorized, "token expired; reconnect with a new one", id: env.id))
        }
        if env.message.isControl, !withinRate(s) {
            hub.metrics.add(hub.metrics.rateLimited)
            refusal(ProtocolError(.rateLimited, "more than \(hub.config.controlRate) control messages per second; slow down", id: env.id))
            s.strikes += 1
            if s.strikes > hub.config.controlRate * 5 { closeHard(s, code: 1008, reason: "flooding") }
            return
        }
        let scope = s.access?.rider ?? ""
        switch env.message {
        case .start(let ride, let plan, let limit):
            if let a = s.access, !a.mayStart() {
                return refusal(ProtocolError(.forbidden, "this token may only watch rides", id: env.id))
            }
            toWorker(s, .request(.start(ride: ride, plan: plan, limit: limit, owner: s.access?.rider),
                                 id: env.id, scope: scope, access: s.access, from: requester(s)))
        case .control(let cmd, let ride, let metres):
            toWorker(s, .request(.command(cmd, ride: ride, metres: metres), id: env.id, scope: scope,
                                 access: s.access, from: requester(s)))
        case .share(let ride) where hub.signer == nil:
            s.enqueue(ServerMessages.share(ride: ride, id: env.id, url: "/?ride=\(ride)", token: "", prefix: pre))
        case .unsubscribe(let ride) where s.subscription(for: ride) != nil:
            complete(s, env, ride, nil, nil)
        case .subscribe(let ride), .get(let ride), .share(let ride), .unsubscribe(let ride):
            // In memory: at once. Otherwise the store worker reads it, and this thread goes on.
            if let live = hub.registry.find(ride) { return complete(s, env, ride, live, nil) }
            toWorker(s, .lookup(ride, from: requester(s), then: .message(env)))
        case .quote(let planID, let seconds, let paused):
            guard let plan = hub.registry.plan(planID) else {
                return s.enqueue(ServerMessages.error(ProtocolError(.planNotFound, "no plan \"\(planID ?? "")\"", id: env.id), prefix: pre))
            }
            let q = FareEngine.quote(plan, riding: seconds, paused: paused)
            s.enqueue(ServerMessages.quote(id: env.id, plan: plan, quote: q, seconds: seconds, paused: paused, prefix: pre))
        case .auth:
            break
        }
    }

    static func rideOf(_ m: ClientMessage) -> String? {
        switch m {
        case .subscribe(let r), .get(let r), .share(let r), .unsubscribe(let r): return r
        default: return nil
        }
    }

    /// What the store worker handed back, in turn.
    func resume(_ s: Session, _ then: Continuation, _ found: LiveRide?, _ failure: ProtocolError?) {
        guard s.closing == nil else { return }
        switch then {
        case .bytes(let frame): s.enqueue(frame)
        case .http: break
        case .ops(let req): handleOps(s, req, inTurn: true)
        case .message(let env):
            var aboutARide = Self.rideOf(env.message) != nil
            if case .share = env.message, hub.signer == nil { aboutARide = false }
            if aboutARide, let ride = Self.rideOf(env.message) {
                complete(s, env, ride, found ?? hub.registry.find(ride), failure)
            } else {
                handle(s, env, inTurn: true)
            }
        }
    }

    /// Answers a message about one ride, now that it is known whether the ride exists.
    func complete(_ s: Session, _ env: ClientEnvelope, _ ride: String, _ live: LiveRide?, _ failure: ProtocolError?) {
        func error(_ e: ProtocolError) {
            var e = e
            e.id = env.id
            s.enqueue(ServerMessages.error(e, prefix: pre))
        }
        if case .unsubscribe = env.message {
            if let sub = s.subscription(for: ride) {
                detach(sub)
                s.subscriptions.removeAll { $0 === sub }
            } else if live == nil {
                return error(failure ?? ProtocolError(.rideNotFound, "no ride \"\(ride)\""))
            }
            return s.enqueue(ServerMessages.unsubscribed(ride: ride, id: env.id, prefix: pre))
        }
        guard let live else { return error(failure ?? ProtocolError(.rideNotFound, "no ride \"\(ride)\"")) }
        switch env.message {
        case .subscribe:
            guard mayWatch(s, live, env.id) else { return }
            if s.subscription(for: ride) == nil {
                guard s.subscriptions.count < hub.config.maxSubscriptions else {
                    return error(ProtocolError(.tooManySubscriptions, "at most \(hub.config.maxSubscriptions) subscriptions per connection"))
                }
                let sub = Subscription(live: live, session: s)
                s.subscriptions.append(sub)
                live.slots[index].subscribers.append(sub)
                live.subscriberCount.wrappingAdd(1, ordering: .relaxed)
                hub.metrics.add(hub.metrics.subscribers)
            }
            hub.metrics.control("subscribe", "ok")
            s.enqueue(stateMessage(live, id: env.id))
        case .get:
            guard mayWatch(s, live, env.id) else { return }
            if s.access?.claims.ops == true { return journalState(s, live, id: env.id) }
            s.enqueue(stateMessage(live, id: env.id))
        case .share:
            share(s, live, env.id)
        default:
            break
        }
    }

    /// Whether this session may watch the ride; otherwise the error is sent.
    func mayWatch(_ s: Session, _ live: LiveRide, _ id: String?) -> Bool {
        if let a = s.access, !a.mayWatch(rideID: live.id, rideOwner: hub.registry.snapshot(live).owner) {
            s.enqueue(ServerMessages.error(ProtocolError(.forbidden, "this token may not watch ride \"\(live.id)\"", id: id), prefix: pre))
            return false
        }
        return true
    }

    func stateMessage(_ live: LiveRide, id: String?) -> [UInt8] {
        let ride = hub.registry.snapshot(live)
        return ServerMessages.state(ride: ride, plan: live.plan, at: hub.clock.now(), id: id, prefix: pre)
    }

    /// One-second windows of control messages per connection. Messages over the limit are
    /// strikes; strikes are forgiven only after a window that stayed within the limit, so a
    /// client that keeps sending even a little too fast is closed (1008) after `rate × 5` of them.
    func withinRate(_ s: Session) -> Bool {
        let now = monotonicMillis()
        if now - s.windowStart >= 1000 {
            if s.windowCount <= hub.config.controlRate || now - s.windowStart >= 2000 { s.strikes = 0 }
            s.windowStart = now
            s.windowCount = 0
        }
        s.windowCount += 1
        return s.windowCount <= hub.config.controlRate
    }

    func authenticate(_ s: Session, token: String, id: String?, replyOnSuccess: Bool) {
        guard let signer = hub.signer else {
            if replyOnSuccess { s.enqueue(authenticatedMessage(id: id, sub: nil, scope: nil)) }
            return
        }
        do {
            let claims = try signer.verify(token, now: hub.clock.now() / 1000)
            s.access = Access(claims)
            s.tokenExp = claims.exp ?? .max
            if replyOnSuccess { s.enqueue(authenticatedMessage(id: id, sub: claims.sub, scope: claims.scope.rawValue)) }
        } catch {
            refuse(s, ProtocolError(.unauthorized, "token refused: \(error.message)", id: id))
        }
    }

    /// Unauthorized: say why, then close with 4401 (the client should get a new token, not retry).
    /// Its subscriptions end at once: no tick follows the error.
    func refuse(_ s: Session, _ e: ProtocolError) {
        hub.metrics.control("auth", "unauthorized")
        for sub in s.subscriptions { detach(sub) }
        s.subscriptions.removeAll()
        s.enqueue(ServerMessages.error(e, prefix: pre))
        closeHard(s, code: 4401, reason: "unauthorized")
    }

    func authenticatedMessage(id: String?, sub: String?, scope: String?) -> [UInt8] {
        var w = JSONWriter(reserving: 128, prefix: pre)
        w.beginObject()
        w.field("type", "authenticated")
        if let id { w.field("id", id) }
        if let sub { w.field("sub", sub) }
        if let scope { w.field("scope", scope) }
        w.endObject()
        return w.bytes
    }

    /// A watch-only link for one ride, for its owner (or ops), valid for two hours.
    func share(_ s: Session, _ live: LiveRide, _ id: String?) {
        let ride = live.id
        guard let signer = hub.signer else {
            return s.enqueue(ServerMessages.share(ride: ride, id: id, url: "/?ride=\(ride)", token: "", prefix: pre))
        }
        guard let a = s.access, a.mayControl(rideOwner: hub.registry.snapshot(live).owner) else {
            return s.enqueue(ServerMessages.error(ProtocolError(.forbidden, "only the ride's rider may share it", id: id), prefix: pre))
        }
        let token = signer.sign(TokenClaims.share(ride: ride, now: hub.clock.now() / 1000, ttl: 2 * 3600))
        s.enqueue(ServerMessages.share(ride: ride, id: id, url: "/?ride=\(ride)&token=\(token)", token: token, prefix: pre))
    }
}
