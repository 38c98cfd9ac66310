import CLibWebSockets
import RideAuth
import RideCore

/// `watch_all` / `unwatch_all`, the operator's requests. Read here, after the ride.v1 codec
/// found no such type, so the codec stays the riders' protocol.
struct OpsRequest: Equatable {
    enum Kind { case watchAll, unwatchAll }
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

extension Shard {
    /// The same gate as every ride.v1 message (a token, unexpired), then ops only.
    func handleOps(_ s: Session, _ req: OpsRequest) {
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

    /// A ride's state or document with its journal (from the store) and watchers, for
    /// operators; nil when the store cannot be read (the caller answers without them).
    func withJournal(_ document: [UInt8], _ live: LiveRide) -> [UInt8]? {
        let journal = hub.registry.inspect { v -> [RideTransition]? in
            (try? v.store.ride(live.id))??.journal
        }
        guard let journal else { return nil }
        return OpsMessages.withJournal(document, journal: journal, watchers: live.watchers.load(ordering: .relaxed))
    }
}
