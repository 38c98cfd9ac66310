import Foundation
import RideCore
import RideStore
@testable import RideStoreSQLite
import RideWebhooks
import XCTest

/// The sender's loop over a real store's outbox (an SQLite file, its own connection) and a real
/// receiver checking every signature: what the server wiring will run.
final class StoreOutboxSenderTests: XCTestCase {
    var dir: URL!
    var path: String { dir.appendingPathComponent("rides.db").path }
    let t = SystemClock().now()

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func event(_ ride: String, _ type: WebhookEventType, at: UnixMillis, to endpoint: String) -> [OutboxEvent] {
        WebhookEvent(type: type, rideID: ride, created: at, ride: Array("{\"id\":\"\(ride)\"}".utf8)).outboxEvents(endpoints: [endpoint])
    }

    /// Ride a's four transitions in four groups, ride b's two among them.
    func commitRides(_ store: SQLiteStore, to endpoint: String) throws {
        func create(_ id: String, _ at: UnixMillis) -> StoreWrite {
            .create(NewRide(id: id, planID: "p", owner: nil, limit: nil, startedAt: at, outbox: event(id, .started, at: at, to: endpoint)), reply: nil)
        }
        func append(_ id: String, _ seq: Int64, _ tr: RideTransition, _ type: WebhookEventType) -> StoreWrite {
            .append(JournalEntry(ride: id, seq: seq, transition: tr, outbox: event(id, type, at: tr.at, to: endpoint)), reply: nil)
        }
        XCTAssertEqual(try store.commit([create("a", t), create("b", t + 1)]), [.written, .written])
        XCTAssertEqual(try store.commit([append("a", 2, .pause(at: t + 10), .paused)]), [.written])
        XCTAssertEqual(try store.commit([append("a", 3, .resume(at: t + 20), .resumed),
                                         append("b", 2, .end(at: t + 21, reason: .rider, metres: 1), .ended)]), [.written, .written])
        XCTAssertEqual(try store.commit([append("a", 4, .end(at: t + 30, reason: .rider, metres: 9), .ended)]), [.written])
    }

    func sender(_ outbox: WebhookOutbox) -> WebhookSender {
        var settings = WebhookSender.Settings(secret: Array("s3cret".utf8))
        settings.schedule = RetrySchedule()
        settings.pollInterval = 100
        return WebhookSender(settings: settings, outbox: outbox)
    }

    func testEveryEventIsDeliveredSignedAndInCommitOrderPerRide() throws {
        let receiver = try PythonReceiver(secret: "s3cret")
        defer { receiver.stop() }
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        try commitRides(store, to: "http://127.0.0.1:\(receiver.port)/ok")
        let outbox = try SQLiteOutbox(path: path)
        defer { outbox.close() }
        XCTAssertEqual(outbox.stats().pending, 6)
        let s = sender(outbox)
        s.start()
        waitUntil(timeout: 15, "every outbox row delivered") { outbox.stats().pending == 0 }
        s.stop()
        XCTAssertEqual(outbox.stats(), OutboxStats(pending: 0, oldestPendingCreated: nil, dead: 0))
        let requests = receiver.requests(atLeast: 6)
        XCTAssertEqual(requests.count, 6)
        XCTAssertTrue(requests.allSatisfy { $0["verified"] as? Bool == true }, "\(requests)")
        func types(_ ride: String) -> [String] {
            requests.compactMap { r -> String? in
                guard let body = (r["body"] as? String).flatMap({ try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }),
                      (body["ride"] as? [String: Any])?["id"] as? String == ride else { return nil }
                return body["type"] as? String
            }
        }
        XCTAssertEqual(types("a"), ["ride.started", "ride.paused", "ride.resumed", "ride.ended"])
        XCTAssertEqual(types("b"), ["ride.started", "ride.ended"])
        XCTAssertNil(outbox.lastError)
    }

    func testRefusedDeliveriesAreRetriedAndStayPendingAcrossAReopen() throws {
        let receiver = try PythonReceiver(secret: "s3cret")
        defer { receiver.stop() }
        do {
            let store = try SQLiteStore(path: path)
            try commitRides(store, to: "http://127.0.0.1:\(receiver.port)/status/503")
            let outbox = try SQLiteOutbox(path: path)
            let s = sender(outbox)
            s.start()
            waitUntil(timeout: 10, "a row attempted twice") { !outbox.pending(limit: 10).allSatisfy({ $0.attempts < 2 }) }
            s.stop()
            outbox.close()
            store.close()
        }
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        let outbox = try SQLiteOutbox(path: path)
        defer { outbox.close() }
        let rows = outbox.allPending()
        XCTAssertEqual(rows.count, 6, "nothing refused is lost")
        // Only heads were tried, a lane's later rows never before its head.
        let tried = rows.filter { $0.attempts > 0 }
        XCTAssertEqual(Set(tried.map(\.rideID)), ["a", "b"])
        XCTAssertTrue(tried.allSatisfy { t in t.eventID == rows.first { $0.rideID == t.rideID }!.eventID })
        XCTAssertTrue(tried.contains { $0.attempts >= 2 })
        XCTAssertTrue(tried.allSatisfy { $0.lastResult == "HTTP 503" && $0.nextAttemptAt > $0.created })
        XCTAssertGreaterThanOrEqual(receiver.requests(atLeast: 3).count, 3)
    }
}
