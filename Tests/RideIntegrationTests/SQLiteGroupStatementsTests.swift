import Foundation
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// The SQLite store's multi-row writes and batched reads (SQLiteGroupStatements.swift): the
/// same results as one write at a time, in the shapes it prepares.
final class SQLiteGroupStatementsTests: StoreDirectoryTestCase {
    func key(_ id: String) -> ReplyKey { ReplyKey(scope: "u", id: id) }
    func record(_ id: String, _ b: [UInt8], at: UnixMillis = t0) -> ReplyRecord {
        ReplyRecord(key: key(id), request: "req \(id)", bytes: b, at: at)
    }
    func create(_ id: String, reply: String? = nil) -> StoreWrite {
        .create(NewRide(id: id, planID: "p", owner: "u", limit: nil, startedAt: t0), reply: reply.map { record($0, Array($0.utf8)) })
    }
    func append(_ id: String, _ seq: Int64, _ t: RideTransition, reply: String? = nil) -> StoreWrite {
        .append(JournalEntry(ride: id, seq: seq, transition: t), reply: reply.map { record($0, Array($0.utf8)) })
    }
    /// The shapes (statement kind, rows) the store has prepared so far.
    func shapes(_ store: SQLiteStore, _ kind: SQLiteStore.GroupStatement) -> [Int] {
        store.groupStatements.keys.filter { $0 >> 8 == kind.rawValue }.map { $0 & 0xFF }.sorted()
    }

    func testAGroupLargerThanOneStatementIsWrittenInFewAndReadsBack() throws {
        var store = try SQLiteStore(path: path)
        // 150 rides: 150 creates (128 + 16 + 4 + 2 rows), then 75 ends and 75 pauses.
        let ids = (0..<150).map { String(format: "r%03d", $0) }
        let starts = ids.map { create($0, reply: "s-\($0)") }
        XCTAssertEqual(try store.commit(starts), Array(repeating: .written, count: 150))
        XCTAssertEqual(shapes(store, .creates), [2, 4, 16, 128])
        XCTAssertEqual(shapes(store, .replies), [2, 4, 16, 128])
        XCTAssertEqual(shapes(store, .transitions), [2, 4, 16, 128])
        let moves = ids.enumerated().map { i, id in
            i % 2 == 0 ? append(id, 2, .end(at: t0 + Int64(i), reason: .rider, metres: Int64(i)), reply: "e-\(id)")
                : append(id, 2, .pause(at: t0 + Int64(i)), reply: "p-\(id)")
        }
        XCTAssertEqual(try store.commit(moves), Array(repeating: .written, count: 150))
        XCTAssertEqual(shapes(store, .ends), [1, 2, 8, 64])  // 75 = 64 + 8 + 2 + 1
        XCTAssertEqual(shapes(store, .moves), [1, 2, 8, 64])

        store.close()
        store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.ride("r000")?.journal, [.start(at: t0), .end(at: t0, reason: .rider, metres: 0)])
        XCTAssertEqual(try store.ride("r149")?.journal, [.start(at: t0), .pause(at: t0 + 149)])
        XCTAssertEqual(try store.ride("r148")?.ride.state, .ended)
        XCTAssertEqual(try store.openRides().map(\.id), ids.enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
        XCTAssertEqual(try store.reply(for: key("s-r077")), StoredReply(request: "req s-r077", bytes: Array("s-r077".utf8)))
        XCTAssertEqual(try store.reply(for: key("e-r148")), StoredReply(request: "req e-r148", bytes: Array("e-r148".utf8)))
        XCTAssertEqual(try store.reply(for: key("p-r149")), StoredReply(request: "req p-r149", bytes: Array("p-r149".utf8)))
        XCTAssertNil(try store.reply(for: key("p-r148")))
        store.close()
    }

    func testAGroupWithARetryAConflictAndAnUnknownRideIsWrittenOneByOneExactly() throws {
        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.commit([create("a", reply: "q1"), create("b")]), [.written, .written])
        let results = try store.commit([
            create("c", reply: "q2"),
            append("a", 2, .pause(at: t0 + 1), reply: "q1"),  // a retry the server should have answered
            append("b", 3, .pause(at: t0 + 2)),  // not the next entry
            append("ghost", 2, .end(at: t0 + 3, reason: .rider, metres: 0)),
            create("b"),  // exists
            append("b", 2, .end(at: t0 + 4, reason: .rider, metres: 9), reply: "q3"),
            create("d", reply: "q2"),  // the key c just took
        ])
        XCTAssertEqual(results, [
            .written,
            .refused(StoreError(.replyAlreadyRecorded, "a reply is already recorded for request q1 of u")),
            .refused(StoreError(.notNext, "ride b: entry 3 is not the next one (the last is 1)")),
            .refused(StoreError(.rideNotFound, "no ride ghost")),
            .refused(StoreError(.rideExists, "ride b already exists")),
            .written,
            .refused(StoreError(.replyAlreadyRecorded, "a reply is already recorded for request q2 of u")),
        ])
        XCTAssertEqual(try store.ride("a")?.journal, [.start(at: t0)])
        XCTAssertEqual(try store.ride("b")?.journal, [.start(at: t0), .end(at: t0 + 4, reason: .rider, metres: 9)])
        XCTAssertEqual(try store.ride("c")?.journal, [.start(at: t0)])
        XCTAssertNil(try store.ride("d"))
        XCTAssertNil(try store.ride("ghost"))
        XCTAssertEqual(try store.reply(for: key("q1"))?.bytes, Array("q1".utf8))
        XCTAssertEqual(try store.reply(for: key("q2"))?.request, "req q2")
        XCTAssertEqual(try store.reply(for: key("q3"))?.bytes, Array("q3".utf8))
        // Nothing of the rolled-back multi-row try is left: each row once.
        var counts: [Int64] = []
        try store.db.query("SELECT (SELECT COUNT(*) FROM rides), (SELECT COUNT(*) FROM transitions), (SELECT COUNT(*) FROM replies)") {
            (r: SQLRow) throws(StoreError) in counts = [r.int(0), r.int(1), r.int(2)]
        }
        XCTAssertEqual(counts, [3, 4, 3])
        store.close()
    }

    func testOneRideSeveralTimesInAGroupAppliesInOrder() throws {
        let store = try SQLiteStore(path: path)
        let results = try store.commit([
            create("a", reply: "k1"),
            append("a", 2, .pause(at: t0 + 1), reply: "k2"),
            append("a", 3, .resume(at: t0 + 2)),
            append("a", 4, .pause(at: t0 + 3)),
            append("a", 5, .end(at: t0 + 4, reason: .rider, metres: 5), reply: "k3"),
            create("b"),
            append("b", 2, .pause(at: t0 + 5)),
            append("b", 2, .end(at: t0 + 6, reason: .rider, metres: 0)),  // a second writer from the same state
        ])
        XCTAssertEqual(results, [.written, .written, .written, .written, .written, .written, .written,
                                 .refused(StoreError(.notNext, "ride b: entry 2 is not the next one (the last is 2)"))])
        XCTAssertEqual(try store.ride("a")?.journal, [.start(at: t0), .pause(at: t0 + 1), .resume(at: t0 + 2), .pause(at: t0 + 3),
                                                      .end(at: t0 + 4, reason: .rider, metres: 5)])
        XCTAssertEqual(try store.ride("b")?.journal, [.start(at: t0), .pause(at: t0 + 5)])
        XCTAssertEqual(try store.ride("b")?.ride.state, .paused)

        // An append ahead of its ride's create is refused, as one at a time refuses it.
        XCTAssertEqual(try store.commit([append("c", 2, .pause(at: t0)), create("c")]),
                       [.refused(StoreError(.rideNotFound, "no ride c")), .written])
        // Two different rides paused and resumed in one group go the multi-row way.
        XCTAssertEqual(try store.commit([create("x"), create("y")]), [.written, .written])
        XCTAssertEqual(try store.commit([append("x", 2, .pause(at: t0 + 7)), append("y", 2, .pause(at: t0 + 8))]), [.written, .written])
        XCTAssertEqual(try store.commit([append("x", 3, .resume(at: t0 + 9)), append("y", 3, .resume(at: t0 + 10))]), [.written, .written])
        XCTAssertEqual(try store.ride("y")?.journal, [.start(at: t0), .pause(at: t0 + 8), .resume(at: t0 + 10)])
        XCTAssertEqual(try store.ride("x")?.ride.state, .riding)
        store.close()
    }

    func testPrefetchedRepliesAndRidesAnswerUntilTheNextCommit() throws {
        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.commit([create("a", reply: "k1"), create("b", reply: "k2")]), [.written, .written])
        store.prefetchReplies([key("k1"), key("nope"), key("k1")])
        store.prefetchRides(["a", "ghost", "a"])
        // Behind the store's back: the prefetched answers stand, keys not prefetched are read.
        try store.db.run("DELETE FROM replies")
        try store.db.run("UPDATE rides SET plan_id = 'changed'")
        XCTAssertEqual(try store.reply(for: key("k1")), StoredReply(request: "req k1", bytes: Array("k1".utf8)))
        XCTAssertNil(try store.reply(for: key("nope")))
        XCTAssertNil(try store.reply(for: key("k2")))
        XCTAssertEqual(try store.ride("a")?.planID, "p")
        XCTAssertEqual(try store.ride("a")?.journal, [.start(at: t0)])
        XCTAssertNil(try store.ride("ghost"))
        XCTAssertEqual(try store.ride("b")?.planID, "changed")
        // A commit (even an empty one) drops them: the store's state moves on from here.
        XCTAssertEqual(try store.commit([]), [])
        XCTAssertNil(try store.reply(for: key("k1")))
        XCTAssertEqual(try store.ride("a")?.planID, "changed")

        // A prefetch of more keys than one statement holds (130 = 128 + 2), most found.
        let ids = (0..<130).map { "m\($0)" }
        XCTAssertEqual(try store.commit(ids.map { create($0, reply: "r-\($0)") }), Array(repeating: .written, count: 130))
        store.prefetchReplies(ids.map { key("r-\($0)") } + [key("r-none")])
        store.prefetchRides(ids + ["none"])
        try store.db.run("DELETE FROM replies")
        try store.db.run("DELETE FROM transitions")
        XCTAssertEqual(try store.reply(for: key("r-m129"))?.bytes, Array("r-m129".utf8))
        XCTAssertEqual(try store.reply(for: key("r-m0"))?.request, "req r-m0")
        XCTAssertNil(try store.reply(for: key("r-none")))
        XCTAssertEqual(try store.ride("m64")?.journal, [.start(at: t0)])
        XCTAssertNil(try store.ride("none"))
        // "r-none" and "nope" were never written: the key filter answers them, no row is read.
        XCTAssertEqual(shapes(store, .replyReads), [2, 128])
        XCTAssertEqual(shapes(store, .rideReads), [1, 2, 128])
        // prune drops the replies read too.
        try store.prune(repliesBefore: t0)
        XCTAssertNil(try store.reply(for: key("r-m129")))
        store.close()
    }
}

extension SQLiteGroupStatementsTests {
    func testAClosedStoreNeitherPrefetchesNorRunsAKeptStatement() throws {
        let store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.commit([create("a", reply: "k1"), create("b", reply: "k2")]), [.written, .written])
        store.prefetchReplies([key("k1"), key("k2")])
        store.close()
        // The kept statements were finalized with the connection: nothing may step them now.
        store.prefetchReplies([key("k1"), key("k2")])
        store.prefetchRides(["a", "b"])
        XCTAssertEqual(storeError { () throws(StoreError) in try store.reply(for: key("k1")) }?.kind, .unavailable)
        XCTAssertEqual(storeError { () throws(StoreError) in try store.ride("a") }?.kind, .unavailable)
        XCTAssertEqual(storeError { () throws(StoreError) in try store.commit([create("c"), create("d")]) }?.kind, .unavailable)
    }
}

extension SQLiteGroupStatementsTests {
    /// Keys never written are answered from the key filter (KeyFilter.swift) without a read;
    /// every key in the file, written before the store opened or since, is read.
    func testKeysNeverWrittenNeedNoReadAndEveryWrittenOneIsRead() throws {
        var store = try SQLiteStore(path: path)
        XCTAssertEqual(try store.commit([create("old", reply: "q-old")]), [.written])
        store.close()
        store = try SQLiteStore(path: path)  // the filters rebuilt from the file
        XCTAssertEqual(try store.commit([create("new", reply: "q-new"), create("b")]), [.written, .written])
        // Behind the store's back: now any read fails, so a lookup answered without one is seen.
        try store.db.run("ALTER TABLE replies RENAME TO replies_gone")
        try store.db.run("ALTER TABLE transitions RENAME TO transitions_gone")
        XCTAssertNil(try store.reply(for: key("q-never")))
        XCTAssertNil(try store.ride("never"))
        for k in ["q-old", "q-new"] {
            XCTAssertNotNil(storeError { () throws(StoreError) in try store.reply(for: key(k)) }, k)
        }
        for r in ["old", "new", "b"] {
            XCTAssertNotNil(storeError { () throws(StoreError) in try store.ride(r) }, r)
        }
        store.prefetchReplies([key("q-never"), key("q-nor")])
        store.prefetchRides(["never", "nor"])
        XCTAssertEqual(shapes(store, .replyReads), [])
        XCTAssertEqual(shapes(store, .rideReads), [])
        XCTAssertNil(try store.reply(for: key("q-nor")))
        XCTAssertNil(try store.ride("nor"))
        store.close()
    }

    func testAFilterSaysAbsentOnlyForKeysNeverInsertedAndAsksForARebuildPastItsCapacity() {
        var f = KeyFilter(capacity: 1000)
        XCTAssertEqual(f.capacity, 32_768)  // the smallest: 2^19 bits
        let hashes = (0..<32_768).map { KeyFilter.hash("s", "id-\($0)") }
        for h in hashes { f.insert(h) }
        XCTAssertFalse(f.needsRebuild)
        XCTAssertTrue(hashes.allSatisfy(f.mayContain))
        // At capacity about 1 in 1,000 of the others is a false "maybe" (Hasher is seeded per process).
        let others = (0..<100_000).filter { f.mayContain(KeyFilter.hash("s", "other-\($0)")) }.count
        XCTAssertLessThan(others, 500)
        f.insert(KeyFilter.hash("one more"))
        XCTAssertTrue(f.needsRebuild)
        XCTAssertEqual(KeyFilter(capacity: 32_769).capacity, 65_536)
        XCTAssertNotEqual(KeyFilter.hash("a", "bc"), KeyFilter.hash("ab", "c"))
    }
}
