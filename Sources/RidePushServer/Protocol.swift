import CLibWebSockets
import RideAuth
import RideCore

/// ride.v1 message handling: decode → check → registry → reply and push.
extension Shard {
    func handleMessage(_ s: Session, _ bytes: [UInt8]) {
        let env: ClientEnvelope
        switch ClientCodec.decode(bytes) {
        case .success(let e): env = e
        case .failure(let e):
            if e.code == .unknownType, let ops = OpsRequest.decode(bytes) { return handleOps(s, ops) }
            hub.metrics.control("invalid", e.code.rawValue)
            return reply(s, e)
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
            reply(s, ProtocolError(.rateLimited, "more than \(hub.config.controlRate) control messages per second; slow down", id: env.id))
            s.strikes += 1
            if s.strikes > hub.config.controlRate * 5 { closeHard(s, code: 1008, reason: "flooding") }
            return
        }
        let scope = s.access?.rider ?? ""
        switch env.message {
        case .start(let ride, let plan, let limit):
            if let a = s.access, !a.mayStart() {
                return reply(s, ProtocolError(.forbidden, "this token may only watch rides", id: env.id))
            }
            let out = hub.registry.start(id: env.id, rideID: ride, planID: plan, limit: limit, owner: s.access?.rider, scope: scope)
            s.enqueue(out.reply)
        case .control(let cmd, let ride, let metres):
            let access = s.access
            let out = hub.registry.control(cmd, rideID: ride, metres: metres, id: env.id, scope: scope) { r in
                guard let a = access, !a.mayControl(rideOwner: r.owner) else { return nil }
                return ProtocolError(.forbidden, a.claims.scope == .watch ? "this token may only watch rides" : "ride \"\(r.id)\" belongs to another rider")
            }
            if let own = s.subscription(for: ride) { supersedeTick(own) }
            s.enqueue(out.reply)
            if let (live, frame) = out.push { hub.broadcast(live, frame, from: self, except: s) }
        case .subscribe(let ride):
            guard let live = watchable(s, ride, env.id) else { return }
            if s.subscription(for: ride) == nil {
                guard s.subscriptions.count < hub.config.maxSubscriptions else {
                    return reply(s, ProtocolError(.tooManySubscriptions, "at most \(hub.config.maxSubscriptions) subscriptions per connection", id: env.id))
                }
                let sub = Subscription(live: live, session: s)
                s.subscriptions.append(sub)
                live.slots[index].subscribers.append(sub)
                live.watchers.add(1, ordering: .relaxed)
                hub.metrics.add(hub.metrics.subscribers)
            }
            hub.metrics.control("subscribe", "ok")
            s.enqueue(stateMessage(live, id: env.id))
        case .unsubscribe(let ride):
            if let sub = s.subscription(for: ride) {
                detach(sub)
                s.subscriptions.removeAll { $0 === sub }
            } else if case .failure(var e) = hub.registry.find(ride) {
                e.id = env.id
                return reply(s, e)
            }
            s.enqueue(ServerMessages.unsubscribed(ride: ride, id: env.id, prefix: pre))
        case .get(let ride):
            guard let live = watchable(s, ride, env.id) else { return }
            let state = stateMessage(live, id: env.id)
            s.enqueue(s.access?.claims.ops == true ? withJournal(state, live) ?? state : state)
        case .quote(let planID, let seconds, let paused):
            guard let plan = hub.registry.plan(planID) else {
                return reply(s, ProtocolError(.planNotFound, "no plan \"\(planID ?? "")\"", id: env.id))
            }
            let q = FareEngine.quote(plan, riding: seconds, paused: paused)
            s.enqueue(ServerMessages.quote(id: env.id, plan: plan, quote: q, seconds: seconds, paused: paused, prefix: pre))
        case .share(let ride):
            share(s, ride, env.id)
        case .auth:
            break
        }
    }

    /// The ride if this session may watch it; otherwise the error is sent and nil returned.
    func watchable(_ s: Session, _ ride: String, _ id: String?) -> LiveRide? {
        switch hub.registry.find(ride) {
        case .failure(var e):
            e.id = id
            reply(s, e)
            return nil
        case .success(let live):
            if let a = s.access, !a.mayWatch(rideID: ride, rideOwner: live.ride.owner) {
                reply(s, ProtocolError(.forbidden, "this token may not watch ride \"\(ride)\"", id: id))
                return nil
            }
            return live
        }
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
        reply(s, e)
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
    func share(_ s: Session, _ ride: String, _ id: String?) {
        guard let signer = hub.signer else {
            return s.enqueue(ServerMessages.share(ride: ride, id: id, url: "/?ride=\(ride)", token: "", prefix: pre))
        }
        switch hub.registry.find(ride) {
        case .failure(var e):
            e.id = id
            reply(s, e)
        case .success(let live):
            guard let a = s.access, a.mayControl(rideOwner: live.ride.owner) else {
                return reply(s, ProtocolError(.forbidden, "only the ride's rider may share it", id: id))
            }
            let token = signer.sign(TokenClaims.share(ride: ride, now: hub.clock.now() / 1000, ttl: 2 * 3600))
            s.enqueue(ServerMessages.share(ride: ride, id: id, url: "/?ride=\(ride)&token=\(token)", token: token, prefix: pre))
        }
    }
}
