import Foundation
import XCTest
import RideCore
import RideWebhooks
@testable import RideStore
@testable import RideStorePostgres

/// Two nodes' senders over one PostgreSQL outbox and a real receiver that checks every
/// signature (Receiver.swift, shared with RideWebhooksTests).
final class PostgresSenderTests: XCTestCase {
    var settings: PostgresSettings!
    var store: PostgresStore!
    var receiver: PythonReceiver!
    let t = SystemClock().now()

    override func setUpWithError() throws {
        let pg = try TestPostgres.shared()
        settings = pg.settings(database: try pg.createDatabase())
        store = try PostgresStore(settings)
        receiver = try PythonReceiver(secret: "s3cret")
    }

    override func tearDownWithError() throws {
        receiver?.stop()
        store?.close()
    }

    /// `rides` rides with four transitions each, a group per transition step.
    func commitRides(_ rides: Int, path: String = "/ok") throws {
        let endpoint = "http://127.0.0.1:\(receiver.port)\(path)"
        func events(_ id: String, _ type: WebhookEventType, _ at: UnixMillis) -> [OutboxEvent] {
            WebhookEvent(type: type, rideID: id, created: at, ride: Array("{\"id\":\"\(id)\"}".utf8)).outboxEvents(endpoints: [endpoint])
        }
        let ids = (0..<rides).map { "r\($0)" }
        _ = try store.commit(ids.map { .create(NewRide(id: $0, planID: "p", owner: nil, limit: nil, startedAt: t, outbox: events($0, .started, t)), reply: nil) })
        for (seq, tr, type) in [(Int64(2), RideTransition.pause(at: t + 1), WebhookEventType.paused), (3, .resume(at: t + 2), .resumed),
                                (4, .end(at: t + 3, reason: .rider, metres: 1), .ended)] {
            let results = try store.commit(ids.map { .append(JournalEntry(ride: $0, seq: seq, transition: tr, outbox: events($0, type, tr.at)), reply: nil) })
            XCTAssertTrue(results.allSatisfy { $0 == .written })
        }
    }

    func sender(_ outbox: PostgresOutbox, log: Locked<[(String, Int64, UnixMillis)]>, node: String) -> WebhookSender {
        var s = WebhookSender.Settings(secret: Array("s3cret".utf8))
        s.pollInterval = 100
        return WebhookSender(settings: s, outbox: outbox) { attempt in
            log.withLock { $0.append((node, attempt.row.seq, attempt.at)) }
        }
    }

    func waitUntilDelivered(_ outbox: PostgresOutbox, seconds: Double) {
        waitUntil(timeout: seconds, "every outbox row delivered") { outbox.stats().pending == 0 }
    }

    /// The bodies' types per ride, in the order the receiver got them.
    func typesByRide(_ requests: [[String: Any]]) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for r in requests {
            guard let body = (r["body"] as? String).flatMap({ try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }),
                  let ride = (body["ride"] as? [String: Any])?["id"] as? String, let type = body["type"] as? String else { continue }
            out[ride, default: []].append(type)
        }
        return out
    }

    func testTwoNodesDeliverEveryEventOnceInCommitOrderPerRide() throws {
        try commitRides(10)
        let log = Locked<[(String, Int64, UnixMillis)]>([])
        let a = PostgresOutbox(settings, owner: "node-a")
        let b = PostgresOutbox(settings, owner: "node-b")
        let senders = [sender(a, log: log, node: "a"), sender(b, log: log, node: "b")]
        senders.forEach { $0.start() }
        waitUntilDelivered(a, seconds: 20)
        senders.forEach { $0.stop() }
        a.close()
        b.close()
        let requests = receiver.requests(atLeast: 40)
        XCTAssertEqual(requests.count, 40)
        XCTAssertTrue(requests.allSatisfy { $0["verified"] as? Bool == true })
        XCTAssertEqual(Set(requests.compactMap { $0["event"] as? String }).count, 40, "an event delivered twice")
        let order = ["ride.started", "ride.paused", "ride.resumed", "ride.ended"]
        let types = typesByRide(requests)
        XCTAssertEqual(types.count, 10)
        for (ride, seen) in types { XCTAssertEqual(seen, order, ride) }
        let attempts = log.withLock { $0 }
        XCTAssertEqual(attempts.count, 40)
        XCTAssertEqual(Set(attempts.map(\.1)).count, 40, "a row attempted by both nodes")
        print("two nodes: a delivered \(attempts.filter { $0.0 == "a" }.count), b \(attempts.filter { $0.0 == "b" }.count)")
    }

    func testRefusedHeadsAreRetriedByEitherNodeAndEachAttemptIsRecordedOnce() throws {
        try commitRides(3, path: "/status/503")
        let log = Locked<[(String, Int64, UnixMillis)]>([])
        let a = PostgresOutbox(settings, owner: "node-a")
        let b = PostgresOutbox(settings, owner: "node-b")
        let senders = [sender(a, log: log, node: "a"), sender(b, log: log, node: "b")]
        senders.forEach { $0.start() }
        // The first attempts at once, the second ones a second later (the schedule's first wait).
        waitUntil(timeout: 10, "three rows attempted twice") { a.allPending().filter({ $0.attempts >= 2 }).count >= 3 }
        senders.forEach { $0.stop() }
        let rows = a.allPending()
        a.close()
        b.close()
        XCTAssertEqual(rows.count, 12, "nothing refused is lost")
        let requests = receiver.requests(atLeast: 6)
        // Only heads are sent while they fail: every request is a start.
        XCTAssertEqual(Set(typesByRide(requests).values.flatMap { $0 }), ["ride.started"])
        // Every send was recorded under a lease, once: the rows' attempts add up to the requests.
        var sent: [String: Int] = [:]
        for r in requests { if let e = r["event"] as? String { sent[e, default: 0] += 1 } }
        for row in rows where row.attempts > 0 {
            XCTAssertEqual(sent[row.eventID], row.attempts, row.rideID)
            XCTAssertEqual(row.lastResult, "HTTP 503")
        }
        XCTAssertEqual(rows.filter { $0.attempts >= 2 }.count, 3)
        XCTAssertEqual(log.withLock { $0.count }, requests.count)
    }

    func testADeadNodesLeasesPassToTheOtherNodeOnceExpired() throws {
        try commitRides(3)
        // Node a claims the heads and dies without sending (no sender, no renewal).
        let dead = PostgresOutbox(settings, owner: "node-a", leaseMillis: 1_000)
        let claimedAt = SystemClock().now()
        XCTAssertEqual(dead.pending(limit: 100).count, 3)
        // Not `close()`, which would give the leases up: a dead node never says goodbye.
        let log = Locked<[(String, Int64, UnixMillis)]>([])
        let b = PostgresOutbox(settings, owner: "node-b")
        let s = sender(b, log: log, node: "b")
        s.start()
        waitUntilDelivered(b, seconds: 15)
        s.stop()
        b.close()
        let requests = receiver.requests(atLeast: 12)
        XCTAssertEqual(requests.count, 12)
        for (ride, seen) in typesByRide(requests) { XCTAssertEqual(seen, ["ride.started", "ride.paused", "ride.resumed", "ride.ended"], ride) }
        // Not one of a's heads went out before its lease ran out.
        let attempts = log.withLock { $0 }
        XCTAssertEqual(attempts.count, 12)
        XCTAssertGreaterThanOrEqual(attempts.map(\.2).min() ?? 0, claimedAt + 1_000)
        withExtendedLifetime(dead) {}
    }
}
