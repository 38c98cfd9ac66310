import CLibWebSockets
import RideAuth
import RideCore
import RideStore

/// `watch_all` / `unwatch_all`, the operator's requests. Read here, after the ride.v1 codec
/// found no such type, so the codec stays the riders' protocol.
struct OpsRequest: Equatable, Sendable {
    enum Kind: Sendable { case watchAll, unwatchAll }
    let kind: Kind
    let id: String?

    static func decode(_ bytes: some Collection<UInt8>) -> OpsRequest? {
        guard case .object(let o)? = try? JSON.parse(bytes), let type = o["type"]?.string else { return nil }
        let kind: Kind
        switch type {
        case "watch_all": kind = .watchAll
        case "unwatch_all": kind = .unwatchAll
        default: return nil
        }
        var id: String?
        if let raw = o["id"] {
            guard let s = raw.string, !s.isEmpty, s.utf8.count <= ClientCodec.maxIDLength else { return nil }
            id = s
        }
        return OpsRequest(kind: kind, id: id)
    }
}

/// What a store read for an operator view answers: an HTTP status (ignored over the socket)
/// and the body or message.
struct OpsAnswer: Sendable {
    let status: UInt32
    let body: [UInt8]
}

extension Shard {
    /// The same gate as every ride.v1 message (a token, unexpired), then ops only. Waits its
    /// turn behind the session's requests still at the store worker, like a `get`.
    func handleOps(_ s: Session, _ req: OpsRequest, inTurn: Bool = false) {
        if !inTurn, s.inFlight > 0 {
            return toWorker(s, .lookup(nil, from: requester(s), then: .ops(req)))
        }
        if hub.authRequired, s.access == nil {
            return refuse(s, ProtocolError(.unauthorized, "authenticate first: a token in ?token=, an Authorization header or an auth message", id: req.id))
        }
        if let exp = s.access?.claims.exp, exp <= hub.clock.now() / 1000 - TokenSigner.leeway {
            return refuse(s, ProtocolError(.unauthorized, "token expired; reconnect with a new one", id: req.id))
        }
        let type = req.kind == .watchAll ? "watch_all" : "unwatch_all"
        guard isOperator(s) else {
            hub.metrics.control(type, ErrorCode.forbidden.rawValue)
            return reply(s, ProtocolError(.forbidden, "\(type) needs an operator (ops) token", id: req.id))
        }
        switch req.kind {
        case .watchAll:
            // A snapshot of a big fleet is megabytes: counted like a control message.
            guard withinRate(s) else {
                hub.metrics.add(hub.metrics.rateLimited)
                return reply(s, ProtocolError(.rateLimited, "more than \(hub.config.controlRate) requests per second; slow down", id: req.id))
            }
            hub.metrics.control(type, "ok")
            watchAll(s, id: req.id)
        case .unwatchAll:
            hub.metrics.control(type, "ok")
            unwatchAll(s, id: req.id)
        }
    }

    /// `get` by an operator: the state with the journal (read by the store worker, so it
    /// answers in turn) and the watchers.
    func journalState(_ s: Session, _ live: LiveRide, id: String?) {
        let registry = hub.registry!
        let clock = hub.clock
        let pre = self.pre
        toWorker(s, .read(from: requester(s), http: nil) { store in
            let ride = registry.snapshot(live)
            let state = ServerMessages.state(ride: ride, plan: live.plan, at: clock.now(), id: id, prefix: pre)
            guard let journal = (try? store.ride(live.id))??.journal else { return OpsAnswer(status: 200, body: state) }
            return OpsAnswer(status: 200, body: OpsMessages.withJournal(state, journal: journal,
                                                                        watchers: live.subscriberCount.load(ordering: .relaxed)))
        })
    }

    /// `GET /rides/{id}` for an operator (or with `?journal=1`): the document with the journal
    /// and the watchers, read by the store worker.
    func rideDocumentWithJournal(_ wsi: OpaquePointer, _ id: String, _ claims: TokenClaims?) -> Int32 {
        let registry = hub.registry!
        let now = hub.clock.now()
        return awaitStore(wsi, id) { store in
            let stored: StoredRide?
            do throws(StoreError) { stored = try store.ride(id) } catch {
                return OpsAnswer(status: 503, body: OpsMessages.error("unavailable", "ride storage is unavailable: \(error.message)"))
            }
            guard let stored else { return OpsAnswer(status: 404, body: OpsMessages.error("ride_not_found", "no ride \"\(id)\"")) }
            if let claims, !Access(claims).mayWatch(rideID: id, rideOwner: stored.owner) {
                return OpsAnswer(status: 403, body: OpsMessages.error("forbidden", "this token may not read ride \"\(id)\""))
            }
            let live = registry.find(id)
            let plan = live?.plan ?? registry.plans[stored.planID] ?? .standard
            let doc = ServerMessages.rideDocument(ride: stored.ride, plan: plan, at: now)
            return OpsAnswer(status: 200, body: OpsMessages.withJournal(doc, journal: stored.journal,
                                                                        watchers: live?.subscriberCount.load(ordering: .relaxed) ?? 0))
        }
    }

    /// Has the store worker run `work` and answers this HTTP connection with its result
    /// (on HTTP_WRITEABLE, if the connection is still there); this thread serves others meanwhile.
    func awaitStore(_ wsi: OpaquePointer, _ what: String, _ work: @escaping @Sendable (RideStore) -> OpsAnswer) -> Int32 {
        nextSerial += 1
        awaitingRide[wsi] = (nextSerial, what)
        hub.registry.submit(.read(from: Requester(shard: index, session: 0), http: nextSerial, work: work))
        return 0
    }

    func httpAnswered(_ token: UInt64, _ status: UInt32, _ body: [UInt8]) {
        guard let (wsi, _) = awaitingRide.first(where: { $0.value.token == token }) else { return }
        awaitingRide[wsi] = nil
        deferredResponses[wsi] = (status, body)
        lws_callback_on_writable(wsi)
    }
}
