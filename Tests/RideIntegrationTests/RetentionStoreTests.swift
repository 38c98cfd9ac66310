import Foundation
import XCTest
import RideCore
import RideWebhooks
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

let day: Int64 = 86_400_000

/// `purgeEnded` (`--retain-ended`, docs/retention.md), the same contract on every store: rides
/// ended 10, 100 and 400 days before `t0` and open ones (one of them started 400 days ago),
/// each with a reply, a trace checkpoint and webhook rows; a purge at 90 days takes the 100-
/// and 400-day rides with what is theirs, and nothing else.
final class RetentionStoreTests: StoreDirectoryTestCase {
    typealias Kind = OutboxStoreKind
    /// The PostgreSQL outbox's clock: rows are due (claimable) at `t0`.
    let pgClock = ManualClock(t0)

    func forEachStore(_ body: (Kind, any RideStore, any WebhookOutbox) throws -> Void) throws {
        try forEachOutboxStore(pgClock: pgClock, body)
    }

    /// The reply recorded with a ride's transition at `at`, keyed by the ride's id.
    func reply(_ ride: String, at: UnixMillis) -> ReplyRecord {
        ReplyRecord(key: ReplyKey(scope: "rider", id: "req-" + ride), request: "end " + ride, bytes: bytes("reply of \(ride)"), at: at)
    }

    func trace(_ ride: String, at: UnixMillis) -> StoreWrite {
        .trace(TraceCheckpoint(ride: ride, metres: 700, last: TracePoint(lat: 52.5, lon: 13.4, at: at, accuracy: 5), receivedAt: at))
    }

    /// A ride started an hour before `endedDaysAgo` days before t0 and ended then (nil: still
    /// open, started `startedDaysAgo` days ago), with its reply, trace and webhook rows.
    func seed(_ store: any RideStore, _ id: String, startedDaysAgo: Int64, endedDaysAgo: Int64?) throws {
        let started = t0 - startedDaysAgo * day
        var writes = [start(id, at: started, to: [endpoints[0]])]
        if let ended = endedDaysAgo.map({ t0 - $0 * day }) {
            let end = StoreWrite.append(JournalEntry(ride: id, seq: 2, transition: .end(at: ended, reason: .rider, metres: 700),
                                                     outbox: events(id, "ride.ended", at: ended, to: [endpoints[0]])),
                                        reply: reply(id, at: ended))
            writes += [end, trace(id, at: ended)]
        } else {
            // An open ride's reply is recent (replies older than a day are pruned hourly anyway).
            writes += [.append(JournalEntry(ride: id, seq: 2, transition: .pause(at: t0 - 3_600_000)), reply: reply(id, at: t0 - 3_600_000)),
                       trace(id, at: t0 - 3_600_000)]
        }
        XCTAssertEqual(try store.commit(writes), Array(repeating: .written, count: writes.count), id)
    }

    func testAPurgeTakesOnlyRidesEndedBeforeTheCutoffWithWhatIsTheirs() throws {
        try forEachStore { kind, store, outbox in
            let k = kind.rawValue
            try seed(store, "ended-400", startedDaysAgo: 400, endedDaysAgo: 400)
            try seed(store, "ended-100", startedDaysAgo: 100, endedDaysAgo: 100)
            try seed(store, "ended-10", startedDaysAgo: 10, endedDaysAgo: 10)
            try seed(store, "open-400", startedDaysAgo: 400, endedDaysAgo: nil)
            try seed(store, "open-new", startedDaysAgo: 0, endedDaysAgo: nil)
            // The starts' deliveries of three rides were given up on (dead); every other row
            // is still owed (pending). Delivered rows were deleted at delivery already.
            let heads = outbox.pending(limit: 100).filter { $0.eventID.hasSuffix("ride.started") }
            for row in heads where ["ended-400", "ended-100", "ended-10"].contains(row.rideID) {
                outbox.record(.dead(seq: row.seq, attempts: 9, lastResult: "HTTP 410"))
            }
            XCTAssertEqual(Set(outbox.dead(limit: 100).map(\.rideID)), ["ended-400", "ended-100", "ended-10"], k)
            let pendingBefore = pending(outbox)
            let openBefore = try store.openRides()

            let count = try store.purgeEnded(before: t0 - 90 * day, limit: 500)
            XCTAssertEqual(count, PurgeCount(rides: 2, journal: 4, replies: 2, traces: 2, outbox: 2), k)
            XCTAssertFalse(count.full(limit: 500), k)
            for gone in ["ended-400", "ended-100"] {
                XCTAssertNil(try store.ride(gone), "\(k): \(gone)")
                XCTAssertNil(try store.trace(gone), "\(k): \(gone)")
                XCTAssertNil(try store.reply(for: reply(gone, at: 0).key), "\(k): \(gone)")
            }
            for kept in ["ended-10", "open-400", "open-new"] {
                XCTAssertNotNil(try store.ride(kept), "\(k): \(kept)")
                XCTAssertEqual(try store.trace(kept)?.metres, 700, "\(k): \(kept)")
                XCTAssertEqual(try store.reply(for: reply(kept, at: 0).key)?.bytes, bytes("reply of \(kept)"), "\(k): \(kept)")
            }
            XCTAssertEqual(try store.ride("ended-10")?.ride.state, .ended, k)
            XCTAssertEqual(try store.openRides(), openBefore, k)
            XCTAssertEqual(try store.rides(.ended(before: nil), limit: 10).map(\.id), ["ended-10"], k)
            // Deliveries still owed are never purged, whoever's they are; given-up ones go with their ride.
            XCTAssertEqual(pending(outbox), pendingBefore, k)
            XCTAssertTrue(pendingBefore.contains { $0.rideID == "ended-400" }, k)
            XCTAssertEqual(outbox.dead(limit: 100).map(\.rideID), ["ended-10"], k)

            // Idempotent: a second purge (another node's, or the next hour's) finds nothing.
            XCTAssertEqual(try store.purgeEnded(before: t0 - 90 * day, limit: 500), PurgeCount(), k)
            // The kept rides still take writes; an id purged may be used again.
            XCTAssertEqual(try store.commit([start("ended-400", at: t0, to: [])]), [.written], k)
            XCTAssertEqual(try store.ride("ended-400")?.journal, [.start(at: t0)], k)
            store.close()
        }
    }

    func testBatchesTakeTheOldestEndsFirstAndSayWhenFull() throws {
        try forEachStore { kind, store, _ in
            let k = kind.rawValue
            // Seeded newest first, so taking them in the order written would be wrong.
            for days: Int64 in [100, 200, 300, 400] { try seed(store, "ended-\(days)", startedDaysAgo: days, endedDaysAgo: days) }
            let first = try store.purgeEnded(before: t0 - 90 * day, limit: 3)
            XCTAssertEqual(first.rides, 3, k)
            XCTAssertTrue(first.full(limit: 3), k)
            XCTAssertNotNil(try store.ride("ended-100"), "\(k): the newest end is left for the next batch")
            let second = try store.purgeEnded(before: t0 - 90 * day, limit: 3)
            XCTAssertEqual(second, PurgeCount(rides: 1, journal: 2, replies: 1, traces: 1, outbox: 0), k)
            XCTAssertFalse(second.full(limit: 3), k)
            XCTAssertEqual(try store.rides(.byStart(after: nil), limit: 10), [], k)
            XCTAssertEqual(try store.purgeEnded(before: t0, limit: 0), PurgeCount(), "\(k): a batch of none deletes nothing")
            store.close()
        }
    }

    /// Every pending row, by seq (see OutboxStoreTests.all).
    func pending(_ outbox: any WebhookOutbox) -> [OutboxRow] {
        switch outbox {
        case let m as MemoryOutbox: return m.pendingRows
        case let s as SQLiteOutbox: return s.allPending()
        case let p as PostgresOutbox: return p.allPending()
        default: XCTFail("unknown outbox"); return []
        }
    }
}
