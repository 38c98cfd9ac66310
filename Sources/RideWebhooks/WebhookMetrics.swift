import Glibc
import RideCore

/// The webhook lines of `/metrics` and the body of `GET /v1/webhooks/dead`: pure renderings of
/// what the sender and the outbox report, so the server only places them.
public struct WebhookMetrics: Sendable, Equatable {
    public var outbox: OutboxStats
    public var attempts: SenderMachine.Counts

    public init(outbox: OutboxStats, attempts: SenderMachine.Counts) {
        self.outbox = outbox
        self.attempts = attempts
    }

    /// Every result label, so a series exists (at 0) before its first attempt.
    public static let resultLabels = ["delivered", "http_error", "timeout", "connect_error"]

    /// Prometheus text format 0.0.4, in the style of the server's other metrics.
    public func prometheusText(now: UnixMillis) -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (labels, value) in samples { out += name + labels + " " + value + "\n" }
        }
        metric("ridepush_webhook_pending", "gauge", "Webhook deliveries waiting in the outbox (all endpoints).",
               [("", String(outbox.pending))])
        let age = outbox.oldestPendingCreated.map { max(0, now - $0) } ?? 0
        metric("ridepush_webhook_oldest_pending_age_seconds", "gauge", "Age of the oldest waiting delivery; 0 when none waits.",
               [("", age % 1000 == 0 ? String(age / 1000) : String(Double(age) / 1000))])
        metric("ridepush_webhook_dead", "gauge", "Deliveries given up after 24 hours of retries, kept for GET /v1/webhooks/dead.",
               [("", String(outbox.dead))])
        metric("ridepush_webhook_attempts_total", "counter", "Delivery attempts by this node since start, by result.",
               Self.resultLabels.map { ("{result=\"\($0)\"}", String(attempts.attemptsByResult[$0] ?? 0)) })
        return out
    }

    /// `{"dead":[{"id":…,"ride":…,"endpoint":…,"created":…,"attempts":…,"last_result":…,"event":{…}}]}`:
    /// `event` is the body that was being sent, as stored.
    public static func deadListingJSON(_ rows: [OutboxRow]) -> [UInt8] {
        var w = JSONWriter(reserving: rows.reduce(32) { $0 + $1.body.count + 160 })
        w.beginObject()
        w.key("dead")
        w.beginArray()
        for row in rows {
            w.beginObject()
            w.field("id", row.eventID)
            w.field("ride", row.rideID)
            w.field("endpoint", row.endpoint)
            w.field("created", row.created)
            w.field("attempts", Int64(row.attempts))
            w.key("last_result")
            if let last = row.lastResult { w.string(last) } else { w.null() }
            w.key("event")
            w.raw(row.body)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }
}

extension WebhookMetrics {
    /// `POST /v1/webhooks/test`'s answer: `{"results":[{"endpoint":…,"delivered":…,"status":…,"error":…}]}`,
    /// `status` the receiver's HTTP status (null when none came), `error` why not delivered.
    public static func pingJSON(_ results: [(endpoint: String, result: DeliveryResult)]) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("results")
        w.beginArray()
        for (endpoint, result) in results {
            w.beginObject()
            w.field("endpoint", endpoint)
            w.key("delivered")
            w.bool(result.delivered)
            w.key("status")
            if case .status(let code) = result { w.int(Int64(code)) } else { w.null() }
            w.key("error")
            if result.delivered { w.null() } else { w.string(result.summary) }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }
}

/// A secret file's bytes as-is, less trailing whitespace (`echo … > file` adds a newline); at
/// least 32 bytes, as for the JWT secret, since it is the same kind of HMAC key.
public func loadWebhookSecret(file: String) throws(WebhookSecretError) -> [UInt8] {
    var bytes = try readSecretFile(file)
    while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { bytes.removeLast() }
    guard bytes.count >= 32 else {
        throw WebhookSecretError(message: "webhook secret file \(file) holds \(bytes.count) bytes; at least 32 are needed (try: openssl rand -hex 32)")
    }
    return bytes
}

func readSecretFile(_ file: String, limit: Int = 4096) throws(WebhookSecretError) -> [UInt8] {
    guard let handle = fopen(file, "rb") else { throw WebhookSecretError(message: "cannot read \(limit == 4096 ? "webhook secret file " : "")\(file)") }
    defer { fclose(handle) }
    var bytes = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&chunk, 1, chunk.count, handle)
        if n == 0 { break }
        bytes += chunk.prefix(n)
        guard bytes.count <= limit else { throw WebhookSecretError(message: "\(limit == 4096 ? "webhook secret file " : "")\(file) is over \(limit / 1024) KiB; is it the right file?") }
    }
    return bytes
}

public struct WebhookSecretError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    public var description: String { message }
}
