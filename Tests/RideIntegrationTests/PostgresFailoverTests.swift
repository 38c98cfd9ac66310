import Foundation
import Synchronization
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres

/// A COMMIT whose answer never came (issue 39, item 1): the store settles it by reading the
/// group back, never by assuming either way. The failover itself (a promoted standby) is
/// tests/test_failover.py; here the same server plays both parts.
final class PostgresFailoverTests: XCTestCase {
    var pg: TestPostgres!
    var db: String!

    override func setUpWithError() throws {
        pg = try TestPostgres.shared()
        db = try pg.createDatabase()
    }

    func testMultiHostURIsKeepTheirHostsAndHideOnlyThePassword() {
        let uri = "postgresql://ridepush:s3cret@db1:5432,db2:5432/ridepush?target_session_attrs=read-write"
        XCTAssertEqual(PostgresSettings.redact(uri), "postgresql://ridepush:***@db1:5432,db2:5432/ridepush?target_session_attrs=read-write")
        XCTAssertEqual(PostgresSettings.hostCount(uri), 2)
        XCTAssertEqual(PostgresSettings.hostCount("postgresql://u@a,b,c/db"), 3)
        XCTAssertEqual(PostgresSettings.hostCount("postgresql:///db?host=/run/a,/run/b"), 2)
        XCTAssertEqual(PostgresSettings.hostCount("postgresql://u@h/db"), 1)
        XCTAssertTrue(PostgresSettings.isURI(uri))
        XCTAssertEqual(ConnectionHealth(downWord: "failing over").downWord, "failing over")
        XCTAssertEqual(try PostgresStore(pg.settings(database: db)).health.downWord, "unreachable")
    }

    /// The session is gone before its COMMIT arrives: read back, nothing of the group is
    /// there, so `.unavailable` ("not committed") and nothing applied; the retry commits.
    func testACommitThatNeverArrivedIsSettledAsNotCommitted() throws {
        nonisolated(unsafe) let store = try PostgresStore(pg.settings(database: db))
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        nonisolated(unsafe) let admin = try PostgresConnection(pg.settings(database: db))
        store.beforeCommit = { _ = try? admin.query("SELECT pg_terminate_backend(\(store.ownBackend.value))") }
        let reply = ReplyRecord(key: ReplyKey(scope: "u", id: "p-1"), request: "pause r", bytes: [7, 8], at: t0 + 1)
        let pause = StoreWrite.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 1)), reply: reply)
        let e = storeError { () throws(StoreError) in try store.commit([pause]) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.contains("not committed (0 of 2 writes found)") ?? false, e?.message ?? "")
        XCTAssertEqual(store.settles.notCommitted.load(ordering: .relaxed), 1)
        XCTAssertEqual(try store.ride("r")?.journal, [.start(at: t0)])
        XCTAssertNil(try store.reply(for: reply.key))
        XCTAssertTrue(store.health.isUp, "settling reconnected")
        store.beforeCommit = nil
        XCTAssertEqual(try store.commit([pause]), [.written])
    }

    /// The COMMIT waits for a synchronous standby that does not answer; the client's deadline
    /// passes and the connection is closed, so the answer is lost. Settling ends the old
    /// session (its transaction is then committed locally only), finds the group, and still
    /// does not acknowledge until a commit of its own has passed the synchronous standby:
    /// here, until `synchronous_standby_names` is cleared.
    func testACommitWaitingForTheSynchronousStandbyIsAcknowledgedOnlyOnceReplicated() throws {
        var settings = pg.settings(database: db)
        settings.statementTimeoutMillis = 1_000  // client deadline 3 s
        settings.settleTimeoutMillis = 20_000
        nonisolated(unsafe) let store = try PostgresStore(settings)  // the releasing thread reads its backend only
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        _ = try pg.admin("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        _ = try pg.admin("SELECT pg_reload_conf()")
        // pg_reload_conf only signals the postmaster: once a new session (forked from it) sees
        // the setting, the postmaster has reloaded and signalled every backend, the store's
        // included, which rereads it before its next command. Without this wait the commit
        // below could run on the old setting (acknowledged at once: seen under load).
        try waitUntil(timeout: 10, "a new session to see synchronous_standby_names = 'nobody'") {
            try pg.admin("SHOW synchronous_standby_names").text(0, 0) == "nobody"
        }
        let cleared = DispatchSemaphore(value: 0)
        defer {
            _ = try? pg.admin("ALTER SYSTEM RESET synchronous_standby_names")
            _ = try? pg.admin("SELECT pg_reload_conf()")
        }
        let released = Atomic<Bool>(false)
        let firstSession = store.ownBackend.value
        nonisolated(unsafe) let server = pg!  // read-only use from the releasing thread
        Thread.detachNewThread {
            // The standby "answers" only once the first COMMIT's answer was lost (the client's
            // deadline passed), its session was ended and the settle's own commit waits for the
            // standby in a new session.
            waitUntil(timeout: 15, "the settle's commit to wait for the synchronous standby") {
                let pid = store.ownBackend.value
                guard pid != 0, pid != firstSession else { return false }
                let waiting = try? server.admin("SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid) AND wait_event = 'SyncRep'")
                return waiting?.int(0, 0) == 1
            }
            released.store(true, ordering: .sequentiallyConsistent)
            _ = try? server.admin("ALTER SYSTEM RESET synchronous_standby_names")
            _ = try? server.admin("SELECT pg_reload_conf()")
            cleared.signal()
        }
        let reply = ReplyRecord(key: ReplyKey(scope: "u", id: "e-1"), request: "end r", bytes: [1, 2, 3], at: t0 + 9)
        let results = try store.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .end(at: t0 + 9, reason: .rider, metres: 5)), reply: reply)])
        XCTAssertEqual(results, [.written])
        XCTAssertTrue(released.load(ordering: .sequentiallyConsistent), "acknowledged before the standby could have it")
        XCTAssertEqual(store.settles.committed.load(ordering: .relaxed), 1)
        XCTAssertEqual(try store.ride("r")?.journal, [.start(at: t0), .end(at: t0 + 9, reason: .rider, metres: 5)])
        XCTAssertEqual(try store.reply(for: reply.key)?.bytes, [1, 2, 3])
        XCTAssertEqual(cleared.wait(timeout: .now() + 10), .success)
    }

    /// What is read back: a start is its entry (seq 1), an append its entry, each reply its
    /// key with its exact bytes; trace checkpoints are not (a group of only those cannot be
    /// settled and stays `.unavailable`, as nothing was acknowledged for it).
    func testTheReadBackCountsEntriesAndRepliesNotTraces() {
        XCTAssertNil(PostgresStore.settleStatement([.trace(TraceCheckpoint(ride: "r", metres: 0, last: nil, receivedAt: nil))]))
        let reply = ReplyRecord(key: ReplyKey(scope: "", id: "s"), request: "start r", bytes: [1], at: t0)
        let s = PostgresStore.settleStatement([.create(NewRide(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0), reply: reply),
                                               .append(JournalEntry(ride: "q", seq: 3, transition: .resume(at: t0)), reply: nil),
                                               .trace(TraceCheckpoint(ride: "r", metres: 0, last: nil, receivedAt: nil))])
        XCTAssertEqual(s?.expected, 3)
    }
}
