import Dispatch
import RideCore
import RideProtocol
import RideWebhooks

/// The operator's webhook routes, all `ops`: `GET /v1/webhooks/dead`,
/// `POST /v1/webhooks/dead/{id}/retry`, `POST /v1/webhooks/test`, `GET /v1/events` (docs/webhooks.md).
package enum WebhookOp: Equatable, Sendable {
    case dead
    case retry(id: String)
    case test
    /// `GET /v1/events?after=evt_…&ride=…&limit=…`
    case events(after: String?, ride: String?, limit: Int)

    package static let maxEventsLimit = 500

    /// The route for `/v1/events` or a path under `/v1/webhooks/`, or its refusal (400 a bad
    /// query, 404 unknown, 405 wrong method).
    static func route(_ method: HTTPMethod, _ path: String, query: [String]) -> Result<HTTPRouter.Match, HTTPRouter.Refusal>? {
        if path == "/v1/events" {
            guard method == .get || method == .head else {
                return .failure(HTTPRouter.Refusal(answer: .error(405, "method_not_allowed", "\(path) takes GET, HEAD only"), allow: "GET, HEAD"))
            }
            return eventsQuery(query).map { HTTPRouter.Match(endpoint: .webhooks($0), access: .ops(what: "the event log")) }
                .mapError { HTTPRouter.Refusal(answer: .error(400, "bad_request", $0.message), close: false) }
        }
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
        case .events: "the event log"
        }
        return .success(HTTPRouter.Match(endpoint: .webhooks(op), access: .ops(what: what)))
    }

    struct QueryProblem: Error { let message: String }

    /// `after` (an event id), `ride`, `limit` (1-500, default 100) and `token`; anything else,
    /// or a name twice, is refused.
    static func eventsQuery(_ query: [String]) -> Result<WebhookOp, QueryProblem> {
        var after: String?, ride: String?, limit: Int?, seen = Set<String>()
        for fragment in query {
            let pair = fragment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(pair[0]), value = pair.count == 2 ? String(pair[1]) : ""
            guard seen.insert(name).inserted else { return .failure(QueryProblem(message: "\"\(name)\" is given twice")) }
            switch name {
            case "after":
                guard !value.isEmpty, value.utf8.count <= 64 else { return .failure(QueryProblem(message: "\"after\" is an event id (evt_…)")) }
                after = value
            case "ride":
                guard ClientCodec.isValidRideID(value) else {
                    return .failure(QueryProblem(message: "\"ride\" is 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . :"))
                }
                ride = value
            case "limit":
                guard let n = Int(value), (1...maxEventsLimit).contains(n) else {
                    return .failure(QueryProblem(message: "\"limit\" is a whole number from 1 to \(maxEventsLimit)"))
                }
                limit = n
            case "token": continue
            default: return .failure(QueryProblem(message: "unknown parameter \"\(name)\" (after, ride, limit)"))
            }
        }
        return .success(.events(after: after, ride: ride, limit: limit ?? 100))
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
        case .events(let after, let ride, let limit):
            queue.async { [outbox] in
                switch outbox.events(after: after, ride: ride, limit: limit + 1) {
                case .events(let bodies): then(HTTPAnswer(status: 200, body: Self.eventsJSON(bodies, limit: limit)))
                case .unknownCursor: then(.error(404, "not_found", "\"after\" names no event kept (events are kept 30 days)"))
                case .unavailable: then(.error(503, "unavailable", "the event log could not be read; try again"))
                }
            }
        case .test:
            sender.ping(endpoints: roster.endpoints.map(\.url)) { results in
                then(HTTPAnswer(status: 200, body: WebhookMetrics.pingJSON(results)))
            }
        }
    }

    /// `{"events":[…],"has_more":…}`: the bodies as POSTed, oldest first; `bodies` holds one
    /// more than `limit` when there is more.
    static func eventsJSON(_ bodies: [[UInt8]], limit: Int) -> [UInt8] {
        var w = JSONWriter(reserving: bodies.reduce(32) { $0 + $1.count + 1 })
        w.beginObject()
        w.key("events")
        w.beginArray()
        for body in bodies.prefix(limit) { w.raw(body) }
        w.endArray()
        w.key("has_more")
        w.bool(bodies.count > limit)
        w.endObject()
        return w.bytes
    }

    /// `/healthz`'s word for the sender: `degraded` while the oldest delivery still owed (to
    /// any endpoint, as of the sender's last outbox read) is older than `--webhook-health-age`.
    package func health(now: UnixMillis) -> (word: String, oldestPendingAge: Int64) {
        let age = sender.metrics.outbox.oldestPendingCreated.map { max(0, now - $0) } ?? 0
        return (age > healthAge ? "degraded" : "ok", age)
    }
}
