import Foundation
import XCTest
import RideCore
@testable import RideStore
@testable import RideStoreSQLite

/// What retention asks of the SQLite file only: it shrinks after a purge (auto_vacuum =
/// INCREMENTAL and incremental_vacuum), and a file made before schema 9 is switched over once.
final class SQLiteRetentionTests: StoreDirectoryTestCase {
    func fileSize() throws -> Int {
        try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    }

    func pragma(_ name: String) throws -> String? {
        let raw = try SQLiteConnection(path: path)
        defer { raw.close() }
        return try raw.scalarText("PRAGMA \(name)")
    }

    /// Purges batch after batch until one is not full (at most `batches`); the total.
    func purgeAll(_ store: SQLiteStore, before: UnixMillis, limit: Int = 500, batches: Int = 40) throws -> PurgeCount {
        var total = PurgeCount()
        var longest: TimeInterval = 0
        for _ in 0..<batches {
            let began = Date()
            let c = try store.purgeEnded(before: before, limit: limit)
            // What a group queued behind the batch waits at most (printed for docs/retention.md).
            longest = max(longest, Date().timeIntervalSince(began))
            total += c
            if !c.full(limit: limit) {
                print(String(format: "%d rides purged; the longest batch of %d took %.1f ms", total.rides, limit, longest * 1000))
                return total
            }
        }
        XCTFail("still full after \(batches) batches")
        return total
    }

    func testTheFileShrinksAfterAPurge() throws {
        var store = try SQLiteStore(path: path)
        // 4,000 rides ended 400 days ago, each with a reply and a trace, and 50 open ones.
        let old = t0 - 400 * day
        for g in 0..<8 {
            var writes: [StoreWrite] = []
            for i in 0..<500 {
                let id = "old-\(g)-\(i)", at = old + Int64(g * 500 + i)
                writes.append(.create(NewRide(id: id, planID: "p", owner: "rider-\(i)", limit: nil, startedAt: at), reply: nil))
                writes.append(.append(JournalEntry(ride: id, seq: 2, transition: .end(at: at + 600_000, reason: .rider, metres: 1_200)),
                                      reply: ReplyRecord(key: ReplyKey(scope: "rider-\(i)", id: "end-\(id)"), request: "end \(id)",
                                                         bytes: Array(repeating: 0x7b, count: 300), at: at + 600_000)))
                writes.append(.trace(TraceCheckpoint(ride: id, metres: 1_200, last: TracePoint(lat: 52.52, lon: 13.405, at: at, accuracy: 4.5),
                                                     receivedAt: at)))
            }
            XCTAssertTrue(try store.commit(writes).allSatisfy { $0 == .written })
        }
        for i in 0..<50 { try store.create(id: "open-\(i)", planID: "p", owner: nil, limit: nil, startedAt: t0 - 400 * day, reply: nil) }
        store.close()  // the last connection's close copies the log into the file
        let before = try fileSize()
        XCTAssertEqual(try pragma("auto_vacuum"), "2", "a new file gives back freed pages")

        store = try SQLiteStore(path: path)
        let total = try purgeAll(store, before: t0 - 90 * day)
        XCTAssertEqual(total, PurgeCount(rides: 4_000, journal: 8_000, replies: 4_000, traces: 4_000, outbox: 0))
        XCTAssertEqual(try store.openRides().count, 50)
        store.close()
        let after = try fileSize()
        print("SQLite file before the purge: \(before) bytes, after: \(after) bytes")
        XCTAssertLessThan(after, before / 3, "the freed pages left the file")
        XCTAssertEqual(try pragma("freelist_count"), "0")
    }

    func testAVersion8FileIsSwitchedToIncrementalOnceAndThenShrinks() throws {
        // A file as the schema before retention made it: migrations 1 to 8 (never edited once
        // shipped), auto_vacuum off, and 3,000 ended rides with traces written straight in.
        let raw = try SQLiteConnection(path: path)
        try raw.exec("PRAGMA journal_mode = WAL")
        for step in Schema.migrations where step.version <= 8 {
            try raw.exec("BEGIN; \(step.sql); INSERT INTO schema_version VALUES (\(step.version), 1760000000); COMMIT;")
        }
        let ended = t0 - 400 * day
        try raw.exec("""
            BEGIN;
            WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 3000)
            INSERT INTO rides (n, id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                SELECT i, 'v8-' || i, 'p', 'rider', NULL, \(ended) + i, \(ended) + i + 60000, 2, 'ended' FROM k;
            INSERT INTO transitions (ride, seq, kind, at, reason, metres)
                SELECT n, 1, 'start', started_at, NULL, NULL FROM rides;
            INSERT INTO transitions (ride, seq, kind, at, reason, metres)
                SELECT n, 2, 'end', ended_at, 'rider', 500 FROM rides;
            INSERT INTO traces (ride, metres, lat, lon, at, accuracy, received_at)
                SELECT n, 500, '52.52', '13.405', ended_at, '5.0', ended_at FROM rides;
            INSERT INTO rides (n, id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                VALUES (3001, 'v8-open', 'p', NULL, NULL, \(ended), NULL, 1, 'riding');
            INSERT INTO transitions (ride, seq, kind, at) VALUES (3001, 1, 'start', \(ended));
            COMMIT;
            """)
        raw.close()
        XCTAssertEqual(try pragma("auto_vacuum"), "0")
        let before = try fileSize()

        var store = try SQLiteStore(path: path)
        store.close()
        XCTAssertEqual(try pragma("auto_vacuum"), "2", "the upgrade's VACUUM switched it")
        let raw2 = try SQLiteConnection(path: path)
        var versions: [Int64] = []
        try raw2.query("SELECT version FROM schema_version ORDER BY version") { (r: SQLRow) throws(StoreError) in versions.append(r.int(0)) }
        raw2.close()
        XCTAssertEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-wal"), "closed: no log left behind")

        store = try SQLiteStore(path: path)  // already incremental: no second VACUUM
        XCTAssertEqual(try store.ride("v8-3000")?.journal.count, 2)
        XCTAssertEqual(try store.trace("v8-1")?.metres, 500)
        let total = try purgeAll(store, before: t0 - 90 * day)
        XCTAssertEqual(total, PurgeCount(rides: 3_000, journal: 6_000, replies: 0, traces: 3_000, outbox: 0))
        XCTAssertEqual(try store.openRides().map(\.id), ["v8-open"])
        store.close()
        let after = try fileSize()
        print("version-8 SQLite file before: \(before) bytes, after the upgrade and the purge: \(after) bytes")
        XCTAssertLessThan(after, before / 3)
    }
}
