@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
@testable import RideCore
import RideStore

/// A node's view of a ride behind the shared store (issue 39, item 0): another node paused or
/// resumed it and this node has not heard yet. The answer must be the one a single node would
/// give, never `invalid_transition` for a transition valid from the store's state.
final class StaleViewTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    /// Another node's entries for `ride`, written straight into the shared store.
    func otherNodeWrites(_ h: EmbeddedService, _ ride: String, _ entries: [(Int64, RideTransition)]) throws {
        let results = try h.store.inner.commit(entries.map { .append(JournalEntry(ride: ride, seq: $0.0, transition: $0.1), reply: nil) })
        XCTAssertEqual(results, Array(repeating: .written, count: entries.count))
    }

    func testAnEndDecidedOnAStaleViewIsDecidedAgainOnTheStoresState() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock, shared: true)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        try otherNodeWrites(h, "r", [(2, .pause(at: t0 + 60_000)), (3, .resume(at: t0 + 120_000))])
        clock.advance(seconds: 180)
        // This node still thinks the ride has one entry: its end goes to the store as entry 2,
        // is refused (not next), and is decided again after the other node's resume.
        let end = h.request(.command(.end, ride: "r", metres: nil), id: "e1")
        let reply = h.json(try XCTUnwrap(end.reply))
        XCTAssertEqual(reply["type"]?.string, "state", "\(reply)")
        XCTAssertEqual(reply["state"]?.string, "ended")
        XCTAssertEqual(reply["id"]?.string, "e1")
        XCTAssertEqual(try h.store.ride("r")?.journal, [.start(at: t0), .pause(at: t0 + 60_000), .resume(at: t0 + 120_000),
                                                         .end(at: t0 + 180_000, reason: .rider, metres: 0)])
        // Ridden 120 s of 180: the pause the other node recorded is not billed.
        XCTAssertEqual(reply["elapsed"]?.int, 120)
        XCTAssertEqual(h.store.commits.count, 3, "the start, the refused end, the end decided again")
    }

    func testAResumeRefusedOnTheBookIsCheckedAgainstTheStore() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock, shared: true)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        try otherNodeWrites(h, "r", [(2, .pause(at: t0 + 30_000))])
        clock.advance(seconds: 60)
        // The book says riding (resume not allowed); the store says paused: resume applies.
        let resume = h.request(.command(.resume, ride: "r", metres: nil), id: "r1")
        let reply = h.json(try XCTUnwrap(resume.reply))
        XCTAssertEqual(reply["state"]?.string, "riding", "\(reply)")
        XCTAssertEqual(try h.store.ride("r")?.seq, 3)
        XCTAssertEqual(h.registry.find("r").map { h.registry.snapshot($0).state }, .riding)
    }

    func testATransitionInvalidOnTheStoresStateIsStillRefused() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock, shared: true)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        try otherNodeWrites(h, "r", [(2, .end(at: t0 + 10_000, reason: .rider, metres: 0))])
        clock.advance(seconds: 20)
        let pause = h.request(.command(.pause, ride: "r", metres: nil), id: "p1")
        let reply = h.json(try XCTUnwrap(pause.reply))
        XCTAssertEqual(reply["type"]?.string, "error")
        XCTAssertEqual(reply["code"]?.string, "invalid_transition")
        XCTAssertEqual(try h.store.ride("r")?.seq, 2, "nothing written")
        XCTAssertEqual(h.registry.find("r").map { h.registry.snapshot($0).state }, .ended, "the other node's end adopted")
    }

    func testOneNodeAloneReadsNothingMoreForARefusal() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        let resume = h.request(.command(.resume, ride: "r", metres: nil), id: "r1")
        XCTAssertEqual(h.json(try XCTUnwrap(resume.reply))["code"]?.string, "invalid_transition")
        XCTAssertEqual(h.store.commits.count, 1)
    }

    func testAnotherNodeWinningEveryTimeIsAnsweredAfterThreeDecisions() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock, shared: true)
        h.request(.start(ride: "r", plan: nil, limit: nil, owner: nil))
        // Before each of this node's commits the other node appends one more entry.
        var seq: Int64 = 1
        h.store.beforeCommit = { [unowned h] in
            seq += 1
            let t: RideTransition = seq % 2 == 0 ? .pause(at: self.t0 + seq * 1_000) : .resume(at: self.t0 + seq * 1_000)
            _ = try? h.store.inner.commit([.append(JournalEntry(ride: "r", seq: seq, transition: t), reply: nil)])
        }
        clock.advance(seconds: 60)
        let end = h.request(.command(.end, ride: "r", metres: nil), id: "e1")
        let reply = h.json(try XCTUnwrap(end.reply))
        XCTAssertEqual(reply["type"]?.string, "error", "\(reply)")
        XCTAssertEqual(reply["code"]?.string, "invalid_transition")
        XCTAssertEqual(h.store.commits.count, 1 + StoreCoordinator.maxAttempts)
    }
}
