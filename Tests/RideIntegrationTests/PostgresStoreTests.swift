import Foundation
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// What only the PostgreSQL store has: connecting (passwords, timeouts), the schema in a
/// shared database, conditional appends across connections, NOTIFY and the catch-up feed.
/// One server for the test process, one fresh database per test.
final class PostgresStoreTests: XCTestCase {
    var pg: TestPostgres!
    var db: String!

    override func setUpWithError() throws {
        pg = try TestPostgres.shared()
        db = try pg.createDatabase()
    }

    func open(_ clock: any RideClock = MonotonicMillisClock()) throws -> PostgresStore {
        try PostgresStore(pg.settings(database: db), clock: clock)
    }

    // MARK: connecting

    func testPasswordFromURIFromPasswordFileAndFromPGPASSFILE() throws {
        try pg.admin("CREATE ROLE rider_app LOGIN PASSWORD 'pw s3cret:ü'; GRANT ALL ON DATABASE \(db!) TO rider_app", database: db)
        let base = "rider_app@127.0.0.1:\(pg.port)/\(db!)"

        // No password anywhere: libpq's own words, as a connect error.
        var e = pgError { () throws(PostgresError) in _ = try PostgresConnection(PostgresSettings(uri: "postgresql://\(base)")) }
        XCTAssertEqual(e?.kind, .connect)
        XCTAssertTrue(e?.message.contains("no password supplied") ?? false, e?.message ?? "")

        e = pgError { () throws(PostgresError) in _ = try PostgresConnection(PostgresSettings(uri: "postgresql://rider_app:wrong@127.0.0.1:\(pg.port)/\(db!)")) }
        XCTAssertEqual(e?.kind, .connect)
        XCTAssertTrue(e?.message.contains("password authentication failed for user \"rider_app\"") ?? false, e?.message ?? "")

        // In the URI (percent-encoded), from a --store-password-file, from PGPASSFILE.
        let inURI = try PostgresConnection(PostgresSettings(uri: "postgresql://rider_app:pw%20s3cret%3A%C3%BC@127.0.0.1:\(pg.port)/\(db!)"))
        XCTAssertEqual(try inURI.query("SELECT current_user").text(0, 0), "rider_app")

        let file = pg.dir + "/store-password"
        try "pw s3cret:ü\n".write(toFile: file, atomically: true, encoding: .utf8)
        let password = try PostgresSettings.password(fromFile: file)
        XCTAssertEqual(password, "pw s3cret:ü")
        let fromFile = try PostgresConnection(PostgresSettings(uri: "postgresql://rider_app:wrong@127.0.0.1:\(pg.port)/\(db!)", password: password))
        XCTAssertEqual(try fromFile.query("SELECT current_user").text(0, 0), "rider_app")

        let passfile = pg.dir + "/pgpass"
        try "127.0.0.1:\(pg.port):\(db!):rider_app:pw s3cret\\:ü\n".write(toFile: passfile, atomically: true, encoding: .utf8)
        chmod(passfile, 0o600)  // libpq ignores a pgpass others can read
        setenv("PGPASSFILE", passfile, 1)
        defer { unsetenv("PGPASSFILE") }
        let fromPassfile = try PostgresConnection(PostgresSettings(uri: "postgresql://\(base)"))
        XCTAssertEqual(try fromPassfile.query("SELECT current_user").text(0, 0), "rider_app")

        XCTAssertEqual(storeError { () throws(StoreError) in try PostgresSettings.password(fromFile: pg.dir + "/none") }?.message,
                       "--store-password-file \(pg.dir)/none: cannot read the file")
    }

    func testRedactedURIHidesPasswords() {
        XCTAssertEqual(PostgresSettings.redact("postgresql://u:secret@h:5432/db?sslmode=require&password=x"),
                       "postgresql://u:***@h:5432/db?sslmode=require&password=***")
        XCTAssertEqual(PostgresSettings.redact("postgres://u@h/db"), "postgres://u@h/db")
        XCTAssertEqual(PostgresSettings.redact("postgresql:///db"), "postgresql:///db")
        XCTAssertTrue(PostgresSettings.isURI("postgresql://h/db"))
        XCTAssertFalse(PostgresSettings.isURI("./ridepush.db"))
    }

    func testNothingListeningIsAConnectErrorNamingTheStore() throws {
        var s = PostgresSettings(uri: "postgresql://postgres@127.0.0.1:1/x")
        s.connectTimeoutMillis = 2_000
        let e = storeError { () throws(StoreError) in try PostgresStore(s) }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.hasPrefix("ride store postgresql://postgres@127.0.0.1:1/x: cannot connect: ") ?? false, e?.message ?? "")
        XCTAssertTrue(e?.message.contains("Connection refused") ?? false, e?.message ?? "")
    }

    /// A server that stops answering (its backend SIGSTOPped: the socket stays open and
    /// TCP is happy) costs a call its deadline, not forever; the store then reconnects.
    func testAStoppedServerTimesOutInsteadOfHanging() throws {
        var s = pg.settings(database: db)
        s.statementTimeoutMillis = 500
        let store = try PostgresStore(s)
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        let backend = try store.connection().backendPID
        XCTAssertGreaterThan(backend, 0)
        kill(backend, SIGSTOP)
        let began = ContinuousClock.now
        let e = storeError { () throws(StoreError) in try store.ride("r") }
        let took = ContinuousClock.now - began
        kill(backend, SIGCONT)
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.contains("no answer from PostgreSQL within the deadline") ?? false, e?.message ?? "")
        XCTAssertGreaterThanOrEqual(took, .milliseconds(2_500))  // statement_timeout + 2 s margin
        XCTAssertLessThan(took, .milliseconds(6_000))
        XCTAssertFalse(store.isConnected)
        XCTAssertEqual(try store.ride("r")?.journal, [.start(at: t0)])  // a new connection
        XCTAssertTrue(store.isConnected)
    }

    // MARK: schema

    func testNewDatabaseGetsTheCurrentSchemaOnceAndANewerOneIsRefused() throws {
        let a = try open()
        let b = try open()  // a second node on the same database changes nothing
        let v = try pg.admin("SELECT string_agg(version::text, ',' ORDER BY version) FROM ridepush.schema_version", database: db)
        XCTAssertEqual(v.text(0, 0), "1,2,3,4,5,6,7,8")
        a.close()
        b.close()
        try pg.admin("INSERT INTO ridepush.schema_version (version) VALUES (99)", database: db)
        let e = storeError { () throws(StoreError) in try PostgresStore(pg.settings(database: db)) }
        XCTAssertEqual(e?.kind, .newerSchema)
        XCTAssertEqual(e?.message, "ride store postgresql://postgres@127.0.0.1:\(pg.port)/\(db!): schema version 99 is newer than this RidePush supports (version 8); upgrade RidePush on every node, or use another database")
    }

    func testSomeoneElsesRidepushSchemaIsRefusedAndOtherTablesAreLeftAlone() throws {
        try pg.admin("CREATE TABLE public.invoices (id int); CREATE SCHEMA ridepush; CREATE TABLE ridepush.stuff (x int)", database: db)
        let e = storeError { () throws(StoreError) in try PostgresStore(pg.settings(database: db)) }
        XCTAssertEqual(e?.kind, .corrupt)
        XCTAssertEqual(e?.message, "ride store postgresql://postgres@127.0.0.1:\(pg.port)/\(db!): schema ridepush exists but is not a RidePush store (no schema_version table; has stuff)")
        try pg.admin("DROP SCHEMA ridepush CASCADE", database: db)
        _ = try open()
        XCTAssertEqual(try pg.admin("SELECT count(*) FROM public.invoices", database: db).int(0, 0), 0)
    }

    // MARK: across nodes

    /// Two nodes that both saw the ride at seq 1 race to append entry 2: the first holds the
    /// ride's row lock until it commits; the second waits on it, then reads the committed row
    /// and is refused (its reply not recorded either).
    func testTwoNodesAppendingTheSameSeqHaveExactlyOneWinner() throws {
        nonisolated(unsafe) let a = try open()
        nonisolated(unsafe) let b = try open()
        try a.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        let locked = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        let aDone = DispatchSemaphore(value: 0), bDone = DispatchSemaphore(value: 0)
        a.beforeCommit = {
            locked.signal()
            _ = go.wait(timeout: .now() + 10)
        }
        nonisolated(unsafe) var aResult: Result<[WriteResult], StoreError>?
        nonisolated(unsafe) var bResult: Result<[WriteResult], StoreError>?
        let loser = ReplyRecord(key: ReplyKey(scope: "u", id: "b-1"), request: "pause r", bytes: [1, 2], at: t0)
        Thread.detachNewThread {
            aResult = Result { () throws(StoreError) in
                try a.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .end(at: t0 + 5, reason: .rider, metres: 1)), reply: nil)])
            }
            aDone.signal()
        }
        XCTAssertEqual(locked.wait(timeout: .now() + 10), .success)
        Thread.detachNewThread {
            bResult = Result { () throws(StoreError) in
                try b.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 6)), reply: loser)])
            }
            bDone.signal()
        }
        XCTAssertEqual(bDone.wait(timeout: .now() + 0.5), .timedOut)  // b waits on a's row lock
        go.signal()
        XCTAssertEqual(aDone.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(bDone.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(try aResult?.get(), [.written])
        XCTAssertEqual(try bResult?.get(), [.refused(StoreError(.notAllowed, "ride r: ride has ended; cannot pause"))])
        XCTAssertEqual(try b.ride("r")?.journal, [.start(at: t0), .end(at: t0 + 5, reason: .rider, metres: 1)])
        XCTAssertNil(try b.reply(for: loser.key))
        let row = try pg.admin("SELECT last_seq, state, ended_at FROM ridepush.rides", database: db)
        XCTAssertEqual([row.int(0, 0), row.int(0, 2)], [2, t0 + 5])
        XCTAssertEqual(row.text(0, 1), "ended")
    }

    /// The same race when both are allowed (a pause and an end of a riding ride): still one
    /// winner, the other refused by seq, because it was decided from a state that is gone.
    func testAnAppendDecidedFromAStaleSeqIsRefusedEvenIfItWouldApply() throws {
        let a = try open()
        let b = try open()
        try a.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        XCTAssertEqual(try a.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 1_000)), reply: nil)]), [.written])
        XCTAssertEqual(try b.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .end(at: t0 + 2_000, reason: .rider, metres: 0)), reply: nil)]),
                       [.refused(StoreError(.notNext, "ride r: entry 2 is not the next one (the last is 2)"))])
        XCTAssertEqual(try b.commit([.append(JournalEntry(ride: "r", seq: 3, transition: .end(at: t0 + 2_000, reason: .rider, metres: 0)), reply: nil)]), [.written])
        XCTAssertEqual(try a.ride("r")?.journal, [.start(at: t0), .pause(at: t0 + 1_000), .end(at: t0 + 2_000, reason: .rider, metres: 0)])
        let e = storeError { () throws(StoreError) in try b.create(id: "r", planID: "q", owner: nil, limit: nil, startedAt: t0, reply: nil) }
        XCTAssertEqual(e?.message, "ride r already exists")
    }

    /// A start whose id is taken leaves its reply out too (the reply goes in first; the
    /// refusal takes it back), and a start whose reply key is taken creates no ride.
    func testCreateRefusalsLeaveNothingBehind() throws {
        let store = try open()
        let k1 = ReplyKey(scope: "u\u{0}1", id: "q\u{0}1")  // bytea keys: a NUL is fine
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: ReplyRecord(key: k1, request: "start r", bytes: [9], at: t0))
        let k2 = ReplyKey(scope: "u", id: "q2")
        var e = storeError { () throws(StoreError) in try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: ReplyRecord(key: k2, request: "start r", bytes: [8], at: t0)) }
        XCTAssertEqual(e?.message, "ride r already exists")
        XCTAssertNil(try store.reply(for: k2))
        e = storeError { () throws(StoreError) in try store.create(id: "s", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: ReplyRecord(key: k1, request: "start s", bytes: [7], at: t0)) }
        XCTAssertEqual(e?.message, "a reply is already recorded for request q\u{0}1 of u\u{0}1")
        XCTAssertNil(try store.ride("s"))
        XCTAssertEqual(try store.reply(for: k1), StoredReply(request: "start r", bytes: [9]))
        // Text columns cannot hold a NUL: refused before PostgreSQL, as a conflict.
        e = storeError { () throws(StoreError) in try store.create(id: "n", planID: "p", owner: "a\u{0}b", limit: nil, startedAt: t0, reply: nil) }
        XCTAssertEqual(e?.kind, .conflict)
        XCTAssertTrue(e?.message.hasSuffix("PostgreSQL text cannot hold a NUL character") ?? false, e?.message ?? "")
    }

    func testEveryCommitNotifiesRideAndSeqAndNothingIsNotifiedForARefusal() throws {
        let listener = try PostgresConnection(pg.settings(database: db))
        try listener.query("LISTEN \(journalChannel)")
        let store = try open()
        try store.create(id: "r-1", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.append(ride: "r-1", .pause(at: t0 + 1), reply: nil)
        _ = storeError { () throws(StoreError) in try store.append(ride: "r-1", .pause(at: t0 + 2), reply: nil) }
        try store.create(id: "a:b", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        var got: [PostgresNotification] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while got.count < 3 && ContinuousClock.now < deadline { got += try listener.notifications(waitingUpTo: 200) }
        got += try listener.notifications(waitingUpTo: 300)
        XCTAssertEqual(got.map(\.payload), ["r-1:1", "r-1:2", "a:b:1"])
        XCTAssertEqual(Set(got.map(\.channel)), ["ridepush"])
        XCTAssertEqual(Set(got.map(\.senderPID)), [try store.connection().backendPID])
    }

    /// A group commit sends one NOTIFY naming every write (`ride:seq` a line); a group with a
    /// write PostgreSQL refuses goes the checked way: the others written, the refusal worded,
    /// and only what was written is notified.
    func testAGroupNotifiesOnceAndARefusedWriteLeavesTheRestWritten() throws {
        let listener = try PostgresListener(pg.settings(database: db))
        let store = try open()
        let other = try open()
        try other.create(id: "x", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try other.append(ride: "x", .pause(at: t0 + 1), reply: nil)
        XCTAssertEqual(try store.commit([
            .create(NewRide(id: "a:1", planID: "p", owner: nil, limit: nil, startedAt: t0), reply: nil),
            .create(NewRide(id: "b", planID: "p", owner: nil, limit: nil, startedAt: t0), reply: nil),
            .append(JournalEntry(ride: "a:1", seq: 2, transition: .pause(at: t0 + 2)), reply: nil),
        ]), [.written, .written, .written])
        // "x" is at seq 2 already: this node decided from seq 1, so its append is refused.
        XCTAssertEqual(try store.commit([
            .append(JournalEntry(ride: "b", seq: 2, transition: .pause(at: t0 + 3)), reply: nil),
            .append(JournalEntry(ride: "x", seq: 2, transition: .end(at: t0 + 3, reason: .rider, metres: 0)), reply: nil),
        ]), [.written, .refused(StoreError(.notNext, "ride x: entry 2 is not the next one (the last is 2)"))])
        var got: [PostgresNotification] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while got.count < 4 && ContinuousClock.now < deadline { got += try listener.wait(millis: 200) }
        got += try listener.wait(millis: 300)
        let mine = got.filter { $0.senderPID == store.ownBackend.value }.map(\.payload)
        XCTAssertEqual(mine, ["a:1:1\nb:1\na:1:2", "b:2"])
        XCTAssertEqual(PostgresListener.hints(mine[0]).map { "\($0.ride)=\($0.seq)" }, ["a:1=1", "b=1", "a:1=2"])
        XCTAssertEqual(try store.ride("x")?.journal, [.start(at: t0), .pause(at: t0 + 1)])
        XCTAssertEqual(try store.ride("b")?.journal, [.start(at: t0), .pause(at: t0 + 3)])
    }

    /// A group's creates and appends go in as one statement over arrays (its SQL is prepared
    /// once on the session): starts, a pause, a resume and an end of other rides, replies
    /// whose keys and request hold quotes, backslashes, commas, braces and a NUL, an owner
    /// and a limit or none. Everything reads back as written; the end sets the ride's end.
    func testAGroupsCreatesAndAppendsAreOneStatement() throws {
        let store = try open()
        try store.create(id: "p", planID: "plan", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.create(id: "q", planID: "plan", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.append(ride: "q", .pause(at: t0 + 1), reply: nil)
        try store.create(id: "e", planID: "plan", owner: nil, limit: nil, startedAt: t0, reply: nil)
        let odd = ReplyKey(scope: "u \"x\" \\ {a,b}", id: "i\u{0},\"NULL\"")
        let plain = ReplyKey(scope: "u", id: "2")
        XCTAssertEqual(try store.commit([
            .create(NewRide(id: "n \"1\"", planID: "pl,an", owner: "o\\w", limit: 90, startedAt: t0 + 10),
                    reply: ReplyRecord(key: odd, request: "start \"n\" {1}", bytes: [0, 1, 255], at: t0 + 10)),
            .append(JournalEntry(ride: "p", seq: 2, transition: .pause(at: t0 + 11)), reply: ReplyRecord(key: plain, request: "pause p", bytes: [7], at: t0 + 11)),
            .append(JournalEntry(ride: "q", seq: 3, transition: .resume(at: t0 + 12)), reply: nil),
            .append(JournalEntry(ride: "e", seq: 2, transition: .end(at: t0 + 13, reason: .forced, metres: 1234)), reply: nil),
            .create(NewRide(id: "m", planID: "plan", owner: nil, limit: nil, startedAt: t0 + 14), reply: nil),
        ]), [.written, .written, .written, .written, .written])
        let n = try XCTUnwrap(try store.ride("n \"1\""))
        XCTAssertEqual([n.planID, n.owner], ["pl,an", "o\\w"])
        XCTAssertEqual(n.limit, 90)
        XCTAssertEqual(n.journal, [.start(at: t0 + 10)])
        XCTAssertEqual(try store.ride("p")?.journal, [.start(at: t0), .pause(at: t0 + 11)])
        XCTAssertEqual(try store.ride("q")?.journal, [.start(at: t0), .pause(at: t0 + 1), .resume(at: t0 + 12)])
        XCTAssertEqual(try store.ride("e")?.journal, [.start(at: t0), .end(at: t0 + 13, reason: .forced, metres: 1234)])
        XCTAssertEqual(try store.ride("m")?.journal, [.start(at: t0 + 14)])
        XCTAssertEqual(try store.reply(for: odd), StoredReply(request: "start \"n\" {1}", bytes: [0, 1, 255]))
        XCTAssertEqual(try store.reply(for: plain), StoredReply(request: "pause p", bytes: [7]))
        let rows = try pg.admin("SELECT id, last_seq, state, coalesce(ended_at, 0) FROM ridepush.rides ORDER BY id", database: db)
        XCTAssertEqual((0..<rows.count).map { "\(rows.text($0, 0)) \(rows.text($0, 1)) \(rows.text($0, 2)) \(rows.text($0, 3))" },
                       ["e 2 ended \(t0 + 13)", "m 1 riding 0", "n \"1\" 1 riding 0", "p 2 paused 0", "q 3 riding 0"])
        // In batch order in the journal (position), as the per-write statements wrote them.
        let order = try pg.admin("SELECT ride_id FROM ridepush.journal WHERE at >= \(t0 + 10) ORDER BY position", database: db)
        XCTAssertEqual((0..<order.count).map { order.text($0, 0) }, ["n \"1\"", "p", "q", "e", "m"])
        let prepared = try store.connection().query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH c AS%'")
        XCTAssertEqual(prepared.int(0, 0), 1)
    }

    /// Two writes of one ride in a group (a start and its pause; a pause and its resume) cannot
    /// be one multi-row statement: they go one statement each, still in one round trip.
    /// A state the row is not in (a pause of a paused ride, at the right seq) fails the group
    /// statement in SQL and the checked path words the refusal; the rest is written.
    func testAGroupWithTwoWritesOfARideOrAWrongStateStillCommits() throws {
        let store = try open()
        try store.create(id: "b", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        XCTAssertEqual(try store.commit([
            .create(NewRide(id: "a", planID: "p", owner: nil, limit: nil, startedAt: t0), reply: nil),
            .append(JournalEntry(ride: "a", seq: 2, transition: .pause(at: t0 + 1)), reply: nil),
            .append(JournalEntry(ride: "b", seq: 2, transition: .pause(at: t0 + 2)), reply: nil),
            .append(JournalEntry(ride: "b", seq: 3, transition: .resume(at: t0 + 3)), reply: nil),
        ]), [.written, .written, .written, .written])
        XCTAssertEqual(try store.ride("a")?.journal, [.start(at: t0), .pause(at: t0 + 1)])
        XCTAssertEqual(try store.ride("b")?.journal, [.start(at: t0), .pause(at: t0 + 2), .resume(at: t0 + 3)])
        let k = ReplyKey(scope: "u", id: "w")
        XCTAssertEqual(try store.commit([
            .append(JournalEntry(ride: "a", seq: 3, transition: .pause(at: t0 + 4)), reply: ReplyRecord(key: k, request: "pause a", bytes: [1], at: t0 + 4)),
            .create(NewRide(id: "c", planID: "p", owner: nil, limit: nil, startedAt: t0 + 4), reply: nil),
        ]), [.refused(StoreError(.notAllowed, "ride a: ride is paused; cannot pause")), .written])
        XCTAssertNil(try store.reply(for: k))
        XCTAssertEqual(try store.ride("a")?.journal, [.start(at: t0), .pause(at: t0 + 1)])
        XCTAssertEqual(try store.ride("c")?.journal, [.start(at: t0 + 4)])
    }

    /// A batch of hints is read in one statement: each ride's entries after its own seq.
    func testEntriesOfSeveralRidesAfterTheirOwnSeqs() throws {
        let store = try open()
        try store.create(id: "a", planID: "p", owner: "u", limit: 60, startedAt: t0, reply: nil)
        try store.append(ride: "a", .pause(at: t0 + 1), reply: nil)
        try store.append(ride: "a", .resume(at: t0 + 2), reply: nil)
        try store.create(id: "b", planID: "q", owner: nil, limit: nil, startedAt: t0, reply: nil)
        let got = try store.entries(after: [(ride: "b", seq: 0), (ride: "a", seq: 1), (ride: "ghost", seq: 0)])
        XCTAssertEqual(got.map { "\($0.ride):\($0.seq):\($0.entry.transition.kind)" }, ["a:2:pause", "a:3:resume", "b:1:start"])
        XCTAssertEqual(got.last?.planID, "q")
        XCTAssertEqual(got.first?.limit, 60)
        XCTAssertEqual(try store.entries(after: []), [])
    }

    /// The catch-up feed returns an entry only once every older transaction has finished,
    /// so an entry that commits after a newer one is still read, in order, exactly once.
    func testFeedNeverSkipsAnEntryThatCommitsLate() throws {
        let store = try open()
        let reader = try PostgresConnection(pg.settings(database: db))
        let label = "feed"
        var cursor = try PostgresJournal.startCursor(reader, label: label)
        try store.create(id: "early", planID: "p", owner: "u", limit: 60, startedAt: t0, reply: nil)

        let slow = try PostgresConnection(pg.settings(database: db))
        try slow.query("BEGIN")
        XCTAssertEqual(try PostgresJournal.create(slow, NewRide(id: "slow", planID: "p", owner: nil, limit: nil, startedAt: t0 + 1), reply: nil), .written)
        try store.create(id: "fast", planID: "p", owner: nil, limit: nil, startedAt: t0 + 2, reply: nil)
        try store.append(ride: "early", .end(at: t0 + 3, reason: .timeLimit, metres: 0), reply: nil)

        var read = try PostgresJournal.feed(reader, after: cursor, limit: 100, label: label)
        XCTAssertEqual(read.entries, [FeedEntry(JournalEntry(ride: "early", seq: 1, transition: .start(at: t0)), planID: "p", owner: "u", limit: 60)])
        cursor = read.cursor
        try slow.query("COMMIT")
        read = try PostgresJournal.feed(reader, after: cursor, limit: 2, label: label)
        XCTAssertEqual(read.entries.map { "\($0.ride):\($0.seq)" }, ["slow:1", "fast:1"])
        read = try PostgresJournal.feed(reader, after: read.cursor, limit: 100, label: label)
        XCTAssertEqual(read.entries, [FeedEntry(JournalEntry(ride: "early", seq: 2, transition: .end(at: t0 + 3, reason: .timeLimit, metres: 0)),
                                                planID: "p", owner: "u", limit: 60)])
        XCTAssertEqual(try PostgresJournal.feed(reader, after: read.cursor, limit: 100, label: label).entries, [])
        XCTAssertEqual(try PostgresJournal.entries(reader, ride: "early", after: 1, label: label).map(\.seq), [2])
    }

    func testListenerHearsCommitsWithTheirSenderAndNoticesBeingTerminated() throws {
        let listener = try PostgresListener(pg.settings(database: db))
        let store = try open()
        try store.create(id: "r:1", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        var got: [PostgresNotification] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while got.isEmpty && ContinuousClock.now < deadline { got = try listener.wait(millis: 200) }
        XCTAssertEqual(got.map(\.payload), ["r:1:1"])
        XCTAssertEqual(got.first?.senderPID, store.ownBackend.value)
        XCTAssertNotEqual(store.ownBackend.value, 0)
        XCTAssertEqual(PostgresListener.hint("r:1:1")?.ride, "r:1")
        XCTAssertEqual(PostgresListener.hint("r:1:1")?.seq, 1)
        XCTAssertNil(PostgresListener.hint("r-1"))
        XCTAssertNil(PostgresListener.hint(":3"))
        XCTAssertNil(PostgresListener.hint("r:0"))
        let app = try pg.admin("SELECT application_name FROM pg_stat_activity WHERE pid = \(listener.backendPID)")
        XCTAssertEqual(app.text(0, 0), "ridepush-listen")

        try pg.admin("SELECT pg_terminate_backend(\(listener.backendPID))")
        var failure: StoreError?
        let until = ContinuousClock.now + .seconds(5)
        while failure == nil && ContinuousClock.now < until {
            failure = storeError { () throws(StoreError) in _ = try listener.wait(millis: 200) }
        }
        XCTAssertEqual(failure?.kind, .unavailable)
        XCTAssertTrue(failure?.message.contains("connection lost waiting for notifications") ?? false, failure?.message ?? "")
        XCTAssertFalse(listener.isOpen)
        XCTAssertTrue(try PostgresListener(pg.settings(database: db)).isOpen)
    }

    /// While the server is down every call fails fast (the first with libpq's words, the
    /// next ones without another connect until the backoff passes), and health says so; once
    /// it is back the store reconnects by itself.
    func testServerGoneThenBackIsUnavailableThenFine() throws {
        let clock = ManualClock()
        let store = try open(clock)
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        let pid = store.ownBackend.value
        // Gone before the node writes again: a group sent while the session is still going
        // away would lose its COMMIT with it, and that outcome is read back
        // (PostgresFailoverTests), not answered at once.
        try terminate(pid)
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS false")
        let began = ContinuousClock.now
        var e = storeError { () throws(StoreError) in try store.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 1)), reply: nil)]) }
        XCTAssertEqual(e?.kind, .unavailable)
        // The session was terminated while idle: seen before the group was sent, so nothing
        // was in doubt and nothing needed reading back.
        XCTAssertEqual(store.settles.unknown.load(ordering: .relaxed) + store.settles.notCommitted.load(ordering: .relaxed), 0)
        XCTAssertFalse(store.health.isUp)
        e = storeError { () throws(StoreError) in try store.ride("r") }
        XCTAssertEqual(e?.kind, .unavailable)
        XCTAssertTrue(e?.message.contains("database \"\(db!)\" is not currently accepting connections") ?? false, e?.message ?? "")
        e = storeError { () throws(StoreError) in try store.ride("r") }
        XCTAssertTrue(e?.message.contains("PostgreSQL unreachable (") ?? false, e?.message ?? "")
        XCTAssertTrue(e?.message.contains("; next attempt in 250 ms") ?? false, e?.message ?? "")
        XCTAssertLessThan(ContinuousClock.now - began, .seconds(2))
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS true")
        // Reachable again, but the backoff has not passed: still no connect.
        clock.advance(millis: 249)
        e = storeError { () throws(StoreError) in try store.ride("r") }
        XCTAssertTrue(e?.message.contains("; next attempt in 1 ms") ?? false, e?.message ?? "")
        clock.advance(millis: 1)
        XCTAssertEqual(try store.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 1)), reply: nil)]), [.written])
        XCTAssertTrue(store.health.isUp)
    }

    /// The worker's probe: `SELECT 1`, connecting at once even inside the connect backoff
    /// (the probe keeps its own), so the store is seen back at the first probe after it is.
    func testProbeIsASelectOneThatSkipsTheConnectBackoff() throws {
        let clock = ManualClock()
        let store = try open(clock)
        XCTAssertNil(storeError { () throws(StoreError) in try store.probe() })
        XCTAssertTrue(store.reachable)
        try pg.admin("SELECT pg_terminate_backend(\(store.ownBackend.value))")
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS false")
        XCTAssertEqual(storeError { () throws(StoreError) in try store.probe() }?.kind, .unavailable)
        XCTAssertFalse(store.reachable)
        let e = storeError { () throws(StoreError) in try store.probe() }
        XCTAssertTrue(e?.message.contains("is not currently accepting connections") ?? false, "a real connect: \(e?.message ?? "")")
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS true")
        // No time passed on the store's clock: an ordinary read still waits out its backoff.
        XCTAssertTrue(storeError { () throws(StoreError) in try store.ride("x") }?.message.contains("next attempt in") ?? false)
        XCTAssertNil(storeError { () throws(StoreError) in try store.probe() })
        XCTAssertTrue(store.reachable)
        XCTAssertNil(try store.ride("x"))
    }

    /// Each failed connect doubles the wait before the next one, 250 ms up to 5 s; calls in
    /// between fail without connecting and say how long is left. Once a connect works the
    /// backoff starts from 250 ms again.
    func testReconnectBackoffDoublesToFiveSeconds() throws {
        let clock = ManualClock()
        let store = try open(clock)
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        func attempt() -> String { storeError { () throws(StoreError) in _ = try store.ride("r") }?.message ?? "no error" }
        func cutOff() throws {
            let pid = store.ownBackend.value
            try pg.admin("SELECT pg_terminate_backend(\(pid))")
            try waitUntil(timeout: 5, "backend \(pid) to be gone") {
                try pg.admin("SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid)").int(0, 0) == 0
            }
            try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS false")
            // The closed session is noticed without sending on it (stillThere): the first
            // attempt is the first connect, at once, refused with libpq's words.
            let first = attempt()
            XCTAssertTrue(first.contains("database \"\(db!)\" is not currently accepting connections"), first)
            XCTAssertFalse(first.contains("next attempt"), first)
        }
        try cutOff()
        for wait: Int64 in [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000] {
            XCTAssertTrue(attempt().hasSuffix("; next attempt in \(wait) ms"), "before waiting \(wait) ms")
            clock.advance(millis: wait - 1)
            XCTAssertTrue(attempt().hasSuffix("; next attempt in 1 ms"), "1 ms before \(wait) ms")
            clock.advance(millis: 1)
            let tried = attempt()  // a real connect, refused again
            XCTAssertTrue(tried.contains("is not currently accepting connections"), tried)
            XCTAssertFalse(tried.contains("next attempt"), tried)
        }
        XCTAssertFalse(store.health.isUp)
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS true")
        clock.advance(millis: 5_000)
        XCTAssertEqual(try store.ride("r")?.seq, 1)
        XCTAssertTrue(store.health.isUp)
        // A connect that worked starts the next outage's backoff from 250 ms again.
        try cutOff()
        XCTAssertTrue(attempt().hasSuffix("; next attempt in 250 ms"))
        try pg.admin("ALTER DATABASE \(db!) WITH ALLOW_CONNECTIONS true")
    }

    /// A pipeline's statements with parameters are prepared once per session and executed by
    /// name after that; a prepare skipped by an earlier error is made next time, one rolled
    /// back with its transaction stays; past the bound, statements still run unprepared.
    func testPipelinedStatementsArePreparedOncePerSession() throws {
        let c = try PostgresConnection(pg.settings(database: db))
        func names() throws -> [String] {
            let r = try c.query("SELECT name || '=' || statement FROM pg_prepared_statements ORDER BY name")
            return (0..<r.count).map { r.text($0, 0) }
        }
        let add = (sql: "SELECT $1::integer + 1", params: [PGValue.int(41)])
        let twice = (sql: "SELECT $1::integer * 2", params: [PGValue.int(21)])
        var out = try c.pipeline([add, add, ("SELECT 7", [])])
        XCTAssertEqual(out.map { $0.int(0, 0) }, [42, 42, 7])
        XCTAssertEqual(try names(), ["ridepush_1=SELECT $1::integer + 1"])
        // An error before it: the prepare is skipped, so it is not taken as made.
        XCTAssertNotNil(pgError { () throws(PostgresError) in _ = try c.pipeline([("SELECT 1/0", []), twice]) })
        XCTAssertEqual(try names(), ["ridepush_1=SELECT $1::integer + 1"])
        try c.query("BEGIN")
        out = try c.pipeline([twice, add])
        try c.query("ROLLBACK")
        XCTAssertEqual(out.map { $0.int(0, 0) }, [42, 42])
        XCTAssertEqual(try names(), ["ridepush_1=SELECT $1::integer + 1", "ridepush_2=SELECT $1::integer * 2"])
        for k in 3...20 { _ = try c.pipeline([(sql: "SELECT $1::integer + \(k)", params: [PGValue.int(0)])]) }
        XCTAssertEqual(try names().count, PostgresConnection.maxPrepared)
        XCTAssertEqual(try c.pipeline([(sql: "SELECT $1::integer + 100", params: [PGValue.int(1)])]).map { $0.int(0, 0) }, [101])
        // A new session starts with none.
        let d = try PostgresConnection(pg.settings(database: db))
        XCTAssertEqual(try d.query("SELECT count(*) FROM pg_prepared_statements").int(0, 0), 0)
    }

    /// A group's reply lookups in one round trip: answered from what was read ahead (even a
    /// key known not to be recorded) until the group commits, then from PostgreSQL again.
    func testPrefetchedRepliesAnswerUntilTheGroupCommits() throws {
        let store = try open(ManualClock())
        let k1 = ReplyKey(scope: "u\u{0}", id: "q1"), k2 = ReplyKey(scope: "u", id: "q2"), k3 = ReplyKey(scope: "u", id: "q3")
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: ReplyRecord(key: k1, request: "start r", bytes: [0, 7], at: t0))
        store.prefetchReplies([k1, k2])
        // Changed behind the store's back: what was read ahead is answered as read, what was
        // not is a real read (a dead session would now just be reopened, so that proves nothing).
        try pg.admin("DELETE FROM ridepush.replies; INSERT INTO ridepush.replies VALUES ('u', 'q3', 'late', '\\x09', 0)", database: db)
        XCTAssertEqual(try store.reply(for: k1), StoredReply(request: "start r", bytes: [0, 7]))
        XCTAssertNil(try store.reply(for: k2))
        XCTAssertEqual(try store.reply(for: k3), StoredReply(request: "late", bytes: [9]))
        XCTAssertEqual(try store.commit([.append(JournalEntry(ride: "r", seq: 2, transition: .pause(at: t0 + 1)),
                                                 reply: ReplyRecord(key: k2, request: "pause r", bytes: [2], at: t0 + 1))]), [.written])
        XCTAssertEqual(try store.reply(for: k2), StoredReply(request: "pause r", bytes: [2]))
    }

    /// Ends a backend and waits (at most 5 s) until it is gone: pg_terminate_backend only
    /// signals it, and a read sent before it has gone could still be answered.
    func terminate(_ pid: Int32) throws {
        try pg.admin("SELECT pg_terminate_backend(\(pid))")
        try waitUntil(timeout: 5, "backend \(pid) to be gone") {
            try pg.admin("SELECT count(*) FROM pg_stat_activity WHERE pid = \(pid)").int(0, 0) == 0
        }
    }

    /// A group's unknown rides are read in one round trip: after it, with the connection gone,
    /// those ids (found or not) are still answered; the next commit drops what was read.
    func testAGroupsRidesAreReadAheadOnce() throws {
        let store = try open(ManualClock())
        try store.create(id: "a \"1\"", planID: "p", owner: "u", limit: 60, startedAt: t0, reply: nil)
        try store.append(ride: "a \"1\"", .pause(at: t0 + 5), reply: nil)
        store.prefetchRides(["a \"1\"", "ghost"])
        // Changed behind the store's back: the rides read ahead are answered as read, another
        // is a real read (see testPrefetchedRepliesAnswerUntilTheGroupCommits).
        try pg.admin("UPDATE ridepush.rides SET owner = 'someone else'", database: db)
        let a = try XCTUnwrap(try store.ride("a \"1\""))
        XCTAssertEqual(a.journal, [.start(at: t0), .pause(at: t0 + 5)])
        XCTAssertEqual(a.owner, "u")
        XCTAssertNil(try store.ride("ghost"))
        XCTAssertNil(try store.ride("other"))
        XCTAssertEqual(try store.commit([.append(JournalEntry(ride: "a \"1\"", seq: 3, transition: .resume(at: t0 + 9)), reply: nil)]), [.written])
        XCTAssertEqual(try store.ride("a \"1\"")?.journal, [.start(at: t0), .pause(at: t0 + 5), .resume(at: t0 + 9)])
    }

    /// A journal edited by hand so it no longer replays is reported, not guessed at.
    func testDamagedJournalIsReportedAsCorrupt() throws {
        let store = try open()
        try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.append(ride: "r", .pause(at: t0 + 1), reply: nil)
        try pg.admin("UPDATE ridepush.journal SET kind = 'resume' WHERE seq = 2", database: db)
        let e = storeError { () throws(StoreError) in try store.ride("r") }
        XCTAssertEqual(e?.kind, .corrupt)
        XCTAssertEqual(e?.message, "ride store postgresql://postgres@127.0.0.1:\(pg.port)/\(db!): the journal of ride r does not replay (start, resume; recorded seq 2)")
    }
}

func pgError(_ body: () throws(PostgresError) -> Void) -> PostgresError? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}
