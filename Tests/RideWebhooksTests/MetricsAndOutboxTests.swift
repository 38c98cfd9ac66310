import Foundation
import RideCore
import XCTest
@testable import RideWebhooks

final class WebhookMetricsTests: XCTestCase {
    func testPrometheusLines() {
        var counts = SenderMachine.Counts()
        counts.attemptsByResult = ["delivered": 7, "timeout": 2]
        let m = WebhookMetrics(outbox: OutboxStats(pending: 3, oldestPendingCreated: 1_700_000_000_000, dead: 1), attempts: counts)
        let text = m.prometheusText(now: 1_700_000_090_500)
        let samples = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        XCTAssertEqual(samples, [
            "ridepush_webhook_pending 3",
            "ridepush_webhook_oldest_pending_age_seconds 90.5",
            "ridepush_webhook_dead 1",
            #"ridepush_webhook_attempts_total{result="delivered"} 7"#,
            #"ridepush_webhook_attempts_total{result="http_error"} 0"#,
            #"ridepush_webhook_attempts_total{result="timeout"} 2"#,
            #"ridepush_webhook_attempts_total{result="connect_error"} 0"#,
        ])
        XCTAssertTrue(text.contains("# TYPE ridepush_webhook_attempts_total counter\n"))
        let empty = WebhookMetrics(outbox: OutboxStats(), attempts: .init()).prometheusText(now: 5)
        XCTAssertTrue(empty.contains("\nridepush_webhook_oldest_pending_age_seconds 0\n"), empty)
    }

    func testDeadListing() throws {
        let event = WebhookEvent(id: "evt_9", type: .ended, rideID: "r-9", created: 1_700_000_000_000, ride: Array(#"{"id":"r-9"}"#.utf8))
        var row = OutboxRow(seq: 4, event: event, endpoint: "https://billing.example/hooks")
        row.attempts = 296
        row.lastResult = "HTTP 503"
        let listing = try JSON.parse(WebhookMetrics.deadListingJSON([row]))
        let first = try XCTUnwrap(listing["dead"]?.array?.first)
        XCTAssertEqual(first["id"]?.string, "evt_9")
        XCTAssertEqual(first["ride"]?.string, "r-9")
        XCTAssertEqual(first["endpoint"]?.string, "https://billing.example/hooks")
        XCTAssertEqual(first["attempts"]?.int, 296)
        XCTAssertEqual(first["last_result"]?.string, "HTTP 503")
        XCTAssertEqual(first["event"]?["type"]?.string, "ride.ended")
        XCTAssertEqual(String(decoding: WebhookMetrics.deadListingJSON([]), as: UTF8.self), #"{"dead":[]}"#)
    }

    func testSecretFile() throws {
        let path = NSTemporaryDirectory() + "ridepush-whsec-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let secret = String(repeating: "ab", count: 16)
        try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(try loadWebhookSecret(file: path), Array(secret.utf8))
        try Data("short\n".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try loadWebhookSecret(file: path)) { error in
            XCTAssertEqual((error as? WebhookSecretError)?.message,
                           "webhook secret file \(path) holds 5 bytes; at least 32 are needed (try: openssl rand -hex 32)")
        }
        XCTAssertThrowsError(try loadWebhookSecret(file: path + ".gone"))
    }
}

final class MemoryOutboxTests: XCTestCase {
    func event(_ ride: String, _ type: WebhookEventType, at created: UnixMillis) -> WebhookEvent {
        WebhookEvent(type: type, rideID: ride, created: created, ride: Array(#"{"id":"\#(ride)"}"#.utf8))
    }

    /// Only lane heads are handed out, soonest due first, so refused rides cannot fill the batch.
    func testPendingHandsOutLaneHeadsOnly() {
        let outbox = MemoryOutbox()
        for type in WebhookEventType.allCases { outbox.append(event("busy", type, at: 1_000), endpoints: ["http://a/", "http://b/"]) }
        outbox.append(event("quiet", .started, at: 2_000), endpoints: ["http://a/"])
        XCTAssertEqual(outbox.pending(limit: 10).map(\.seq), [1, 2, 9])
        XCTAssertEqual(outbox.pending(limit: 2).map(\.seq), [1, 2])
        outbox.record(.delivered(seq: 1, attempts: 1))
        outbox.record(.dead(seq: 2, attempts: 296, lastResult: "timeout"))
        XCTAssertEqual(outbox.pending(limit: 10).map(\.seq), [3, 4, 9])
        XCTAssertEqual(outbox.stats(), OutboxStats(pending: 7, oldestPendingCreated: 1_000, dead: 1))
        XCTAssertEqual(outbox.dead(limit: 10).map(\.lastResult), ["timeout"])
        // A head retrying later goes to the back: due lanes are read first.
        outbox.record(.retry(seq: 3, attempts: 1, at: 5_000, lastResult: "HTTP 500"))
        XCTAssertEqual(outbox.pending(limit: 10).map(\.seq), [4, 9, 3])
        XCTAssertEqual(outbox.pending(limit: 2).map(\.seq), [4, 9])
        XCTAssertEqual(outbox.pendingRows.first { $0.seq == 3 }?.attempts, 1)
    }
}
