@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
@testable import RideCore
import RideStore

/// Webhook events ride in the store write of the transition they describe: one per endpoint,
/// none for a refusal, a replay or a failed commit, and the sender is poked only after a group
/// that carried some committed.
final class WebhookWritesTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let endpoints = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]

    func events(_ h: EmbeddedService) -> [OutboxEvent] { h.store.commits.flatMap { $0.flatMap(\.outbox) } }

    func body(_ e: OutboxEvent) -> JSON { try! JSON.parse(e.body) }

    func testEveryCommittedTransitionCarriesOneEventPerEndpointInCommitOrder() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock, webhooks: endpoints)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: "alice"), id: "s")
        for (n, command) in [RideCommand.pause, .resume, .end].enumerated() {
            clock.advance(seconds: 10)
            h.request(.command(command, ride: "r", metres: nil), id: "c\(n)")
        }
        let all = events(h)
        XCTAssertEqual(all.count, 8)
        XCTAssertEqual(all.map(\.endpoint), Array(repeating: endpoints, count: 4).flatMap { $0 })
        XCTAssertEqual(all.map(\.type), ["ride.started", "ride.started", "ride.paused", "ride.paused",
                                         "ride.resumed", "ride.resumed", "ride.ended", "ride.ended"])
        for pair in stride(from: 0, to: 8, by: 2) {
            XCTAssertEqual(all[pair].eventID, all[pair + 1].eventID, "one event, one copy per endpoint")
            XCTAssertEqual(all[pair].body, all[pair + 1].body)
        }
        XCTAssertEqual(Set(all.map(\.eventID)).count, 4)
        XCTAssertEqual(all.map(\.created), [t0, t0, t0 + 10_000, t0 + 10_000, t0 + 20_000, t0 + 20_000, t0 + 30_000, t0 + 30_000])
        let ended = body(all[6])
        XCTAssertEqual(ended["type"]?.string, "ride.ended")
        XCTAssertEqual(ended["id"]?.string, all[6].eventID)
        XCTAssertEqual(ended["ride"]?["ride"]?.string, "r")
        XCTAssertEqual(ended["ride"]?["state"]?.string, "ended")
        XCTAssertEqual(ended["ride"]?["owner"]?.string, "alice")
        XCTAssertEqual(ended["ride"]?["receipt"]?["reason"]?.string, "rider")
        XCTAssertNil(body(all[2])["ride"]?["receipt"], "a receipt only once ended")
        XCTAssertEqual(h.eventPokes, 4)
    }

    func testRefusalsReplaysAndFailedCommitsWriteNoEventAndPokeNobody() throws {
        let h = EmbeddedService(ManualClock(t0), webhooks: endpoints)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil), id: "s")
        h.request(.command(.end, ride: "r", metres: nil), id: "e")
        XCTAssertEqual(events(h).count, 4)
        XCTAssertEqual(h.eventPokes, 2)
        let refused = h.request(.command(.pause, ride: "r", metres: nil), id: "p")
        XCTAssertEqual(h.json(try XCTUnwrap(refused.reply))["code"]?.string, "invalid_transition")
        let replayed = h.request(.command(.end, ride: "r", metres: nil), id: "e")
        XCTAssertEqual(h.json(try XCTUnwrap(replayed.reply))["state"]?.string, "ended")
        h.store.failNext = StoreError(.unavailable, "disk full")
        h.request(.start(ride: "q", plan: nil, limit: nil, owner: nil), id: "q")
        XCTAssertEqual(events(h).count, 4, "nothing new written")
        XCTAssertEqual(h.eventPokes, 2, "nothing new committed")
    }

    func testAnAutoEndCarriesRideEndedWithItsReason() throws {
        let h = EmbeddedService(ManualClock(t0), webhooks: [endpoints[0]])
        h.request(.start(ride: "r", plan: nil, limit: 2, owner: nil))
        _ = h.tick(seq: 3, at: t0 + 3_000)
        let all = events(h)
        XCTAssertEqual(all.map(\.type), ["ride.started", "ride.ended"])
        XCTAssertEqual(body(all[1])["ride"]?["receipt"]?["reason"]?.string, "time_limit")
    }

    func testWithoutWebhooksNothingIsWritten() {
        let h = EmbeddedService(ManualClock(t0))
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        XCTAssertEqual(h.store.commits.count, 1)
        XCTAssertTrue(events(h).isEmpty)
        XCTAssertEqual(h.eventPokes, 0)
    }
}
