import XCTest
import RideCore
import RideStore
@testable import RideService

/// `--retain-ended`'s schedule and counts (Retention.swift), on a memory store: the cutoff is
/// the window before now, a full batch asks the ticker for another, the counts add up for
/// /metrics, and a failing store is counted, not thrown.
final class RetentionTests: XCTestCase {
    let now: UnixMillis = 1_764_430_000_000
    let day: Int64 = 86_400_000

    func ended(_ store: MemoryStore, _ id: String, daysAgo: Int64) throws {
        let at = now - daysAgo * day
        try store.create(id: id, planID: "p", owner: nil, limit: nil, startedAt: at - 60_000, reply: nil)
        try store.append(ride: id, .end(at: at, reason: .rider, metres: 10), reply: nil)
    }

    func testTheCutoffIsTheWindowBeforeNow() {
        guard case .purge(_, let before) = Retention(days: 90).job(now: now) else { return XCTFail("not a purge job") }
        XCTAssertEqual(before, now - 90 * day)
    }

    func testAFullBatchAsksForAnotherOnceAndTheCountsAddUp() throws {
        let store = MemoryStore()
        for i in 0..<5 { try ended(store, "old-\(i)", daysAgo: 100 + Int64(i)) }
        try ended(store, "recent", daysAgo: 10)
        try store.create(id: "open", planID: "p", owner: nil, limit: nil, startedAt: now - 400 * day, reply: nil)
        let retention = Retention(days: 90, batch: 2)
        XCTAssertFalse(retention.takeMore(), "nothing asked before a batch ran")
        // Bounded: 5 old rides, 2 a batch, is 3 batches; the loop would stop at 10 regardless.
        var batches = 0
        repeat {
            retention.run(store, before: now - 90 * day)
            batches += 1
        } while retention.takeMore() && batches < 10
        XCTAssertEqual(batches, 3)
        XCTAssertFalse(retention.takeMore(), "taken once")
        XCTAssertEqual(retention.purged, PurgeCount(rides: 5, journal: 10))
        XCTAssertEqual(retention.batches.load(ordering: .relaxed), 3)
        XCTAssertEqual(try store.openRides().map(\.id), ["open"])
        XCTAssertNotNil(try store.ride("recent"))
        let text = retention.prometheusText()
        XCTAssertTrue(text.contains("ridepush_retention_purged_total{kind=\"rides\"} 5\n"), text)
        XCTAssertTrue(text.contains("ridepush_retention_purged_total{kind=\"journal_entries\"} 10\n"), text)
        XCTAssertTrue(text.contains("ridepush_retention_batches_total{result=\"ok\"} 3\n"), text)
    }

    func testAFailingStoreIsCountedAndAsksForNothing() {
        let store = MemoryStore()
        store.close()
        let retention = Retention(days: 1)
        retention.run(store, before: now)
        XCTAssertEqual(retention.failures.load(ordering: .relaxed), 1)
        XCTAssertEqual(retention.batches.load(ordering: .relaxed), 0)
        XCTAssertFalse(retention.takeMore())
        XCTAssertTrue(retention.prometheusText().contains("ridepush_retention_batches_total{result=\"failed\"} 1\n"))
    }
}
