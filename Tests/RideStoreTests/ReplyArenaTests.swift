import XCTest
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// The memory store's replies come back byte for byte however they were packed.
final class ReplyArenaTests: XCTestCase {
    private func stateReply(_ n: Int, at: Int64) -> [UInt8] {
        Array(#"{"type":"state","id":"b-\#(n)","ride":"r\#(n)","state":"riding","elapsed":0,"paused":0,"fare":500,"currency":"KRW","at":\#(at),"started_at":\#(at),"ended_at":null,"paused_since":null,"plan":{"id":"default","name":"Standard","currency":"KRW","price":500,"per_min":[{"start":0,"rate":180,"interval":1}],"billing":"completed"}}"#.utf8)
    }

    func testRepliesLikeTheFirstAreKeptAsShortDeltasAndComeBackExactly() {
        var arena = ReplyArena()
        let first = stateReply(1234, at: 1_796_138_989_427)
        XCTAssertEqual(first.count, 336)
        let h1 = arena.add(first)
        // The page's reference itself: 336 bytes copied as 131 + 131 + 74, three bytes each.
        XCTAssertEqual(h1.length, 9)
        let same = arena.add(first)
        XCTAssertEqual(same.length, 9)
        var handles: [(ReplyArena.Handle, [UInt8])] = []
        for n in 0..<2000 {
            let r = stateReply(n, at: 1_796_138_989_427 + Int64(n) * 37)
            handles.append((arena.add(r), r))
        }
        for (h, r) in handles { XCTAssertEqual(arena.bytes(h), r) }
        XCTAssertEqual(arena.bytes(h1), first)
        let longest = handles.map { Int($0.0.length) }.max()!
        XCTAssertLessThan(longest, 60, "a reply differing in ids and instants costs a few dozen bytes, not 336")
        let total = handles.reduce(0) { $0 + Int($1.0.length) }
        XCTAssertLessThan(total, 2000 * 45, "about 40 bytes each on average (80,082 for these 2,000)")
        XCTAssertEqual(Set(handles.map(\.0.page)).count, 2, "2,000 such deltas and the reference fill two 64 KiB pages")
    }

    func testEmptyAndUnrelatedBytesAndPagesRunningOver() {
        var arena = ReplyArena()
        let reference = [UInt8](repeating: UInt8(ascii: "a"), count: 200)
        let h0 = arena.add(reference)
        let empty = arena.add([])
        XCTAssertEqual(empty.length, 0)
        XCTAssertEqual(arena.bytes(empty), [])
        // Nothing of it is in the reference: all literals, one op byte per 128.
        let binary = (0..<300).map { UInt8(($0 * 7) % 256) }
        let hb = arena.add(binary)
        XCTAssertEqual(hb.length, 303)
        XCTAssertEqual(arena.bytes(hb), binary)
        // More than a page's worth: later ones go to new pages, each with its own reference.
        var kept: [(ReplyArena.Handle, [UInt8])] = []
        for n in 0..<400 {
            let r = (0..<500).map { UInt8(($0 * 31 + n * 17) % 251) } + [0, 255]
            kept.append((arena.add(r), r))
        }
        XCTAssertGreaterThan(kept.last!.0.page, 0)
        // One longer than a page, and longer than 16-bit offsets reach.
        let huge = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        let hh = arena.add(huge)
        let after = arena.add(huge)
        XCTAssertEqual(arena.bytes(hh), huge)
        XCTAssertEqual(arena.bytes(after), huge)
        for (h, r) in kept { XCTAssertEqual(arena.bytes(h), r) }
        XCTAssertEqual(arena.bytes(h0), reference)
        XCTAssertEqual(arena.bytes(hb), binary)
    }

    func testMemoryStorePruneKeepsTheSurvivorsBytes() throws {
        let store = MemoryStore()
        var writes: [StoreWrite] = []
        for n in 0..<50 {
            let key = ReplyKey(scope: "", id: "b-\(n)")
            writes.append(.create(NewRide(id: "r\(n)", planID: "default", owner: nil, limit: nil, startedAt: 1000 + Int64(n)),
                                  reply: ReplyRecord(key: key, request: "start r\(n)", bytes: stateReply(n, at: 1000 + Int64(n)), at: 1000 + Int64(n))))
        }
        XCTAssertEqual(try store.commit(writes), Array(repeating: .written, count: 50))
        try store.prune(repliesBefore: 1025)
        for n in 0..<50 {
            let r = try store.reply(for: ReplyKey(scope: "", id: "b-\(n)"))
            if n < 25 {
                XCTAssertNil(r)
            } else {
                XCTAssertEqual(r, StoredReply(request: "start r\(n)", bytes: stateReply(n, at: 1000 + Int64(n))))
            }
        }
        XCTAssertEqual(try store.openRides().count, 50)
    }
}
