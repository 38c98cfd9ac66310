@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
@testable import RideCore
import RideStore

/// What the store worker and the ticker publish to the operator feed, in order, against a
/// hand-advanced clock (the worker's turn run by the EmbeddedService, no threads).
final class OpsFeedTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let pre = EmbeddedService.headroom

    func setUp(_ clock: ManualClock) -> (EmbeddedService, OpsFeed, () -> [OpsItem]) {
        let ops = OpsFeed(threads: 2, pre: EmbeddedService.headroom)
        var items: [OpsItem] = []
        ops.deliver = { items.append($0) }
        return (EmbeddedService(clock, ops: ops), ops, { items })
    }

    func text(_ item: OpsItem) -> String { String(decoding: item.bytes[pre...], as: UTF8.self) }
    func start(_ ride: String, limit: Int64? = nil) -> RideBook.Request { .start(ride: ride, plan: nil, limit: limit, owner: nil) }

    func testNothingIsEncodedWhileNobodyWatches() {
        let clock = ManualClock(t0)
        let (h, ops, items) = setUp(clock)
        h.request(start("r-a"))
        clock.advance(seconds: 1)
        _ = h.tick(seq: 1, at: clock.now())
        h.request(.command(.end, ride: "r-a", metres: nil))
        XCTAssertTrue(items().isEmpty)
        XCTAssertEqual(ops.lastSeq.load(ordering: .relaxed), 1, "a snapshot still knows the tick it stands for")
    }

    func testTransitionsWarningsAndFramesArePublishedInCommitOrder() throws {
        let clock = ManualClock(t0)
        let (h, ops, items) = setUp(clock)
        ops.watching.store(1, ordering: .relaxed)
        h.request(start("r-a"))
        h.request(start("r-l", limit: 45))
        clock.advance(seconds: 30)
        h.request(.command(.pause, ride: "r-a", metres: nil), id: "q1")
        clock.set(t0 + 31_000)
        _ = h.tick(seq: 1, at: clock.now())
        clock.set(t0 + 46_000)
        _ = h.tick(seq: 2, at: clock.now())

        let got = items()
        XCTAssertEqual(got.map(\.number), Array(1...7))
        XCTAssertEqual(got.map(\.isFrame), [false, false, false, false, true, true, false])
        let docs = try got.map { try JSON.parse(Array($0.bytes[pre...])) }
        XCTAssertEqual(docs.map { $0["type"]!.string! }, ["fleet_event", "fleet_event", "fleet_event", "fleet_warning", "fleet", "fleet", "fleet_event"])
        XCTAssertEqual(docs.map { $0["event"]?.string }, ["start", "start", "pause", nil, nil, nil, "end"])
        XCTAssertEqual(docs.map { $0["at"]?.int }, [t0, t0, t0 + 30_000, t0 + 31_000, t0 + 31_000, t0 + 46_000, t0 + 45_000])
        XCTAssertEqual(docs[2]["ride"]?["paused_since"]?.int, t0 + 30_000)
        XCTAssertEqual(docs[6]["ride"]?["receipt"]?["reason"]?.string, "time_limit", "an auto-end at the limit instant, after its commit")
        XCTAssertEqual(text(got[3]), #"{"type":"fleet_warning","ride":"r-l","remaining":14,"at":1764430031000}"#)
        XCTAssertEqual(text(got[4]),
                       #"{"type":"fleet","seq":1,"at":1764430031000,"counts":{"riding":1,"paused":1,"ended":0},"rows":[["r-a","paused",30,1,500,null,0],["r-l","riding",31,0,500,14,0]]}"#)
        // The ride whose end is on its way to the store no longer ticks, for operators either.
        XCTAssertEqual(text(got[5]),
                       #"{"type":"fleet","seq":2,"at":1764430046000,"counts":{"riding":0,"paused":1,"ended":0},"rows":[["r-a","paused",30,16,500,null,0]]}"#)
        XCTAssertEqual(ops.lastNumber, 7, "what a snapshot taken now covers")
    }

    func testRetriesRefusalsAndFailedCommitsPublishNothing() {
        let clock = ManualClock(t0)
        let (h, ops, items) = setUp(clock)
        ops.watching.store(1, ordering: .relaxed)
        h.request(start("r-a"), id: "s1")
        h.request(start("r-a"), id: "s1")
        h.store.failNext = StoreError(.unavailable, "disk full")
        h.request(.command(.pause, ride: "r-a", metres: nil), id: "p0")
        h.request(.command(.end, ride: "r-a", metres: nil), id: "e1")
        h.request(.command(.end, ride: "r-a", metres: nil), id: "e1")
        h.request(.command(.pause, ride: "r-a", metres: nil), id: "p1")  // refused: ended
        XCTAssertEqual(items().map { try? JSON.parse(Array($0.bytes[pre...]))["event"]?.string }, ["start", "end"])
    }
}
