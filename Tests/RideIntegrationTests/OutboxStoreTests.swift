import Foundation
import Synchronization
import XCTest
import RideCore
import RideWebhooks
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

let endpoints = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]

/// The outbox events of one transition, one per endpoint, with a body naming them.
func events(_ ride: String, _ type: String, at: UnixMillis, to targets: [String] = endpoints) -> [OutboxEvent] {
    let id = "evt_\(ride)_\(type)"
    return targets.map { OutboxEvent(eventID: id, type: type, rideID: ride, endpoint: $0, created: at,
                                     body: Array("{\"id\":\"\(id)\",\"type\":\"\(type)\"}".utf8)) }
}

func start(_ id: String, at: UnixMillis = t0, to targets: [String] = endpoints) -> StoreWrite {
    .create(NewRide(id: id, planID: "p", owner: nil, limit: nil, startedAt: at,
                    outbox: events(id, "ride.started", at: at, to: targets)), reply: nil)
}

func step(_ id: String, _ seq: Int64, _ t: RideTransition, to targets: [String] = endpoints) -> StoreWrite {
    let type = switch t {
    case .start: "ride.started"
    case .pause: "ride.paused"
    case .resume: "ride.resumed"
    case .end: "ride.ended"
    }
    return .append(JournalEntry(ride: id, seq: seq, transition: t, outbox: events(id, type, at: t.at, to: targets)), reply: nil)
}

/// The outbox rows written with transitions, read back through each store's `WebhookOutbox`:
/// memory (a `MemoryOutbox` the store hands events to), an SQLite file (its own connection)
/// and PostgreSQL (its own connection, with leases).
final class OutboxStoreTests: StoreDirectoryTestCase {
    typealias Kind = OutboxStoreKind
    /// The PostgreSQL outbox's clock (lease and due instants).
    let pgClock = ManualClock(t0)

    func forEachStore(_ body: (Kind, any RideStore, any WebhookOutbox) throws -> Void) throws {
        try forEachOutboxStore(pgClock: pgClock, body)
    }

    func testAKeptWriteLeavesExactlyItsRowsAndARefusedOneNone() throws {
        try forEachStore { kind, store, outbox in
            // Several writes: SQLite's multi-row path, PostgreSQL's pipeline.
            XCTAssertEqual(try store.commit([start("a"), start("b", at: t0 + 1, to: [endpoints[0]])]), [.written, .written], kind.rawValue)
            // A refusal among them: SQLite one write at a time, PostgreSQL refuses it before sending.
            let results = try store.commit([start("a", at: t0 + 2), step("a", 2, .pause(at: t0 + 3)), step("zz", 2, .pause(at: t0 + 3))])
            XCTAssertEqual(results.map { $0 == .written }, [false, true, false], kind.rawValue)
            let rows = all(outbox)
            XCTAssertEqual(rows.map(\.eventID), ["evt_a_ride.started", "evt_a_ride.started", "evt_b_ride.started",
                                                 "evt_a_ride.paused", "evt_a_ride.paused"], kind.rawValue)
            XCTAssertEqual(rows.map(\.endpoint), [endpoints[0], endpoints[1], endpoints[0], endpoints[0], endpoints[1]], kind.rawValue)
            XCTAssertEqual(rows.first?.body, Array("{\"id\":\"evt_a_ride.started\",\"type\":\"ride.started\"}".utf8), kind.rawValue)
            XCTAssertEqual(rows.first?.attempts, 0)
            XCTAssertEqual(rows.first?.nextAttemptAt, t0)
            XCTAssertEqual(Set(rows.map(\.seq)).count, 5, "\(kind): each row its own seq")
            XCTAssertEqual(outbox.stats(), OutboxStats(pending: 5, oldestPendingCreated: t0, dead: 0), kind.rawValue)
        }
    }

    func testAGroupThatFailsAsAWholeLeavesNoRowAndNoTransition() throws {
        // The outbox insert itself fails for ride "boom", after the other write's rows went in:
        // if the rows were not in the transition's transaction, "x" or its rows would stay.
        let sqlite = try SQLiteStore(path: path)
        try sqlite.db.exec("""
            CREATE TRIGGER boom BEFORE INSERT ON webhook_outbox WHEN NEW.ride = 'boom'
            BEGIN SELECT RAISE(ABORT, 'boom'); END
            """)
        let pg = try TestPostgres.shared()
        let settings = pg.settings(database: try pg.createDatabase())
        let postgres = try PostgresStore(settings)
        try postgres.connection().query("""
            CREATE FUNCTION ridepush.boom() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.ride = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER boom BEFORE INSERT ON ridepush.webhook_outbox FOR EACH ROW EXECUTE FUNCTION ridepush.boom();
            """)
        for (store, outbox) in [(sqlite as any RideStore, try SQLiteOutbox(path: path) as any WebhookOutbox),
                                (postgres, PostgresOutbox(settings, clock: ManualClock(t0)))] {
            for batch in [[start("x"), start("boom")], [start("boom")]] {
                let error = storeError { () throws(StoreError) in try store.commit(batch) }
                XCTAssertEqual(error?.kind, .unavailable, "\(type(of: store)): \(String(describing: error))")
                XCTAssertNil(try store.ride("x"))
                XCTAssertNil(try store.ride("boom"))
                XCTAssertEqual(outbox.stats().pending, 0)
            }
            // The same store still commits, with its rows.
            XCTAssertEqual(try store.commit([start("y"), start("z")]), [.written, .written])
            XCTAssertEqual(all(outbox).map(\.rideID), ["y", "y", "z", "z"])
            store.close()
        }
    }

    func testEachLaneIsReadHeadFirstAndDeliveredInCommitOrder() throws {
        pgClock.advance(millis: 1_000)  // every row due (PostgreSQL claims only those)
        try forEachStore { kind, store, outbox in
            // Ride a's four transitions in four groups, ride b's start in between.
            _ = try store.commit([start("a")])
            _ = try store.commit([step("a", 2, .pause(at: t0 + 10)), start("b", at: t0 + 11)])
            _ = try store.commit([step("a", 3, .resume(at: t0 + 20))])
            _ = try store.commit([step("a", 4, .end(at: t0 + 30, reason: .rider, metres: 5))])
            var delivered: [String: [String]] = [:]
            var reads = 0
            while true {
                let heads = outbox.pending(limit: 100)
                if heads.isEmpty { break }
                reads += 1
                XCTAssertLessThanOrEqual(reads, 10, "\(kind): the outbox never empties")
                if reads > 10 { return }
                // Only heads: never two rows of one lane at once.
                let lanes = heads.map { [$0.endpoint, $0.rideID] }
                XCTAssertEqual(Set(lanes).count, heads.count, "\(kind): two rows of one lane in \(heads.map(\.seq))")
                for row in heads {
                    delivered[row.endpoint + " " + row.rideID, default: []].append(String(decoding: row.body, as: UTF8.self))
                    outbox.record(.delivered(seq: row.seq, attempts: 1))
                }
            }
            let order = ["ride.started", "ride.paused", "ride.resumed", "ride.ended"].map { "{\"id\":\"evt_a_\($0)\",\"type\":\"\($0)\"}" }
            for endpoint in endpoints {
                XCTAssertEqual(delivered[endpoint + " a"], order, kind.rawValue)
                XCTAssertEqual(delivered[endpoint + " b"]?.count, 1, kind.rawValue)
            }
            XCTAssertEqual(reads, 4, "\(kind): one read per transition of the longest lane")
            XCTAssertEqual(outbox.stats(), OutboxStats(pending: 0, oldestPendingCreated: nil, dead: 0), kind.rawValue)
        }
    }

    func testRetryIsKeptOnTheRowAndDeadMovesItToTheListing() throws {
        pgClock.advance(millis: 100)
        try forEachStore { kind, store, outbox in
            _ = try store.commit([start("a", to: [endpoints[0]]), start("b", at: t0 + 5, to: [endpoints[0]])])
            _ = try store.commit([step("a", 2, .pause(at: t0 + 10), to: [endpoints[0]])])
            let heads = outbox.pending(limit: 10)
            XCTAssertEqual(heads.map(\.rideID), ["a", "b"], kind.rawValue)
            let a = heads[0]
            outbox.record(.retry(seq: a.seq, attempts: 1, at: t0 + 60_000, lastResult: "HTTP 503"))
            // The retried head now comes after b's (soonest attempt first) with its count kept.
            let again = outbox.pending(limit: 10)
            if let pg = outbox as? PostgresOutbox {
                // The retry gave the lease up: the sender forgets the row until it is due.
                XCTAssertEqual(pg.takeLost(), [a.seq])
                XCTAssertEqual(again, [], "postgres: b is held already, a is not due")
                pgClock.advance(millis: 60_000)
                let due = outbox.pending(limit: 10)
                XCTAssertEqual(due.map(\.seq), [a.seq])
                XCTAssertEqual(due.first?.attempts, 1)
                XCTAssertEqual(due.first?.nextAttemptAt, t0 + 60_000)
                XCTAssertEqual(due.first?.lastResult, "HTTP 503")
            } else {
                XCTAssertEqual(again.map(\.rideID), ["b", "a"], kind.rawValue)
                XCTAssertEqual(again.last?.attempts, 1)
                XCTAssertEqual(again.last?.nextAttemptAt, t0 + 60_000)
                XCTAssertEqual(again.last?.lastResult, "HTTP 503")
            }
            XCTAssertEqual(outbox.stats(), OutboxStats(pending: 3, oldestPendingCreated: t0, dead: 0), kind.rawValue)
            outbox.record(.dead(seq: a.seq, attempts: 9, lastResult: "timeout"))
            let dead = outbox.dead(limit: 10)
            XCTAssertEqual(dead.map(\.seq), [a.seq], kind.rawValue)
            XCTAssertEqual(dead.first?.eventID, "evt_a_ride.started")
            XCTAssertEqual(dead.first?.body, a.body)
            XCTAssertEqual(dead.first?.attempts, 9)
            XCTAssertEqual(dead.first?.lastResult, "timeout")
            XCTAssertEqual(outbox.stats(), OutboxStats(pending: 2, oldestPendingCreated: t0 + 5, dead: 1), kind.rawValue)
            // The dead head no longer holds its lane: a's pause is next, and the dead row is never sent.
            let next = outbox.pending(limit: 10)
            XCTAssertTrue(next.contains { $0.eventID == "evt_a_ride.paused" }, "\(kind): \(next.map(\.eventID))")
            XCTAssertFalse(next.contains { $0.seq == a.seq }, kind.rawValue)
        }
    }

    func testSQLiteRowsSurviveAReopenStillPending() throws {
        do {
            let store = try SQLiteStore(path: path)
            _ = try store.commit([start("a"), start("b")])
            let outbox = try SQLiteOutbox(path: path)
            let head = outbox.pending(limit: 10).first!
            outbox.record(.retry(seq: head.seq, attempts: 2, at: t0 + 4_000, lastResult: "HTTP 500"))
            outbox.close()
            store.close()
        }
        let store = try SQLiteStore(path: path)
        let outbox = try SQLiteOutbox(path: path)
        let rows = all(outbox)
        XCTAssertEqual(rows.map(\.rideID), ["a", "a", "b", "b"])
        XCTAssertEqual(rows.first?.attempts, 2)
        XCTAssertEqual(rows.first?.nextAttemptAt, t0 + 4_000)
        XCTAssertEqual(rows.first?.lastResult, "HTTP 500")
        // New seqs keep growing past the old ones: commit order survives the restart.
        _ = try store.commit([step("a", 2, .pause(at: t0 + 9))])
        XCTAssertEqual(all(outbox).count, 6)
        XCTAssertGreaterThan(all(outbox).map(\.seq).max()!, rows.map(\.seq).max()!)
        outbox.close()
        store.close()
    }

    func testSQLiteOutboxNeedsTheStoreFirst() throws {
        XCTAssertEqual(storeError { () throws(StoreError) in try SQLiteOutbox(path: path) }?.kind, .unavailable)
    }

    // MARK: PostgreSQL leases

    func testTwoNodesNeverHoldTheSameRow() throws {
        let pg = try TestPostgres.shared()
        let database = try pg.createDatabase()
        let settings = pg.settings(database: database)
        let store = try PostgresStore(settings)
        defer { store.close() }
        _ = try store.commit((0..<40).map { start("r\($0)", to: [endpoints[0]]) })
        let clock = ManualClock(t0)
        let a = PostgresOutbox(settings, owner: "node-a", clock: clock)
        let b = PostgresOutbox(settings, owner: "node-b", clock: clock)
        defer { a.close(); b.close() }
        // Claiming at the same moment from two threads: SKIP LOCKED hands each row to one.
        let results = Mutex<[[Int64]]>([[], []])
        let group = DispatchGroup()
        for (i, node) in [a, b].enumerated() {
            DispatchQueue.global().async(group: group) {
                var mine: [Int64] = []
                for _ in 0..<10 { mine += node.pending(limit: 25).map(\.seq) }
                results.withLock { $0[i] = mine }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        let claimed = results.withLock { $0 }
        XCTAssertNil(a.lastError)
        XCTAssertNil(b.lastError)
        XCTAssertTrue(Set(claimed[0]).isDisjoint(with: claimed[1]), "both hold \(Set(claimed[0]).intersection(claimed[1]).sorted())")
        XCTAssertEqual(claimed[0].count, Set(claimed[0]).count, "a row handed out twice to one node")
        XCTAssertEqual(Set(claimed[0] + claimed[1]).count, 40)
        XCTAssertEqual(a.heldCount + b.heldCount, 40)
        let owners = try pg.admin("SELECT count(DISTINCT seq) FROM ridepush.webhook_outbox WHERE lease_owner IN ('node-a', 'node-b')",
                                  database: database)
        XCTAssertEqual(owners.int(0, 0), 40)
        // While both live, nothing moves: renewed leases, no row lost.
        clock.advance(millis: 20_000)
        XCTAssertEqual(a.pending(limit: 100), [])
        XCTAssertEqual(b.pending(limit: 100), [])
        clock.advance(millis: 20_000)
        XCTAssertEqual(a.pending(limit: 100), [])
        XCTAssertEqual(a.takeLost(), [])
        XCTAssertEqual(b.takeLost(), [])
    }

    func testAnExpiredLeaseGoesToTheOtherNodeAndTheFirstLearnsItLostIt() throws {
        let pg = try TestPostgres.shared()
        let database = try pg.createDatabase()
        let settings = pg.settings(database: database)
        let store = try PostgresStore(settings)
        defer { store.close() }
        _ = try store.commit([start("a"), start("b")])
        let clock = ManualClock(t0)
        let a = PostgresOutbox(settings, owner: "node-a", leaseMillis: 30_000, clock: clock)
        let b = PostgresOutbox(settings, owner: "node-b", leaseMillis: 30_000, clock: clock)
        defer { a.close(); b.close() }
        let held = a.pending(limit: 10)
        XCTAssertEqual(held.count, 4)
        XCTAssertEqual(b.pending(limit: 10), [], "a's leases are valid")
        // a stops renewing (it died, or lost PostgreSQL) past its lease.
        clock.advance(millis: 30_001)
        let taken = b.pending(limit: 10)
        XCTAssertEqual(Set(taken.map(\.seq)), Set(held.map(\.seq)))
        // a comes back: its renewal finds every row gone to b, and it is told once.
        XCTAssertEqual(a.pending(limit: 10), [])
        XCTAssertEqual(a.takeLost(), Set(held.map(\.seq)))
        XCTAssertEqual(a.takeLost(), [])
        // a's late results change nothing of b's rows.
        a.record(.retry(seq: held[0].seq, attempts: 1, at: t0 + 99_000, lastResult: "HTTP 500"))
        a.record(.delivered(seq: held[1].seq, attempts: 1))
        a.record(.dead(seq: held[2].seq, attempts: 1, lastResult: "x"))
        XCTAssertNil(a.lastError)
        XCTAssertEqual(a.stats(), OutboxStats(pending: 4, oldestPendingCreated: t0, dead: 0))
        let row = try pg.admin("SELECT attempts, lease_owner FROM ridepush.webhook_outbox WHERE seq = \(held[0].seq)",
                               database: database)
        XCTAssertEqual(row.int(0, 0), 0)
        XCTAssertEqual(row.text(0, 1), "node-b")
        // b's results apply under its lease.
        b.record(.delivered(seq: held[1].seq, attempts: 1))
        b.record(.retry(seq: held[0].seq, attempts: 1, at: t0 + 99_000, lastResult: "HTTP 500"))
        XCTAssertEqual(b.stats().pending, 3)
        XCTAssertEqual(b.takeLost(), [held[0].seq], "a retry releases the lease")
        XCTAssertEqual(b.heldCount, 2)
        // b shuts down cleanly: its leases are given up at once, not after they expire.
        b.close()
        let c = PostgresOutbox(settings, owner: "node-c", clock: clock)
        defer { c.close() }
        XCTAssertEqual(Set(c.pending(limit: 10).map(\.seq)), Set([held[2].seq, held[3].seq]))
    }

    func testARetryRefusedForALostLeaseIsReportedLost() throws {
        let pg = try TestPostgres.shared()
        let database = try pg.createDatabase()
        let settings = pg.settings(database: database)
        let store = try PostgresStore(settings)
        defer { store.close() }
        _ = try store.commit([start("a", to: [endpoints[0]])])
        let clock = ManualClock(t0)
        let a = PostgresOutbox(settings, owner: "node-a", clock: clock)
        let b = PostgresOutbox(settings, owner: "node-b", clock: clock)
        defer { a.close(); b.close() }
        let row = a.pending(limit: 1)[0]
        clock.advance(millis: 31_000)
        XCTAssertEqual(b.pending(limit: 1).map(\.seq), [row.seq])
        // a's send was in flight meanwhile; its retry is refused and the row reported lost.
        a.record(.retry(seq: row.seq, attempts: 1, at: t0 + 40_000, lastResult: "timeout"))
        XCTAssertEqual(a.takeLost(), [row.seq])
        XCTAssertEqual(a.heldCount, 0)
    }

    /// Every pending row, by seq (reads heads until each lane is drained into a list, then
    /// leaves the outbox as it was): for stores that only show heads, via the table.
    func all(_ outbox: any WebhookOutbox) -> [OutboxRow] {
        switch outbox {
        case let m as MemoryOutbox: return m.pendingRows
        case let s as SQLiteOutbox: return s.allPending()
        case let p as PostgresOutbox: return p.allPending()
        default: XCTFail("unknown outbox"); return []
        }
    }
}

extension OutboxStoreTests {
    func testPostgresClaimsOnlyRowsDueAndAtMostItsLimitHeld() throws {
        let pg = try TestPostgres.shared()
        let settings = pg.settings(database: try pg.createDatabase())
        let store = try PostgresStore(settings)
        defer { store.close() }
        _ = try store.commit((0..<6).map { start("r\($0)", at: t0 + Int64($0) * 1_000, to: [endpoints[0]]) })
        let clock = ManualClock(t0 + 2_000)
        let a = PostgresOutbox(settings, owner: "node-a", clock: clock)
        defer { a.close() }
        XCTAssertEqual(a.pending(limit: 10).map(\.rideID), ["r0", "r1", "r2"], "only rows due by now")
        clock.advance(millis: 10_000)
        XCTAssertEqual(a.pending(limit: 4).map(\.rideID), ["r3"], "three held already, room for one")
        XCTAssertEqual(a.heldCount, 4)
        XCTAssertEqual(a.pending(limit: 4), [])
        XCTAssertEqual(a.takeLost(), [])
    }
}

extension OutboxStoreTests {
    func testPostgresUnreachablePastTheLeaseReportsEveryHeldRowLost() throws {
        let pg = try TestPostgres.shared()
        let database = try pg.createDatabase()
        let settings = pg.settings(database: database)
        do {
            let store = try PostgresStore(settings)
            _ = try store.commit([start("a", to: [endpoints[0]]), start("b", to: [endpoints[0]])])
            store.close()
        }
        let clock = ManualClock(t0)
        let a = PostgresOutbox(settings, owner: "node-a", leaseMillis: 30_000, clock: clock)
        defer { a.close() }
        let held = Set(a.pending(limit: 10).map(\.seq))
        XCTAssertEqual(held.count, 2)
        try pg.admin("ALTER DATABASE \(database) ALLOW_CONNECTIONS false")
        try pg.admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)'")
        defer { _ = try? pg.admin("ALTER DATABASE \(database) ALLOW_CONNECTIONS true") }
        clock.advance(millis: 29_000)
        XCTAssertEqual(a.pending(limit: 10), [])
        XCTAssertNotNil(a.lastError)
        XCTAssertEqual(a.takeLost(), [], "still within the leases")
        clock.advance(millis: 1_000)
        XCTAssertEqual(a.pending(limit: 10), [])
        XCTAssertEqual(a.takeLost(), held, "past the leases another node may hold them")
        XCTAssertEqual(a.heldCount, 0)
        // Back: nobody took them, so a claims them again like any expired lease.
        try pg.admin("ALTER DATABASE \(database) ALLOW_CONNECTIONS true")
        XCTAssertEqual(Set(a.pending(limit: 10).map(\.seq)), held)
        XCTAssertNil(a.lastError)
    }
}
