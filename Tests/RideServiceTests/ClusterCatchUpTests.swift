import XCTest
import RideCore
import RideStore
@testable import RideService

/// Merging other nodes' journal entries into the book's view: by per-ride seq, whatever
/// order and however often they arrive.
final class ClusterCatchUpTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    func feed(_ ride: String, _ seq: Int64, _ t: RideTransition, plan: String = "p", owner: String? = "u", limit: Int64? = nil) -> FeedEntry {
        FeedEntry(JournalEntry(ride: ride, seq: seq, transition: t), planID: plan, owner: owner, limit: limit)
    }

    func testEntriesApplyInSeqOrderOnceEachWhateverOrderTheyCome() throws {
        let store = MemoryStore()
        let catchUp = ClusterCatchUp(cursor: JournalCursor(txid: 0, position: 0))
        let a = Ride(id: "a", planID: "p", owner: "u", limit: nil, startedAt: t0)
        let book: RideBook.Rides = ["a": RideBook.Entry(ride: a, seq: 1)]
        let updates = try catchUp.merge([
            feed("a", 3, .resume(at: t0 + 3_000)),      // before its predecessor: transaction ids are not commit order
            feed("b", 1, .start(at: t0 + 10), limit: 600),
            feed("a", 2, .pause(at: t0 + 2_000)),
            feed("a", 1, .start(at: t0)),               // already applied
            feed("a", 2, .pause(at: t0 + 2_000)),       // read twice (hint and catch-up)
            feed("b", 2, .end(at: t0 + 20, reason: .timeLimit, metres: 0)),
        ], rides: book, store: store)
        XCTAssertEqual(updates.map { "\($0.entry.ride.id):\($0.entry.seq):\($0.entry.ride.state)" },
                       ["a:2:paused", "a:3:riding", "b:1:riding", "b:2:ended"])
        XCTAssertEqual(updates[1].entry.ride.pausedMillis(at: t0 + 10_000), 1_000)
        XCTAssertEqual(updates[2].entry.ride.limit, 600)
        XCTAssertTrue(updates[2].isStart)
        XCTAssertEqual(updates[3].entry.ride.endReason, .timeLimit)
    }

    /// A gap (an entry lost between reads) or a ride first seen mid-journal is read from the
    /// store whole rather than guessed; an unknown ride's end needs nothing.
    func testAGapOrAnUnknownOpenRideReloadsFromTheStore() throws {
        let store = MemoryStore()
        try store.create(id: "g", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.append(ride: "g", .pause(at: t0 + 1_000), reply: nil)
        try store.append(ride: "g", .resume(at: t0 + 2_000), reply: nil)
        try store.create(id: "u", planID: "q", owner: "x", limit: 60, startedAt: t0, reply: nil)
        try store.append(ride: "u", .pause(at: t0 + 500), reply: nil)
        try store.create(id: "e", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
        try store.append(ride: "e", .end(at: t0 + 9, reason: .rider, metres: 3), reply: nil)
        let g = Ride(id: "g", planID: "p", owner: nil, limit: nil, startedAt: t0)
        let updates = try ClusterCatchUp(cursor: JournalCursor(txid: 0, position: 0)).merge([
            feed("g", 3, .resume(at: t0 + 2_000)),
            feed("u", 2, .pause(at: t0 + 500)),
            feed("e", 2, .end(at: t0 + 9, reason: .rider, metres: 3)),
        ], rides: ["g": RideBook.Entry(ride: g, seq: 1)], store: store)
        XCTAssertEqual(updates.map { "\($0.entry.ride.id):\($0.entry.seq):\($0.entry.ride.state)" }, ["g:3:riding", "u:2:paused"])
        XCTAssertEqual(updates[0].entry.ride, try store.ride("g")?.ride)
        XCTAssertEqual(updates[1].entry.ride.planID, "q")
    }
}
