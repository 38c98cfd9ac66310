import Foundation
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

let t0: UnixMillis = 1_764_430_000_000

/// The error a call threw, or nil if it succeeded.
func storeError<T>(_ body: () throws(StoreError) -> T) -> StoreError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Behaviour both stores must share; each test runs it against a fresh store of each kind.
/// `reopen` gives the same store again (SQLite: closes and reopens the file), so everything
/// checked after it is checked from disk.
final class RideStoreSemanticsTests: StoreDirectoryTestCase {
    /// Runs `body` with a memory store, an SQLite file and a PostgreSQL database (skipped,
    /// after the other two ran, when PostgreSQL is not installed).
    func forEachStore(_ body: (_ store: () throws(StoreError) -> any RideStore, _ reopen: (any RideStore) throws(StoreError) -> any RideStore) throws -> Void) throws {
        let memory = MemoryStore()
        try body({ () throws(StoreError) in memory }, { (s: any RideStore) throws(StoreError) in s })
        try body({ () throws(StoreError) in try SQLiteStore(path: path) }, { (s: any RideStore) throws(StoreError) in
            s.close()
            return try SQLiteStore(path: path)
        })
        // PostgreSQL, on a fresh database of the shared test server.
        let pg = try TestPostgres.shared()
        let settings = pg.settings(database: try pg.createDatabase())
        try body({ () throws(StoreError) in try PostgresStore(settings) }, { (s: any RideStore) throws(StoreError) in
            s.close()
            return try PostgresStore(settings)
        })
    }

    func testEveryTransitionRoundTrips() throws {
        try forEachStore { open, reopen in
            var store = try open()
            // Quotes, non-ASCII and a NUL survive as they are (no NUL on PostgreSQL, whose text
            // cannot hold one; the protocol's ride ids never do).
            let id = store is PostgresStore ? "r/ü \"1\"x" : "r/ü \"1\"\u{0}x"
            try store.create(id: id, planID: "city-standard", owner: "rider-7", limit: 3600, startedAt: t0, reply: nil)
            try store.append(ride: id, .pause(at: t0 + 61_250), reply: nil)
            try store.append(ride: id, .resume(at: t0 + 90_000), reply: nil)
            try store.append(ride: id, .pause(at: t0 + 100_000), reply: nil)
            // An instant before the last one (a clock that stepped back) is kept as recorded.
            try store.append(ride: id, .resume(at: t0 + 99_000), reply: nil)
            try store.append(ride: id, .end(at: t0 + 300_999, reason: .pauseLimit, metres: 4_321), reply: nil)
            try store.create(id: "r-2", planID: "p2", owner: nil, limit: nil, startedAt: t0 + 5, reply: nil)
            try store.append(ride: "r-2", .end(at: t0 + 7, reason: .timeLimit, metres: 0), reply: nil)
            try store.create(id: "r-3", planID: "p3", owner: "", limit: 0, startedAt: t0 - 1, reply: nil)
            try store.append(ride: "r-3", .end(at: t0, reason: .rider, metres: -1), reply: nil)
            try store.create(id: "r-4", planID: "p4", owner: "u", limit: nil, startedAt: t0, reply: nil)
            try store.append(ride: "r-4", .end(at: t0 + 9, reason: .byOperator, metres: 12), reply: nil)

            store = try reopen(store)
            let r1 = try XCTUnwrap(try store.ride(id))
            XCTAssertEqual(r1.journal, [.start(at: t0), .pause(at: t0 + 61_250), .resume(at: t0 + 90_000),
                                        .pause(at: t0 + 100_000), .resume(at: t0 + 99_000),
                                        .end(at: t0 + 300_999, reason: .pauseLimit, metres: 4_321)])
            XCTAssertEqual(r1.id, id)
            XCTAssertEqual(r1.planID, "city-standard")
            XCTAssertEqual(r1.owner, "rider-7")
            XCTAssertEqual(r1.limit, 3600)
            XCTAssertEqual(r1.ride.state, .ended)
            XCTAssertEqual(r1.ride.endedAt, t0 + 300_999)
            XCTAssertEqual(r1.ride.endReason, .pauseLimit)
            XCTAssertEqual(r1.ride.metres, 4_321)
            // Riding: 61_250 + (100_000 - 90_000) + (300_999 - 100_000) = 272_249 ms.
            XCTAssertEqual(r1.ride.ridingMillis(at: t0 + 999_999), 272_249)
            XCTAssertEqual(r1.ride.pausedMillis(at: t0 + 999_999), 28_750)

            let r2 = try XCTUnwrap(try store.ride("r-2"))
            XCTAssertEqual(r2.journal, [.start(at: t0 + 5), .end(at: t0 + 7, reason: .timeLimit, metres: 0)])
            XCTAssertNil(r2.owner)
            XCTAssertNil(r2.limit)
            XCTAssertEqual(r2.planID, "p2")
            let r3 = try XCTUnwrap(try store.ride("r-3"))
            XCTAssertEqual(r3.journal, [.start(at: t0 - 1), .end(at: t0, reason: .rider, metres: -1)])
            XCTAssertEqual(r3.owner, "")
            XCTAssertEqual(r3.limit, 0)
            XCTAssertEqual(try store.ride("r-4")?.journal, [.start(at: t0), .end(at: t0 + 9, reason: .byOperator, metres: 12)])
            XCTAssertNil(try store.ride("nope"))
            store.close()
        }
    }

    func testOpenRidesAreTheUnendedOnesAfterReopen() throws {
        try forEachStore { open, reopen in
            var store = try open()
            try store.create(id: "b-riding", planID: "p", owner: "u1", limit: 600, startedAt: t0, reply: nil)
            try store.create(id: "a-paused", planID: "p", owner: nil, limit: nil, startedAt: t0 + 1_000, reply: nil)
            try store.append(ride: "a-paused", .pause(at: t0 + 2_000), reply: nil)
            try store.create(id: "c-ended", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            try store.append(ride: "c-ended", .end(at: t0 + 3_000, reason: .rider, metres: 12), reply: nil)
            try store.create(id: "d-resumed", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            try store.append(ride: "d-resumed", .pause(at: t0 + 10_000), reply: nil)
            try store.append(ride: "d-resumed", .resume(at: t0 + 40_000), reply: nil)
            let before = try store.openRides()

            store = try reopen(store)
            let open = try store.openRides()
            XCTAssertEqual(open, before)
            XCTAssertEqual(open.map(\.id), ["a-paused", "b-riding", "d-resumed"])
            // The server down-time counts as riding unless paused: derived from instants only.
            let now = t0 + 3_600_000
            XCTAssertEqual(open[0].ride.state, .paused)
            XCTAssertEqual(open[0].ride.ridingMillis(at: now), 1_000)
            XCTAssertEqual(open[1].ride.state, .riding)
            XCTAssertEqual(open[1].ride.elapsedSeconds(at: now), 3_600)
            XCTAssertEqual(open[1].ride.remainingSeconds(at: t0 + 100_500), 500)
            XCTAssertEqual(open[2].ride.ridingMillis(at: now), 3_570_000)
            XCTAssertEqual(open[2].ride.pausedSeconds(at: now), 30)
            XCTAssertEqual(try store.ride("c-ended")?.ride.state, .ended)
            store.close()
        }
    }

    func testReplayedRideEqualsTheOneTheServerComputed() throws {
        try forEachStore { open, reopen in
            var store = try open()
            var live = Ride(id: "r", planID: "p", owner: "u", limit: 900, startedAt: t0)
            try store.create(id: "r", planID: "p", owner: "u", limit: 900, startedAt: t0, reply: nil)
            for (cmd, at) in [(RideCommand.pause, t0 + 12_345), (.resume, t0 + 20_000), (.pause, t0 + 50_001)] {
                let tr = try live.transition(for: cmd, at: at).get()
                live = try live.applying(tr).get()
                let stored = try store.append(ride: "r", tr, reply: nil)
                XCTAssertEqual(stored.ride, live)
            }
            store = try reopen(store)
            XCTAssertEqual(try store.ride("r")?.ride, live)
            XCTAssertEqual(try store.openRides().map(\.ride), [live])
            XCTAssertEqual(live.ridingMillis(at: t0 + 86_400_000), 42_346)
            store.close()
        }
    }

    /// The worker's probe (health after a failure): answers on an open store, fails once closed.
    func testProbeAnswersWhileOpenAndFailsOnceClosed() throws {
        try forEachStore { open, _ in
            let store = try open()
            XCTAssertNil(storeError { () throws(StoreError) in try store.probe() })
            XCTAssertTrue(store.reachable)
            store.close()
            XCTAssertEqual(storeError { () throws(StoreError) in try store.probe() }?.kind, .unavailable)
        }
    }

    func testConflictsAndUnknownRidesChangeNothing() throws {
        try forEachStore { open, _ in
            let store = try open()
            try store.create(id: "r", planID: "p", owner: "u", limit: nil, startedAt: t0, reply: nil)
            var e = storeError { () throws(StoreError) in try store.create(id: "r", planID: "other", owner: nil, limit: 5, startedAt: t0 + 1, reply: nil) }
            XCTAssertEqual(e?.kind, .conflict)
            XCTAssertEqual(e?.refusal, .rideExists)
            XCTAssertEqual(e?.message, "ride r already exists")
            e = storeError { () throws(StoreError) in try store.append(ride: "ghost", .pause(at: t0), reply: nil) }
            XCTAssertEqual(e?.kind, .notFound)
            XCTAssertEqual(e?.refusal, .rideNotFound)
            XCTAssertNil(try store.ride("ghost"))
            e = storeError { () throws(StoreError) in try store.append(ride: "r", .start(at: t0 + 1), reply: nil) }
            XCTAssertEqual(e?.kind, .conflict)
            XCTAssertEqual(e?.refusal, .notAllowed)
            e = storeError { () throws(StoreError) in try store.append(ride: "r", .resume(at: t0 + 1), reply: nil) }
            XCTAssertEqual(e?.kind, .conflict)
            XCTAssertEqual(e?.refusal, .notAllowed)
            XCTAssertEqual(e?.message, "ride r: ride is riding; cannot resume")
            try store.append(ride: "r", .end(at: t0 + 9, reason: .rider, metres: 3), reply: nil)
            e = storeError { () throws(StoreError) in try store.append(ride: "r", .end(at: t0 + 10, reason: .rider, metres: 4), reply: nil) }
            XCTAssertEqual(e?.kind, .conflict)
            XCTAssertEqual(try store.ride("r")?.journal, [.start(at: t0), .end(at: t0 + 9, reason: .rider, metres: 3)])
            XCTAssertEqual(try store.ride("r")?.planID, "p")
            store.close()
        }
    }

    func testRepliesAreRecordedWithTheirTransitionAndSurviveReopen() throws {
        try forEachStore { open, reopen in
            var store = try open()
            let startKey = ReplyKey(scope: "rider-1", id: "req-1")
            let endKey = ReplyKey(scope: "rider-1", id: "req-2")
            let startReply = bytes(#"{"type":"state","ride":"r","state":"riding","id":"req-1"}"#)
            let endReply = bytes(#"{"type":"state","ride":"r","state":"ended","id":"req-2"}"#) + [0, 255]
            try store.create(id: "r", planID: "p", owner: "rider-1", limit: nil, startedAt: t0,
                             reply: ReplyRecord(key: startKey, request: "test", bytes: startReply, at: t0))
            try store.append(ride: "r", .end(at: t0 + 5_000, reason: .rider, metres: 0),
                             reply: ReplyRecord(key: endKey, request: "test", bytes: endReply, at: t0 + 5_000))
            try store.create(id: "anon", planID: "p", owner: nil, limit: nil, startedAt: t0,
                             reply: ReplyRecord(key: ReplyKey(scope: "", id: "req-1"), request: "test", bytes: [], at: t0))

            store = try reopen(store)
            XCTAssertEqual(try store.reply(for: startKey)?.bytes, startReply)
            XCTAssertEqual(try store.reply(for: endKey)?.bytes, endReply)
            XCTAssertEqual(try store.reply(for: ReplyKey(scope: "", id: "req-1"))?.bytes, [])
            XCTAssertNil(try store.reply(for: ReplyKey(scope: "rider-2", id: "req-1")))
            XCTAssertNil(try store.reply(for: ReplyKey(scope: "rider-1", id: "req-3")))

            // A reused key means the server applied a request twice: refused, and the
            // transition that came with it is not written either.
            try store.create(id: "s", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            let e = storeError { () throws(StoreError) in
                try store.append(ride: "s", .pause(at: t0 + 1), reply: ReplyRecord(key: startKey, request: "test", bytes: [1], at: t0 + 1))
            }
            XCTAssertEqual(e?.kind, .conflict)
            XCTAssertEqual(e?.refusal, .replyAlreadyRecorded)
            XCTAssertEqual(try store.ride("s")?.journal, [.start(at: t0)])
            XCTAssertEqual(try store.reply(for: startKey)?.bytes, startReply)
            let e2 = storeError { () throws(StoreError) in
                try store.create(id: "t", planID: "p", owner: nil, limit: nil, startedAt: t0,
                                 reply: ReplyRecord(key: endKey, request: "test", bytes: [1], at: t0))
            }
            XCTAssertEqual(e2?.kind, .conflict)
            XCTAssertEqual(e2?.refusal, .replyAlreadyRecorded)
            XCTAssertNil(try store.ride("t"))
            store.close()
        }
    }

    func testPruneForgetsOnlyOlderReplies() throws {
        try forEachStore { open, reopen in
            var store = try open()
            for (n, at) in [(1, t0), (2, t0 + 1), (3, t0 + 2)] {
                try store.create(id: "r\(n)", planID: "p", owner: nil, limit: nil, startedAt: at,
                                 reply: ReplyRecord(key: ReplyKey(scope: "u", id: "\(n)"), request: "test", bytes: [UInt8(n)], at: at))
            }
            try store.prune(repliesBefore: t0 + 1)
            store = try reopen(store)
            XCTAssertNil(try store.reply(for: ReplyKey(scope: "u", id: "1")))
            XCTAssertEqual(try store.reply(for: ReplyKey(scope: "u", id: "2"))?.bytes, [2])
            XCTAssertEqual(try store.reply(for: ReplyKey(scope: "u", id: "3"))?.bytes, [3])
            // Rides are never pruned.
            XCTAssertEqual(try store.openRides().map(\.id), ["r1", "r2", "r3"])
            store.close()
        }
    }

    func testABatchCommitsTogetherAndRefusesWritesOneByOne() throws {
        try forEachStore { open, reopen in
            var store = try open()
            let key = ReplyKey(scope: "u", id: "q1")
            func entry(_ ride: String, _ seq: Int64, _ t: RideTransition) -> StoreWrite { .append(JournalEntry(ride: ride, seq: seq, transition: t), reply: nil) }
            let results = try store.commit([
                .create(NewRide(id: "a", planID: "p", owner: "u", limit: 60, startedAt: t0),
                        reply: ReplyRecord(key: key, request: "start a", bytes: [1, 2], at: t0)),
                entry("a", 2, .pause(at: t0 + 1_000)),
                entry("a", 2, .resume(at: t0 + 2_000)),  // a second writer deciding from the same state
                entry("a", 3, .resume(at: t0 + 3_000)),
                .create(NewRide(id: "a", planID: "q", owner: nil, limit: nil, startedAt: t0), reply: nil),
                entry("ghost", 2, .pause(at: t0)),
                entry("a", 5, .end(at: t0 + 4_000, reason: .rider, metres: 0)),  // a gap
                .create(NewRide(id: "b", planID: "p", owner: nil, limit: nil, startedAt: t0 + 9),
                        reply: ReplyRecord(key: key, request: "start b", bytes: [3], at: t0 + 9)),
                entry("a", 4, .pause(at: t0 + 5_000)),
                entry("a", 4, .end(at: t0 + 6_000, reason: .rider, metres: 7)),
            ])
            XCTAssertEqual(results, [
                .written, .written,
                .refused(StoreError(.notNext, "ride a: entry 2 is not the next one (the last is 2)")),
                .written,
                .refused(StoreError(.rideExists, "ride a already exists")),
                .refused(StoreError(.rideNotFound, "no ride ghost")),
                .refused(StoreError(.notNext, "ride a: entry 5 is not the next one (the last is 3)")),
                .refused(StoreError(.replyAlreadyRecorded, "a reply is already recorded for request q1 of u")),
                .written,
                .refused(StoreError(.notNext, "ride a: entry 4 is not the next one (the last is 4)")),
            ])
            store = try reopen(store)
            let a = try XCTUnwrap(try store.ride("a"))
            XCTAssertEqual(a.journal, [.start(at: t0), .pause(at: t0 + 1_000), .resume(at: t0 + 3_000), .pause(at: t0 + 5_000)])
            XCTAssertEqual(a.seq, 4)
            XCTAssertNil(try store.ride("b"))
            XCTAssertEqual(try store.reply(for: key), StoredReply(request: "start a", bytes: [1, 2]))
            XCTAssertEqual(try store.commit([]), [])
            XCTAssertEqual(try store.commit([entry("a", 5, .end(at: t0 + 9_000, reason: .rider, metres: 0)), entry("a", 6, .resume(at: t0 + 9_001))]),
                           [.written, .refused(StoreError(.notAllowed, "ride a: ride has ended; cannot resume"))])
            XCTAssertEqual(try store.openRides().map(\.id), [])
            store.close()
        }
    }

    func testALargeGroupWithARetryAConflictAnUnknownRideAndARepeatedRide() throws {
        try forEachStore { open, reopen in
            var store = try open()
            func key(_ id: String) -> ReplyKey { ReplyKey(scope: "u", id: id) }
            func reply(_ id: String) -> ReplyRecord { ReplyRecord(key: key(id), request: "req \(id)", bytes: Array(id.utf8), at: t0) }
            func create(_ id: String, _ r: String?) -> StoreWrite {
                .create(NewRide(id: id, planID: "p", owner: nil, limit: nil, startedAt: t0), reply: r.map(reply))
            }
            func entry(_ ride: String, _ seq: Int64, _ t: RideTransition, _ r: String? = nil) -> StoreWrite {
                .append(JournalEntry(ride: ride, seq: seq, transition: t), reply: r.map(reply))
            }
            XCTAssertEqual(try store.commit([create("old", "k-old")]), [.written])
            // More writes than one multi-row statement holds, and one of each refusal among them.
            var batch = (0..<140).map { create("n\($0)", "k\($0)") }
            batch += [
                entry("n7", 2, .pause(at: t0 + 1), "k-old"),  // a retry: the key is taken
                entry("n8", 3, .pause(at: t0 + 1)),  // not the next entry
                entry("ghost", 2, .pause(at: t0 + 1)),
                entry("n9", 2, .pause(at: t0 + 2)),
                entry("n9", 3, .resume(at: t0 + 3)),
                entry("n9", 4, .end(at: t0 + 4, reason: .rider, metres: 12), "k-end"),
            ]
            let results = try store.commit(batch)
            XCTAssertEqual(Array(results.prefix(140)), Array(repeating: .written, count: 140))
            XCTAssertEqual(Array(results.dropFirst(140)), [
                .refused(StoreError(.replyAlreadyRecorded, "a reply is already recorded for request k-old of u")),
                .refused(StoreError(.notNext, "ride n8: entry 3 is not the next one (the last is 1)")),
                .refused(StoreError(.rideNotFound, "no ride ghost")),
                .written, .written, .written,
            ])
            store = try reopen(store)
            XCTAssertEqual(try store.ride("n7")?.journal, [.start(at: t0)])
            XCTAssertEqual(try store.ride("n139")?.journal, [.start(at: t0)])
            XCTAssertEqual(try store.ride("n9")?.journal, [.start(at: t0), .pause(at: t0 + 2), .resume(at: t0 + 3),
                                                           .end(at: t0 + 4, reason: .rider, metres: 12)])
            XCTAssertEqual(try store.openRides().count, 140)  // old and n0…n139 but n9
            XCTAssertEqual(try store.reply(for: key("k-old"))?.bytes, Array("k-old".utf8))
            XCTAssertEqual(try store.reply(for: key("k139")), StoredReply(request: "req k139", bytes: Array("k139".utf8)))
            XCTAssertEqual(try store.reply(for: key("k-end"))?.request, "req k-end")
            store.close()
        }
    }

    func testClosedStoreIsUnavailable() throws {
        try forEachStore { open, _ in
            let store = try open()
            store.close()
            store.close()
            XCTAssertEqual(storeError { () throws(StoreError) in try store.openRides() }?.kind, .unavailable)
            XCTAssertEqual(storeError { () throws(StoreError) in
                try store.create(id: "r", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            }?.kind, .unavailable)
        }
    }
}
