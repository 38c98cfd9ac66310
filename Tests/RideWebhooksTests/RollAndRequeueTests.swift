import Foundation
import RideCore
import RideStore
@testable import RideStoreSQLite
@testable import RideWebhooks
import XCTest

/// Secrets rolled with overlap (every key signs), per-endpoint event types, and dead events
/// put back in the outbox (`POST /v1/webhooks/dead/{id}/retry`).
final class RollAndRequeueTests: XCTestCase {
    let old = Array(String(repeating: "o", count: 32).utf8), new = Array(String(repeating: "n", count: 40).utf8)

    func testEveryKeySignsSoEitherVerifies() throws {
        let body = Array(#"{"id":"evt_1"}"#.utf8)
        let header = WebhookSignature.header(secrets: [new, old], timestamp: 1_764_430_123, body: body)
        XCTAssertEqual(header.components(separatedBy: ",v1=").count, 3, header)
        XCTAssertTrue(header.hasPrefix("t=1764430123,v1=" + hex(WebhookSignature.mac(secret: new, timestamp: 1_764_430_123, body: body))))
        for key in [old, new] {
            XCTAssertEqual(try WebhookSignature.verify(header: header, body: body, secret: key, now: 1_764_430_123), 1_764_430_123)
        }
        XCTAssertThrowsError(try WebhookSignature.verify(header: header, body: body, secret: Array(repeating: 1, count: 32), now: 1_764_430_123))
        XCTAssertEqual(WebhookSignature.header(secret: old, timestamp: 5, body: body), WebhookSignature.header(secrets: [old], timestamp: 5, body: body))
    }

    func write(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "ridepush-whsec-\(UUID().uuidString)"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testASecretFileIsOneKeyPerLine() throws {
        let path = try write(String(decoding: new, as: UTF8.self) + "\r\n\n" + String(decoding: old, as: UTF8.self) + "  \n")
        XCTAssertEqual(try loadWebhookSecrets(file: path), [new, old])
        let short = try write(String(decoding: new, as: UTF8.self) + "\nshort\n")
        XCTAssertThrowsError(try loadWebhookSecrets(file: short)) { error in
            XCTAssertEqual((error as? WebhookSecretError)?.message,
                           "webhook secret file \(short): line 2 holds 5 bytes; at least 32 are needed (try: openssl rand -hex 32)")
        }
        XCTAssertThrowsError(try loadWebhookSecrets(file: try write("\n\n")))
    }

    func testEndpointsTheirTypesAndKeys() throws {
        let a = try WebhookEndpoint.parse("http://a.example/hooks#ride.ended,ride.started")
        XCTAssertEqual(a.url, "http://a.example/hooks")
        XCTAssertEqual(a.types, ["ride.ended", "ride.started"])
        XCTAssertTrue(a.wants("ride.ended"))
        XCTAssertFalse(a.wants("ride.paused"))
        XCTAssertTrue(try WebhookEndpoint.parse("http://b.example/").wants("ride.paused"))
        XCTAssertThrowsError(try WebhookEndpoint.parse("http://a.example/#ride.flew"))
        XCTAssertThrowsError(try WebhookEndpoint.parse("http://a.example/#"))
        let both = try write(String(decoding: new, as: UTF8.self) + "\n" + String(decoding: old, as: UTF8.self) + "\n")
        let oldOnly = try write(String(decoding: old, as: UTF8.self) + "\n")
        let shared = try WebhookRoster.configure(webhooks: ["http://a.example/", "http://b.example/#ride.ended"], secretFiles: [both])
        XCTAssertEqual(shared.map(\.secrets), [[new, old], [new, old]])
        XCTAssertThrowsError(try WebhookRoster.configure(webhooks: ["http://a.example/", "http://b.example/"], secretFiles: [both, oldOnly])) {
            XCTAssertTrue(($0 as? WebhookSecretError)?.message.contains("two endpoints share a key") == true)
        }
        // Replaced (SIGHUP): a dropped endpoint keeps its keys for rows it is still owed.
        let roster = WebhookRoster(shared)
        roster.replace([WebhookEndpoint(url: "http://a.example/", secrets: [new])])
        XCTAssertEqual(roster.secrets(for: "http://a.example/"), [new])
        XCTAssertEqual(roster.secrets(for: "http://b.example/"), [new, old])
        XCTAssertNil(roster.secrets(for: "http://c.example/"))
        XCTAssertEqual(WebhookSender.Settings(roster: roster).secrets(for: "http://a.example/"), [new])
    }

    func testAnEndpointsFileAddsEndpointsWithTheirOwnKeysOrTheSharedOne() throws {
        let shared = try write(String(decoding: old, as: UTF8.self) + "\n")
        let own = try write(String(decoding: new, as: UTF8.self) + "\n")
        let listing = try write("# comment\n\nhttp://b.example/#ride.ended \(own)\r\nhttp://c.example/\n")
        let all = try WebhookRoster.configure(webhooks: ["http://a.example/"], secretFiles: [shared], endpointsFile: listing)
        XCTAssertEqual(all, [WebhookEndpoint(url: "http://a.example/", secrets: [old]),
                             WebhookEndpoint(url: "http://b.example/", types: ["ride.ended"], secrets: [new]),
                             WebhookEndpoint(url: "http://c.example/", secrets: [old])])
        XCTAssertEqual(try WebhookRoster.configure(webhooks: [], secretFiles: [shared], endpointsFile: listing).map(\.url),
                       ["http://b.example/", "http://c.example/"])
        XCTAssertThrowsError(try WebhookRoster.configure(webhooks: [], secretFiles: [], endpointsFile: listing), "c has no key")
        XCTAssertThrowsError(try WebhookRoster.configure(webhooks: [], secretFiles: [shared], endpointsFile: try write("# none\n")))
        XCTAssertThrowsError(try WebhookRoster.configure(webhooks: [], secretFiles: [shared], endpointsFile: try write("http://a/ \(own) extra\n")))
    }

    func event(_ ride: String, _ type: WebhookEventType, at: UnixMillis) -> WebhookEvent {
        WebhookEvent(type: type, rideID: ride, created: at, ride: Array("{\"id\":\"\(ride)\"}".utf8))
    }

    func testADeadEventGoesBackToTheEndOfItsLanesInMemory() {
        let outbox = MemoryOutbox()
        let dead = event("r", .started, at: 1_000)
        outbox.append(dead, endpoints: ["http://a/", "http://b/"])
        outbox.append(event("r", .ended, at: 2_000), endpoints: ["http://a/"])
        outbox.record(.dead(seq: 1, attempts: 296, lastResult: "timeout"))
        outbox.record(.dead(seq: 2, attempts: 296, lastResult: "HTTP 503"))
        XCTAssertEqual(outbox.requeueDead(eventID: "evt_nope", now: 9_000), 0)
        XCTAssertEqual(outbox.requeueDead(eventID: dead.id, now: 9_000), 2)
        XCTAssertTrue(outbox.deadRows.isEmpty)
        let rows = outbox.pendingRows
        XCTAssertEqual(rows.map(\.seq), [3, 4, 5])
        XCTAssertEqual(rows.suffix(2).map(\.endpoint), ["http://a/", "http://b/"])
        XCTAssertEqual(rows.suffix(2).map(\.attempts), [0, 0])
        XCTAssertEqual(rows.suffix(2).map(\.nextAttemptAt), [9_000, 9_000])
        XCTAssertEqual(rows.last?.body, dead.body())
        XCTAssertEqual(rows.last?.created, 1_000, "the event keeps its creation time")
        XCTAssertEqual(outbox.requeueDead(eventID: dead.id, now: 9_500), 0, "once only")
    }

    func testADeadEventGoesBackInSQLite() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("requeue-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rides.db").path
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        let started = event("r", .started, at: 1_000)
        XCTAssertEqual(try store.commit([.create(NewRide(id: "r", planID: "p", owner: nil, limit: nil, startedAt: 1_000,
                                                         outbox: started.outboxEvents(endpoints: ["http://a/"])), reply: nil)]), [.written])
        let outbox = try SQLiteOutbox(path: path)
        defer { outbox.close() }
        outbox.record(.dead(seq: 1, attempts: 296, lastResult: "timeout"))
        XCTAssertEqual(outbox.stats(), OutboxStats(pending: 0, oldestPendingCreated: nil, dead: 1))
        XCTAssertEqual(outbox.requeueDead(eventID: started.id, now: 7_000), 1)
        XCTAssertEqual(outbox.stats(), OutboxStats(pending: 1, oldestPendingCreated: 1_000, dead: 0))
        let row = try XCTUnwrap(outbox.pending(limit: 10).first)
        XCTAssertEqual([row.seq, Int64(row.attempts), row.nextAttemptAt], [2, 0, 7_000])
        XCTAssertEqual(row.body, started.body())
        XCTAssertEqual(outbox.requeueDead(eventID: started.id, now: 8_000), 0)
    }

    func testTheEventLogKeepsEachEventOnceInCommitOrderPagedAndPurgedByAge() throws {
        let memory = MemoryOutbox()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("rides.db").path
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        let a1 = event("a", .started, at: 1_000), b1 = event("b", .started, at: 2_000), a2 = event("a", .ended, at: 3_000)
        let endpoints = ["http://x/", "http://y/"]
        memory.append(a1.outboxEvents(endpoints: endpoints) + b1.outboxEvents(endpoints: endpoints) + a2.outboxEvents(endpoints: endpoints))
        XCTAssertEqual(try store.commit([
            .create(NewRide(id: "a", planID: "p", owner: nil, limit: nil, startedAt: 1_000, outbox: a1.outboxEvents(endpoints: endpoints)), reply: nil),
            .create(NewRide(id: "b", planID: "p", owner: nil, limit: nil, startedAt: 2_000, outbox: b1.outboxEvents(endpoints: endpoints)), reply: nil),
        ]), [.written, .written])
        XCTAssertEqual(try store.commit([.append(JournalEntry(ride: "a", seq: 2, transition: .end(at: 3_000, reason: .rider, metres: 0),
                                                              outbox: a2.outboxEvents(endpoints: endpoints)), reply: nil)]), [.written])
        let sqlite = try SQLiteOutbox(path: path)
        defer { sqlite.close() }
        for outbox in [memory, sqlite] as [WebhookOutbox] {
            XCTAssertEqual(outbox.events(after: nil, ride: nil, limit: 10), .events([a1.body(), b1.body(), a2.body()]), "once each, not once per endpoint")
            XCTAssertEqual(outbox.events(after: nil, ride: nil, limit: 2), .events([a1.body(), b1.body()]))
            XCTAssertEqual(outbox.events(after: b1.id, ride: nil, limit: 10), .events([a2.body()]))
            XCTAssertEqual(outbox.events(after: nil, ride: "a", limit: 10), .events([a1.body(), a2.body()]))
            XCTAssertEqual(outbox.events(after: a1.id, ride: "b", limit: 10), .events([b1.body()]))
            XCTAssertEqual(outbox.events(after: "evt_unknown", ride: nil, limit: 10), .unknownCursor)
            // Delivered, the rows go; the log stays. Older than the cutoff, the log goes too.
            for row in outbox.pending(limit: 10) { outbox.record(.delivered(seq: row.seq, attempts: 1)) }
            XCTAssertEqual(outbox.events(after: nil, ride: nil, limit: 10), .events([a1.body(), b1.body(), a2.body()]))
            outbox.purgeEvents(before: 2_500)
            XCTAssertEqual(outbox.events(after: nil, ride: nil, limit: 10), .events([a2.body()]))
            XCTAssertEqual(outbox.events(after: a1.id, ride: nil, limit: 10), .unknownCursor, "a purged cursor")
        }
    }
}
