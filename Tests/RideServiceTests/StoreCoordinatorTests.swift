@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
@testable import RideCore
import RideProtocol
import RideStore

/// The store worker's turn without its thread: requests queued together commit together,
/// nobody is told before the commit, a failed commit changes nothing, retries and auto-ends.
final class StoreCoordinatorTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    func testRequestsQueuedTogetherCommitInOneTransactionAndAreAnsweredAfterIt() throws {
        let h = EmbeddedService(ManualClock(t0))
        for (n, rid) in ["a", "b", "c"].enumerated() {
            h.submit(.request(.start(ride: rid, plan: nil, limit: nil, owner: nil), id: "s\(n)", scope: "",
                                       access: nil, from: Requester(shard: n % 2, session: UInt64(n))))
        }
        h.submit(.request(.command(.pause, ride: "a", metres: nil), id: "p", scope: "", access: nil,
                                   from: Requester(shard: 0, session: 0)))
        XCTAssertNil(h.registry.find("a"), "not in memory, not told, before the commit")
        XCTAssertTrue(h.events.allSatisfy(\.isEmpty))
        h.run()
        XCTAssertEqual(h.store.commits.count, 1, "one transaction (one fsync) for the group")
        XCTAssertEqual(h.store.commits[0].count, 4)
        XCTAssertEqual(h.store.commits[0].map(\.rideID), ["a", "b", "c", "a"])
        let toA = h.replies(to: 0).map { h.json($0) }
        XCTAssertEqual(toA.map { $0["id"]?.string }, ["s0", "p"])
        XCTAssertEqual(toA.map { $0["state"]?.string }, ["riding", "paused"])
        XCTAssertEqual(h.json(h.replies(to: 1, shard: 1)[0])["ride"]?.string, "b")
        XCTAssertEqual(h.json(h.replies(to: 2)[0])["ride"]?.string, "c")
        XCTAssertEqual(h.registry.find("a").map { h.registry.snapshot($0).state }, .paused)
        XCTAssertEqual(h.registry.counts.riding, 2)
        XCTAssertEqual(h.registry.counts.paused, 1)
        XCTAssertEqual(try h.store.ride("a")?.journal, [.start(at: t0), .pause(at: t0)])
    }

    func testAFailedCommitAnswersUnavailableAndChangesNothing() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        clock.advance(seconds: 10)
        h.store.failNext = StoreError(.unavailable, "ride store x: database or disk is full")
        let failed = h.request(.command(.pause, ride: "r", metres: nil), id: "p1")
        let e = h.json(try XCTUnwrap(failed.reply))
        XCTAssertEqual(e["type"]?.string, "error")
        XCTAssertEqual(e["code"]?.string, "unavailable")
        XCTAssertEqual(e["id"]?.string, "p1")
        XCTAssertEqual(e["message"]?.string, "could not record the pause: ride store x: database or disk is full")
        XCTAssertTrue(failed.pushes.isEmpty, "nothing pushed for what was not recorded")
        XCTAssertEqual(h.registry.find("r").map { h.registry.snapshot($0).state }, .riding)
        // The same request again applies now, as entry 2: the book forgot the failed group.
        let again = h.request(.command(.pause, ride: "r", metres: nil), id: "p1")
        XCTAssertEqual(h.json(try XCTUnwrap(again.reply))["state"]?.string, "paused")
        XCTAssertEqual(again.pushes.count, 1)
        XCTAssertEqual(try h.store.ride("r")?.seq, 2)
    }

    func testAReusedRequestIdForAnotherRideOrTypeIsAConflictNotTheOldReply() throws {
        let h = EmbeddedService(ManualClock(t0))
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil), id: "s")
        h.request(.start(ride: "q", plan: nil, limit: nil, owner: nil), id: "s2")
        let first = h.request(.command(.pause, ride: "r", metres: nil), id: "x")
        let other = h.request(.command(.pause, ride: "q", metres: nil), id: "x")
        let e = h.json(try XCTUnwrap(other.reply))
        XCTAssertEqual(e["code"]?.string, "conflict")
        XCTAssertEqual(e["message"]?.string, "this request id was already used for \"pause r\"; send a new id for \"pause q\"")
        XCTAssertEqual(h.registry.find("q").map { h.registry.snapshot($0).state }, .riding, "not applied either")
        XCTAssertEqual(h.request(.command(.end, ride: "r", metres: nil), id: "x").reply.map { h.json($0)["code"]?.string }, "conflict")
        XCTAssertEqual(h.request(.command(.pause, ride: "r", metres: nil), id: "x").reply, first.reply)
    }

    func testTwoRetriesInOneGroupAreAppliedOnce() throws {
        let h = EmbeddedService(ManualClock(t0))
        for _ in 0..<2 {
            h.submit(.request(.start(ride: "r", plan: nil, limit: nil, owner: nil), id: "s", scope: "u",
                                       access: nil, from: Requester(shard: 0, session: 1)))
        }
        h.run()
        XCTAssertEqual(h.store.commits.map(\.count), [1])
        let r = h.replies(to: 1)
        XCTAssertEqual(r.count, 2)
        XCTAssertEqual(r[0], r[1])
        XCTAssertEqual(h.json(r[0])["state"]?.string, "riding")
    }

    func testAnAutoEndIsATransitionThroughTheStoreAndItsPushFollowsTheCommit() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        h.request(.start(ride: "r", plan: nil, limit: 2, owner: nil))
        h.watch("r")
        let (batch, _, ends) = h.registry.tick(seq: 3, at: t0 + 3_000) { _, _ in }
        XCTAssertTrue(batch.rides(pre: h.pre).isEmpty, "a ride whose end is on its way to the store stops ticking")
        guard case .autoEnd("r", at: t0 + 3_000)? = ends.first else { return XCTFail("\(ends)") }
        XCTAssertEqual(ends.count, 1)
        // Noticed again before its commit: not asked twice.
        XCTAssertTrue(h.registry.tick(seq: 4, at: t0 + 4_000) { _, _ in }.2.isEmpty)
        h.queue.submit(ends)
        h.run()
        let pushed = h.pushes(1).map { h.json($0) }
        XCTAssertEqual(pushed.count, 1)
        XCTAssertEqual(pushed[0]["receipt"]?["reason"]?.string, "time_limit")
        XCTAssertEqual(pushed[0]["ended_at"]?.int, t0 + 2_000)
        XCTAssertEqual(try h.store.ride("r")?.journal, [.start(at: t0), .end(at: t0 + 2_000, reason: .timeLimit, metres: 0)])
        XCTAssertEqual(h.registry.counts.ended, 1)
    }

    func testAFailedAutoEndIsAskedAgainAtTheNextTick() throws {
        let h = EmbeddedService(ManualClock(t0))
        h.request(.start(ride: "r", plan: nil, limit: 1, owner: nil))
        h.store.failNext = StoreError(.unavailable, "busy")
        XCTAssertTrue(h.tick(seq: 2, at: t0 + 2_000).1.isEmpty)
        let (_, pushes) = h.tick(seq: 3, at: t0 + 3_000)
        XCTAssertEqual(pushes.map { h.json($0.1)["state"]?.string }, ["ended"])
    }

    func testLookupsOfRidesNotInMemoryAreReadByTheWorkerAndAnsweredInOrder() throws {
        let h = EmbeddedService(ManualClock(t0))
        try h.store.inner.create(id: "old", planID: "default", owner: nil, limit: nil, startedAt: t0 - 10_000, reply: nil)
        try h.store.inner.append(ride: "old", .end(at: t0 - 5_000, reason: .rider, metres: 0), reply: nil)
        XCTAssertNil(h.registry.find("old"))
        let env = ClientEnvelope(id: "g", message: .get(ride: "old"))
        h.submit(.lookup("old", from: Requester(shard: 1, session: 7), then: .message(env)))
        h.submit(.lookup("ghost", from: Requester(shard: 1, session: 7), then: .message(env)))
        h.run()
        XCTAssertEqual(h.events[1].count, 2)
        guard case .found(7, _, let live?, nil) = h.events[1][0] else { return XCTFail("\(h.events[1])") }
        XCTAssertEqual(h.registry.snapshot(live).state, .ended)
        guard case .found(7, _, nil, nil) = h.events[1][1] else { return XCTFail("\(h.events[1])") }
        XCTAssertNotNil(h.registry.find("old"), "kept in memory for the next reader")
    }

    /// Issue 15 item 8, by construction: the ticker hands other threads their tick, and the
    /// store thread its replies and pushes, with the registry's view locked. So a tick encoded
    /// before a transition is in every mailbox before that transition's push.
    func testTicksAndTransitionPushesArePostedUnderTheSameLock() throws {
        let h = EmbeddedService(ManualClock(t0))
        var lockedDuringDelivery: [Bool] = []
        h.coordinator = StoreCoordinator(book: RideBook(plans: [.standard]), registry: h.registry, clock: h.clock, metrics: Metrics()) {
            [registry = h.registry] _, _ in lockedDuringDelivery.append(registry.view.withLockIfAvailable { _ in } == nil)
        }
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        h.request(.command(.end, ride: "r", metres: nil))
        XCTAssertEqual(lockedDuringDelivery, [true, true, true])
        h.request(.start(ride: "s", plan: nil, limit: nil, owner: nil))
        var lockedDuringPost = false
        _ = h.registry.tick(seq: 1, at: t0 + 1_000) { _, _ in
            lockedDuringPost = h.registry.view.withLockIfAvailable { _ in } == nil
        }
        XCTAssertTrue(lockedDuringPost)
    }
}
