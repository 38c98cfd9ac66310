import Foundation
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// What only the SQLite file can get wrong: schema versions, bad files, write failures.
final class SQLiteFileTests: StoreDirectoryTestCase {
    func versions(_ path: String) throws -> [Int64] {
        let raw = try SQLiteConnection(path: path)
        defer { raw.close() }
        var out: [Int64] = []
        try raw.query("SELECT version FROM schema_version ORDER BY version") { (r: SQLRow) throws(StoreError) in out.append(r.int(0)) }
        return out
    }

    func testNewFileIsCurrentVersionInWALMode() throws {
        try SQLiteStore(path: path).close()
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        let raw = try SQLiteConnection(path: path)
        XCTAssertEqual(try raw.scalarText("PRAGMA journal_mode"), "wal")
        raw.close()
        // Opening again applies nothing twice.
        try SQLiteStore(path: path).close()
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
    }

    func testMigratesAVersion1FileKeepingItsRides() throws {
        // A version-1 file as an older RidePush wrote it: literal SQL, independent of the
        // migration code, so editing migration 1 by mistake fails here.
        let raw = try SQLiteConnection(path: path)
        try raw.exec("""
            PRAGMA journal_mode = WAL;
            CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
            CREATE TABLE rides (id TEXT PRIMARY KEY NOT NULL, plan_id TEXT NOT NULL, owner TEXT,
                time_limit INTEGER, started_at INTEGER NOT NULL, ended_at INTEGER) WITHOUT ROWID;
            CREATE INDEX rides_open ON rides (id) WHERE ended_at IS NULL;
            CREATE TABLE transitions (ride_id TEXT NOT NULL REFERENCES rides (id), seq INTEGER NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('start', 'pause', 'resume', 'end')), at INTEGER NOT NULL,
                reason TEXT, metres INTEGER, PRIMARY KEY (ride_id, seq)) WITHOUT ROWID;
            INSERT INTO schema_version VALUES (1, 1700000000);
            INSERT INTO rides VALUES ('open-1', 'city', 'rider-9', 1800, \(t0), NULL);
            INSERT INTO transitions VALUES ('open-1', 1, 'start', \(t0), NULL, NULL);
            INSERT INTO transitions VALUES ('open-1', 2, 'pause', \(t0 + 60_000), NULL, NULL);
            INSERT INTO rides VALUES ('done-1', 'city', NULL, NULL, \(t0), \(t0 + 125_500));
            INSERT INTO transitions VALUES ('done-1', 1, 'start', \(t0), NULL, NULL);
            INSERT INTO transitions VALUES ('done-1', 2, 'end', \(t0 + 125_500), 'rider', 2500);
            """)
        raw.close()
        XCTAssertEqual(try versions(path), [1])

        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        let open = try store.openRides()
        XCTAssertEqual(open.map(\.id), ["open-1"])
        XCTAssertEqual(open[0].journal, [.start(at: t0), .pause(at: t0 + 60_000)])
        XCTAssertEqual(open[0].owner, "rider-9")
        XCTAssertEqual(open[0].limit, 1800)
        XCTAssertEqual(open[0].ride.state, .paused)
        XCTAssertEqual(open[0].ride.elapsedSeconds(at: t0 + 999_000), 60)
        let done = try XCTUnwrap(try store.ride("done-1"))
        XCTAssertEqual(done.journal, [.start(at: t0), .end(at: t0 + 125_500, reason: .rider, metres: 2500)])
        XCTAssertEqual(done.ride.elapsedSeconds(at: t0 + 999_000), 125)
        // Version 2's table works on the upgraded file.
        let key = ReplyKey(scope: "rider-9", id: "q1")
        try store.append(ride: "open-1", .resume(at: t0 + 70_000), reply: ReplyRecord(key: key, request: "test", bytes: [7], at: t0 + 70_000))
        XCTAssertEqual(try store.reply(for: key)?.bytes, [7])
        // Version 3 numbered each ride's last entry and state from its journal.
        let ended = try store.commit([.append(JournalEntry(ride: "done-1", seq: 3, transition: .pause(at: t0 + 200_000)), reply: nil)])
        XCTAssertEqual(ended, [.refused(StoreError(.notAllowed, "ride done-1: ride has ended; cannot pause"))])
        let next = try store.commit([.append(JournalEntry(ride: "open-1", seq: 4, transition: .end(at: t0 + 80_000, reason: .rider, metres: 0)), reply: nil)])
        XCTAssertEqual(next, [.written])
        store.close()
    }

    private func indexes(_ path: String) throws -> [String] {
        let raw = try SQLiteConnection(path: path)
        defer { raw.close() }
        var out: [String] = []
        try raw.query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'replies' AND sql IS NOT NULL ORDER BY name") {
            (r: SQLRow) throws(StoreError) in out.append(r.text(0))
        }
        return out
    }

    func testVersion6DropsTheIndexOnReplyTimesAndPrunesInTheOrderRecorded() throws {
        // A version-5 file with replies, as that version left it: the migration drops only
        // the index, and the replies stay readable.
        let v5 = try SQLiteStore(path: path)
        v5.close()
        let raw = try SQLiteConnection(path: path)
        try raw.exec("""
            DELETE FROM schema_version WHERE version >= 6;
            DROP TABLE traces;
            DROP TABLE webhook_outbox;
            DROP TABLE webhook_dead;
            DROP TABLE push_targets;
            DROP TABLE webhook_events;
            CREATE INDEX replies_at ON replies (at);
            INSERT INTO replies (scope, id, bytes, at, request) VALUES ('u', 'old', x'01', \(t0), 'start old');
            """)
        raw.close()
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5])
        XCTAssertEqual(try indexes(path), ["replies_at", "replies_key"])

        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        XCTAssertEqual(try indexes(path), ["replies_key"])
        XCTAssertEqual(try store.reply(for: ReplyKey(scope: "u", id: "old"))?.bytes, [1])
        // Recorded after it: t0 + 5, then t0 + 1 (the clock stepped back), then t0 + 6.
        for (id, at) in [("a", t0 + 5), ("b", t0 + 1), ("c", t0 + 6)] {
            try store.create(id: "r-\(id)", planID: "p", owner: nil, limit: nil, startedAt: at,
                             reply: ReplyRecord(key: ReplyKey(scope: "u", id: id), request: "start \(id)", bytes: [2], at: at))
        }
        func kept() throws -> [String] {
            try ["old", "a", "b", "c"].filter { try store.reply(for: ReplyKey(scope: "u", id: $0)) != nil }
        }
        try store.prune(repliesBefore: t0 + 3)
        // Oldest first, up to the first reply not older: "b" waits behind "a".
        XCTAssertEqual(try kept(), ["a", "b", "c"])
        try store.prune(repliesBefore: t0 + 6)
        XCTAssertEqual(try kept(), ["c"])
        try store.prune(repliesBefore: t0 + 7)
        XCTAssertEqual(try kept(), [])
        try store.prune(repliesBefore: t0 + 8)  // nothing left: nothing to do
        XCTAssertEqual(try kept(), [])
        store.close()
    }

    func testNewerSchemaIsRefusedUntouched() throws {
        try SQLiteStore(path: path).close()
        let raw = try SQLiteConnection(path: path)
        try raw.exec("INSERT INTO schema_version VALUES (99, 1800000000)")
        raw.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let e = storeError { () throws(StoreError) in try SQLiteStore(path: path) }
        XCTAssertEqual(e?.kind, .newerSchema)
        XCTAssertEqual(e?.message, "ride store \(path): schema version 99 is newer than this RidePush supports (version 12); upgrade RidePush or use another file")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
        XCTAssertEqual(try versions(path), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 99])
    }

    func testNonDatabaseFileIsRefused() throws {
        let junk = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try (Data("not a database, just some bytes\n".utf8) + junk).write(to: URL(fileURLWithPath: path))
        let e = storeError { () throws(StoreError) in try SQLiteStore(path: path) }
        XCTAssertEqual(e?.kind, .corrupt)
        XCTAssertTrue(e?.message.hasPrefix("ride store \(path): file is not a database") ?? false, e?.message ?? "no error")
    }

    func testSomeoneElsesDatabaseIsRefused() throws {
        let raw = try SQLiteConnection(path: path)
        try raw.exec("CREATE TABLE invoices (n INTEGER); CREATE TABLE rides (x)")
        raw.close()
        let e = storeError { () throws(StoreError) in try SQLiteStore(path: path) }
        XCTAssertEqual(e?.kind, .corrupt)
        XCTAssertEqual(e?.message, "ride store \(path): an SQLite database but not a RidePush store (no schema_version table; has invoices, rides)")
    }

    func testDamagedJournalIsReportedNotGuessed() throws {
        let store = try SQLiteStore(path: path)
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        store.close()
        let raw = try SQLiteConnection(path: path)
        try raw.exec("INSERT INTO transitions VALUES ((SELECT n FROM rides WHERE id = 'r'), 2, 'resume', \(t0 + 1), NULL, NULL)")
        raw.close()
        let reopened = try SQLiteStore(path: path)
        let e = storeError { () throws(StoreError) in try reopened.openRides() }
        XCTAssertEqual(e?.kind, .corrupt)
        XCTAssertEqual(e?.message, "ride store \(path): the journal of ride r does not replay (start, resume)")
        reopened.close()
    }

    func testUnusablePathsAreRefusedAtOpen() throws {
        // A directory.
        var e = storeError { () throws(StoreError) in try SQLiteStore(path: dir.path) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertEqual(e?.message, "ride store \(dir.path): is a directory, not a database file")

        // A missing directory, and a "directory" that is a regular file: unwritable even for root.
        let missing = dir.appendingPathComponent("no/such/dir/rides.db").path
        e = storeError { () throws(StoreError) in try SQLiteStore(path: missing) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertEqual(e?.message, "ride store \(missing): cannot open (unable to open database file); check that the directory exists and is writable")
        let file = dir.appendingPathComponent("plain")
        try Data("x".utf8).write(to: file)
        let underFile = file.appendingPathComponent("rides.db").path
        e = storeError { () throws(StoreError) in try SQLiteStore(path: underFile) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.hasPrefix("ride store \(underFile): cannot open") ?? false)

        // Permission bits only stop a non-root user (the test may run as root in CI boxes).
        if geteuid() != 0 {
            let locked = dir.appendingPathComponent("locked")
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: false)
            chmod(locked.path, 0o555)
            defer { chmod(locked.path, 0o755) }
            let p = locked.appendingPathComponent("rides.db").path
            e = storeError { () throws(StoreError) in try SQLiteStore(path: p) }
            XCTAssertEqual(e?.kind, .unavailable)

            try SQLiteStore(path: path).close()
            chmod(path, 0o444)
            defer { chmod(path, 0o644) }
            e = storeError { () throws(StoreError) in try SQLiteStore(path: path) }
            XCTAssertEqual(e?.kind, .unavailable)
        }
    }

    /// Issue 15 item 6: a second server on the same file is refused, naming it.
    func testASecondStoreOnTheSameFileIsRefusedUntilTheFirstCloses() throws {
        let first = try SQLiteStore(path: path)
        let e = storeError { () throws(StoreError) in try SQLiteStore(path: path) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertEqual(e?.message, "ride store \(path): another RidePush server is using this file; stop it or give this one another --store")
        first.close()
        try SQLiteStore(path: path).close()
    }

    func testFullDiskFailsTheCallAndWritesNothing() throws {
        let store = try SQLiteStore(path: path)
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        // Cap the file at its current size: any write needing a new page hits SQLITE_FULL,
        // exactly what a full disk returns, with no disk to fill.
        let pages = try XCTUnwrap(Int64(try store.db.scalarText("PRAGMA page_count") ?? ""))
        _ = try store.db.scalarText("PRAGMA max_page_count = \(pages)")
        let key = ReplyKey(scope: "", id: "big")
        let big = ReplyRecord(key: key, request: "test", bytes: [UInt8](repeating: 0x61, count: 64 * 1024), at: t0 + 1)

        let e = storeError { () throws(StoreError) in try store.append(ride: "r", .pause(at: t0 + 1), reply: big) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.hasPrefix("ride store \(path): database or disk is full") ?? false, e?.message ?? "no error")
        XCTAssertEqual(try store.ride("r")?.journal, [.start(at: t0)])
        XCTAssertNil(try store.reply(for: key))

        // Space back: the same call now goes through; the failed one left nothing behind.
        _ = try store.db.scalarText("PRAGMA max_page_count = 1073741823")
        try store.append(ride: "r", .pause(at: t0 + 1), reply: big)
        store.close()
        let reopened = try SQLiteStore(path: path)
        XCTAssertEqual(try reopened.ride("r")?.journal, [.start(at: t0), .pause(at: t0 + 1)])
        XCTAssertEqual(try reopened.reply(for: key)?.bytes, big.bytes)
        reopened.close()
    }

    // MARK: the log's checkpoints

    /// The log is checkpointed by the helper thread, not inside the worker's COMMIT, and still
    /// starts again from its beginning under a steady stream of commits.
    /// The worker's probe of a failing file store: a read, and room on the filesystem (a
    /// read alone succeeds on the full disk that failed the write).
    func testProbeReadsTheFileAndAsksForRoomToWrite() throws {
        let store = try SQLiteStore(path: path)
        XCTAssertNil(storeError { () throws(StoreError) in try store.probe() })
        store.probeRoomBytes = .max
        let e = storeError { () throws(StoreError) in try store.probe() }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.contains("bytes free on its filesystem, less than") ?? false, e?.message ?? "")
        store.probeRoomBytes = 0
        store.close()
        XCTAssertEqual(storeError { () throws(StoreError) in try store.probe() }?.kind, .unavailable, "a closed store is not back")
    }

    func testTheLogIsCopiedByTheHelperAndRestartsUnderSteadyCommits() throws {
        let store = try SQLiteStore(path: path)
        let reply = { (n: Int) in ReplyRecord(key: ReplyKey(scope: "", id: "q\(n)"), request: "start r\(n)", bytes: Array("ok".utf8), at: 1_700_000_000_000) }
        for g in 0..<1_500 {
            let batch = (0..<20).map { i in
                StoreWrite.create(NewRide(id: "r-\(g)-\(i)", planID: "p", owner: nil, limit: nil, startedAt: 1_700_000_000_000), reply: reply(g * 20 + i))
            }
            XCTAssertEqual(try store.commit(batch), Array(repeating: .written, count: 20))
        }
        // ~15 log pages per group: 22,000 pages written; without restarts the log would be
        // past the hard cap (16,384) and only the writer's fallback would bound it.
        XCTAssertGreaterThan(store.checkpoints, 0)
        XCTAssertGreaterThanOrEqual(store.log.restarts.load(ordering: .relaxed), 2)
        store.close()
        let again = try SQLiteStore(path: path)
        defer { again.close() }
        XCTAssertNotNil(try again.ride("r-0-0"))
        XCTAssertNotNil(try again.ride("r-1499-19"))
        XCTAssertEqual(try again.reply(for: ReplyKey(scope: "", id: "q29999"))?.bytes, Array("ok".utf8))
    }

    /// Closing copies the log into the file and removes it (the checkpoint helper is stopped
    /// first), so a stopped server leaves one self-contained file.
    func testCloseLeavesOnlyTheDatabaseFile() throws {
        let store = try SQLiteStore(path: path)
        let batch = (0..<300).map { i in StoreWrite.create(NewRide(id: "r-\(i)", planID: "p", owner: nil, limit: nil, startedAt: 1), reply: nil) }
        XCTAssertEqual(try store.commit(batch).count, 300)
        store.close()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), ["rides.db"])
        XCTAssertGreaterThan(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0, 8 * 4096)
    }
}
