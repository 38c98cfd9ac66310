import Dispatch
import RideCore
import RideWebhooks

/// The operator's webhook routes, all `ops`: `GET /v1/webhooks/dead`,
/// `POST /v1/webhooks/dead/{id}/retry`, `POST /v1/webhooks/test` (docs/webhooks.md).
package enum WebhookOp: Equatable, Sendable {
    case dead
    case retry(id: String)
    case test

    /// The route for a path under `/v1/webhooks/`, or its refusal (404 unknown, 405 wrong method).
    static func route(_ method: HTTPMethod, _ path: String) -> Result<HTTPRouter.Match, HTTPRouter.Refusal>? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[1] == "v1", parts[2] == "webhooks" else { return nil }
        let op: WebhookOp, post: Bool
        switch parts.dropFirst(3).map({ $0 }) {
        case ["dead"]: (op, post) = (.dead, false)
        case ["test"]: (op, post) = (.test, true)
        case let p where p.count == 3 && p[0] == "dead" && p[2] == "retry": (op, post) = (.retry(id: p[1]), true)
        default: return .failure(HTTPRouter.Refusal(answer: .error(404, "not_found", "no such route: \(path)"), close: false))
        }
        guard post ? method == .post : (method == .get || method == .head) else {
            let allow = post ? "POST" : "GET, HEAD"
            return .failure(HTTPRouter.Refusal(answer: .error(405, "method_not_allowed", "\(path) takes \(allow) only"), allow: allow))
        }
        let what = switch op {
        case .dead: "the dead-letter listing"
        case .retry: "retrying a dead webhook event"
        case .test: "a test webhook delivery"
        }
        return .success(HTTPRouter.Match(endpoint: .webhooks(op), access: .ops(what: what)))
    }
}

/// Answers the webhook routes off the service threads: outbox reads and writes run on a queue
/// of their own, a test ping on the outbound client's thread; the answer comes back through
/// `then` (the adapter posts it to the connection's thread, like a store read's).
package final class WebhookDesk: Sendable {
    package static let deadListingLimit = 1000
    let outbox: WebhookOutbox
    let sender: WebhookSender
    let roster: WebhookRoster
    /// `--webhook-health-age` in ms.
    let healthAge: Int64
    let clock: RideClock
    private let queue = DispatchQueue(label: "webhook-reads")

    package init(outbox: WebhookOutbox, sender: WebhookSender, roster: WebhookRoster, healthAge: Int64, clock: RideClock) {
        self.outbox = outbox
        self.sender = sender
        self.roster = roster
        self.healthAge = healthAge
        self.clock = clock
    }

    package func answer(_ op: WebhookOp, then: @escaping @Sendable (HTTPAnswer) -> Void) {
        switch op {
        case .dead:
            queue.async { [outbox] in
                then(HTTPAnswer(status: 200, body: WebhookMetrics.deadListingJSON(outbox.dead(limit: Self.deadListingLimit))))
            }
        case .retry(let id):
            queue.async { [self] in
                guard let n = outbox.requeueDead(eventID: id, now: clock.now()) else {
                    return then(.error(503, "unavailable", "the webhook outbox could not be written; try again"))
                }
                guard n > 0 else { return then(.error(404, "not_found", "no dead webhook event with that id")) }
                sender.poke()
                var w = JSONWriter()
                w.beginObject()
                w.field("id", id)
                w.field("requeued", Int64(n))
                w.endObject()
                then(HTTPAnswer(status: 200, body: w.bytes))
            }
        case .test:
            sender.ping(endpoints: roster.endpoints.map(\.url)) { results in
                then(HTTPAnswer(status: 200, body: WebhookMetrics.pingJSON(results)))
            }
        }
    }

    /// `/healthz`'s word for the sender: `degraded` while the oldest delivery still owed (to
    /// any endpoint, as of the sender's last outbox read) is older than `--webhook-health-age`.
    package func health(now: UnixMillis) -> (word: String, oldestPendingAge: Int64) {
        let age = sender.metrics.outbox.oldestPendingCreated.map { max(0, now - $0) } ?? 0
        return (age > healthAge ? "degraded" : "ok", age)
    }
}
