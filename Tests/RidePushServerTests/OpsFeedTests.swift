import XCTest
import CLibWebSockets
@testable import RideCore
@testable import RidePushServer
import RideStore

/// What the registry publishes to the operator feed, in order, against a hand-advanced clock.
final class OpsFeedTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let pre = Int(clws_pre())

    func setUp(_ clock: ManualClock) throws -> (RideRegistry, OpsFeed, () -> [OpsItem]) {
        let ops = OpsFeed(threads: 2)
        var items: [OpsItem] = []
        ops.deliver = { items.append($0) }
        let reg = try RideRegistry(store: MemoryStore(), plans: [.standard], shards: 2, clock: clock, metrics: Metrics(), ops: ops)
        return (reg, ops, { items })
    }

    func text(_ item: OpsItem) -> String { String(decoding: item.bytes[pre...], as: UTF8.self) }

    func testNothingIsEncodedWhileNobodyWatches() throws {
        let clock = ManualClock(t0)
        let (reg, ops, items) = try setUp(clock)
        _ = reg.start(id: nil, rideID: "r-a", planID: nil, limit: nil, owner: nil, scope: "")
        clock.advance(seconds: 1)
        _ = reg.tick(seq: 1, at: clock.now())
        _ = reg.control(.end, rideID: "r-a", metres: nil, id: nil, scope: "") { _ in nil }
        XCTAssertTrue(items().isEmpty)
        XCTAssertEqual(ops.lastSeq.load(ordering: .relaxed), 1, "a snapshot still knows the tick it stands for")
    }

    func testTransitionsWarningsAndFramesArePublishedInCommitOrder() throws {
        let clock = ManualClock(t0)
        let (reg, ops, items) = try setUp(clock)
        ops.watching.store(1, ordering: .relaxed)
        _ = reg.start(id: nil, rideID: "r-a", planID: nil, limit: nil, owner: nil, scope: "")
        _ = reg.start(id: nil, rideID: "r-l", planID: nil, limit: 45, owner: nil, scope: "")
        clock.advance(seconds: 30)
        _ = reg.control(.pause, rideID: "r-a", metres: nil, id: "q1", scope: "") { _ in nil }
        clock.set(t0 + 31_000)
        _ = reg.tick(seq: 1, at: clock.now())
        clock.set(t0 + 46_000)
        _ = reg.tick(seq: 2, at: clock.now())

        let got = items()
        XCTAssertEqual(got.map(\.number), Array(1...7))
        XCTAssertEqual(got.map(\.isFrame), [false, false, false, false, true, false, true])
        let docs = try got.map { try JSON.parse(Array($0.bytes[pre...])) }
        XCTAssertEqual(docs.map { $0["type"]!.string! }, ["fleet_event", "fleet_event", "fleet_event", "fleet_warning", "fleet", "fleet_event", "fleet"])
        XCTAssertEqual(docs.map { $0["event"]?.string }, ["start", "start", "pause", nil, nil, "end", nil])
        XCTAssertEqual(docs.map { $0["at"]?.int }, [t0, t0, t0 + 30_000, t0 + 31_000, t0 + 31_000, t0 + 45_000, t0 + 46_000])
        XCTAssertEqual(docs[2]["ride"]?["paused_since"]?.int, t0 + 30_000)
        XCTAssertEqual(docs[5]["ride"]?["receipt"]?["reason"]?.string, "time_limit", "an auto-end at the limit instant")
        XCTAssertEqual(text(got[3]), #"{"type":"fleet_warning","ride":"r-l","remaining":14,"at":1764430031000}"#)
        XCTAssertEqual(text(got[4]),
                       #"{"type":"fleet","seq":1,"at":1764430031000,"counts":{"riding":1,"paused":1,"ended":0},"rows":[["r-a","paused",30,1,500,null,0],["r-l","riding",31,0,500,14,0]]}"#)
        XCTAssertEqual(text(got[6]),
                       #"{"type":"fleet","seq":2,"at":1764430046000,"counts":{"riding":0,"paused":1,"ended":1},"rows":[["r-a","paused",30,16,500,null,0]]}"#)
        XCTAssertEqual(ops.lastNumber, 7, "what a snapshot taken now covers")
    }

    func testARetryPublishesNothing() throws {
        let clock = ManualClock(t0)
        let (reg, ops, items) = try setUp(clock)
        ops.watching.store(1, ordering: .relaxed)
        _ = reg.start(id: "s1", rideID: "r-a", planID: nil, limit: nil, owner: nil, scope: "")
        _ = reg.start(id: "s1", rideID: "r-a", planID: nil, limit: nil, owner: nil, scope: "")
        _ = reg.control(.end, rideID: "r-a", metres: nil, id: "e1", scope: "") { _ in nil }
        _ = reg.control(.end, rideID: "r-a", metres: nil, id: "e1", scope: "") { _ in nil }
        _ = reg.control(.pause, rideID: "r-a", metres: nil, id: "p1", scope: "") { _ in nil }  // refused: ended
        XCTAssertEqual(items().map { try? JSON.parse(Array($0.bytes[pre...]))["event"]?.string }, ["start", "end"])
    }
}
