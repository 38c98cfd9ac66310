import RideCore
import RideStore

/// One delivery of one event to one endpoint, as the outbox table holds it. The row is written
/// in the transaction that commits the transition (so a crash cannot keep the transition and
/// lose the event), and updated by the sender after every attempt (so a restart resumes with
/// the same attempt count and schedule).
public struct OutboxRow: Sendable, Equatable {
    /// Outbox order: a store sequence assigned at insert, so within one ride it is commit order.
    public let seq: Int64
    public let eventID: String
    public let rideID: String
    /// The `--webhook` URL this row goes to; each endpoint gets its own row and its own order.
    public let endpoint: String
    public let created: UnixMillis
    /// `WebhookEvent.body()`: sent byte for byte on every attempt.
    public let body: [UInt8]
    public var attempts: Int
    /// Not sent before this instant (the creation time for a new row).
    public var nextAttemptAt: UnixMillis
    public var lastResult: String?

    public init(seq: Int64, event: WebhookEvent, endpoint: String) {
        self.init(seq: seq, eventID: event.id, rideID: event.rideID, endpoint: endpoint, created: event.created,
                  body: event.body(), attempts: 0, nextAttemptAt: event.created, lastResult: nil)
    }

    /// A new row for an event the store wrote with its transition.
    public init(seq: Int64, event: OutboxEvent) {
        self.init(seq: seq, eventID: event.eventID, rideID: event.rideID, endpoint: event.endpoint, created: event.created,
                  body: event.body, attempts: 0, nextAttemptAt: event.created, lastResult: nil)
    }

    public init(seq: Int64, eventID: String, rideID: String, endpoint: String, created: UnixMillis, body: [UInt8],
                attempts: Int, nextAttemptAt: UnixMillis, lastResult: String?) {
        self.seq = seq
        self.eventID = eventID
        self.rideID = rideID
        self.endpoint = endpoint
        self.created = created
        self.body = body
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.lastResult = lastResult
    }
}

/// How one attempt ended.
public enum DeliveryResult: Sendable, Equatable {
    /// The receiver answered with this HTTP status.
    case status(Int)
    /// No complete status line within the deadline (5 s).
    case timeout
    /// Could not connect, or the connection failed: the reason.
    case failed(String)

    public var delivered: Bool {
        if case .status(let code) = self { return (200...299).contains(code) }
        return false
    }

    /// For the outbox's `last_result` and the dead listing.
    public var summary: String {
        switch self {
        case .status(let code): "HTTP \(code)"
        case .timeout: "timeout"
        case .failed(let reason): reason
        }
    }

    /// The label `/metrics` counts deliveries by.
    public var metricLabel: String {
        switch self {
        case .status(let code) where (200...299).contains(code): "delivered"
        case .status: "http_error"
        case .timeout: "timeout"
        case .failed: "connect_error"
        }
    }
}

/// What the store must record after an attempt: the sender's decisions, applied to the row
/// with `seq` (SQLite: one UPDATE or DELETE; PostgreSQL: the same, under the row's lease).
public enum OutboxUpdate: Sendable, Equatable {
    /// Received (2xx): the row is done (deleted, or marked delivered for the log).
    case delivered(seq: Int64, attempts: Int)
    case retry(seq: Int64, attempts: Int, at: UnixMillis, lastResult: String)
    /// Past the retry window: kept for `GET /v1/webhooks/dead`, never sent again.
    case dead(seq: Int64, attempts: Int, lastResult: String)

    public var seq: Int64 {
        switch self {
        case .delivered(let seq, _), .retry(let seq, _, _, _), .dead(let seq, _, _): seq
        }
    }
}

extension OutboxUpdate {
    /// Attempts made so far, for the delivery log.
    public var attemptCount: Int {
        switch self {
        case .delivered(_, let n), .retry(_, let n, _, _), .dead(_, let n, _): n
        }
    }

    /// What happens next, in words, for the delivery log.
    public func outcome(at now: UnixMillis) -> String {
        switch self {
        case .delivered: "delivered"
        case .retry(_, _, let at, _): "retrying in \(max(0, at - now)) ms"
        case .dead: "given up (dead)"
        }
    }
}
