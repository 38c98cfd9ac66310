import RideAuth
import RideCore
import RideProtocol
import RideStore

/// What a store read for an operator view answers: an HTTP status (ignored over the socket)
/// and the body or message.
package struct OpsAnswer: Sendable {
    let status: UInt32
    let body: [UInt8]

    package init(status: UInt32, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

package extension Connection {
    /// `watch_all` / `unwatch_all`: the same gate as every ride.v1 message (a token,
    /// unexpired), then ops tokens only. Waits its turn behind this connection's requests at
    /// the store worker, like a `get`, so the snapshot follows the replies asked for before it.
    mutating func operatorRequest(_ req: OpsRequest, _ ctx: some ConnectionContext, from: Requester, inTurn: Bool,
                                  _ out: inout [ConnectionAction]) {
        if !inTurn, inFlight > 0 { return submit(.lookup(nil, from: from, then: .ops(req)), &out) }
        if let e = authorization(ctx, id: req.id) { return refuse(e, ctx, &out) }
        let type = req.kind == .watchAll ? "watch_all" : "unwatch_all"
        guard ctx.verifier == nil || access?.claims.ops == true else {
            ctx.count(type, ErrorCode.forbidden.rawValue)
            return out.append(.send(ServerMessages.error(ProtocolError(.forbidden, "\(type) needs an operator (ops) token", id: req.id), prefix: pre)))
        }
        switch req.kind {
        case .watchAll:
            // A snapshot of a big fleet is megabytes: counted like a control message.
            guard withinRate(ctx) else {
                ctx.rateLimited()
                return out.append(.send(ServerMessages.error(ProtocolError(.rateLimited, "more than \(ctx.config.controlRate) requests per second; slow down", id: req.id), prefix: pre)))
            }
            ctx.count(type, "ok")
            watchingAll = true
            out.append(.watchAll(id: req.id))
        case .unwatchAll:
            ctx.count(type, "ok")
            watchingAll = false
            out.append(.unwatchAll(id: req.id))
        }
    }
}

/// Store reads for the operator views, run by the store worker with the store and the
/// registry (StoreJob.read).
package enum OpsReads {
    /// `get` by an operator: the state with the journal and the watchers.
    static func journalState(_ live: LiveRide, id: String?, pre: Int) -> @Sendable (RideStore, RideRegistry) -> OpsAnswer {
        { store, registry in
            registry.metrics.add(registry.metrics.storeRideReads)
            let journal = (try? store.ride(live.id))??.journal
            return OpsAnswer(status: 200, body: OpsMessages.journalState(ride: registry.snapshot(live), plan: live.plan, at: registry.clock.now(), id: id,
                                                                         journal: journal, watchers: live.subscriberCount.load(ordering: .relaxed), prefix: pre))
        }
    }

    /// `GET /rides/{id}` for an operator (or with `?journal=1`): the document with the
    /// journal and the watchers; `claims` (auth on) must allow reading the ride.
    package static func rideDocument(_ id: String, claims: TokenClaims?) -> @Sendable (RideStore, RideRegistry) -> OpsAnswer {
        { store, registry in
            let stored: StoredRide?
            registry.metrics.add(registry.metrics.storeRideReads)
            do throws(StoreError) { stored = try store.ride(id) } catch {
                return OpsAnswer(status: 503, body: OpsMessages.error("unavailable", "ride storage is unavailable: \(error.message)"))
            }
            guard let stored else { return OpsAnswer(status: 404, body: OpsMessages.error("ride_not_found", "no ride \"\(id)\"")) }
            if let claims, !Access(claims).mayWatch(rideID: id, rideOwner: stored.owner) {
                return OpsAnswer(status: 403, body: OpsMessages.error("forbidden", "this token may not read ride \"\(id)\""))
            }
            let live = registry.find(id)
            let plan = live?.plan ?? registry.plans[stored.planID] ?? .standard
            // How many devices the ride's pushes go to, for operators only: the tokens are the
            // riders' (the count is what an operator needs to see that registration worked).
            var pushTargets: Int?
            if claims?.ops ?? true, let targets = store as? PushTargetStore { pushTargets = (try? targets.pushTargets(ride: id))?.count }
            return OpsAnswer(status: 200, body: OpsMessages.documentWithJournal(ride: stored.ride, plan: plan, at: registry.clock.now(), journal: stored.journal,
                                                                                watchers: live?.subscriberCount.load(ordering: .relaxed) ?? 0,
                                                                                pushTargets: pushTargets))
        }
    }
}
