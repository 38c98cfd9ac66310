@testable import RideService
import Foundation
import XCTest
@testable import RideCore
import RideStore

/// The operator feed's frames, byte for byte.
final class OpsMessagesTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let plan = #"{"id":"default","name":"Standard","currency":"KRW","price":500,"per_min":[{"start":0,"rate":180,"interval":1}],"billing":"completed"}"#

    func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

    /// Riding with a limit and an owner, 192 s in.
    var a: Ride { Ride(id: "r-a", planID: "default", owner: "u1", limit: 1800, startedAt: t0) }
    /// Paused since 40 s of riding, no limit, no owner.
    var b: Ride {
        let r = Ride(id: "r-b", planID: "default", owner: nil, limit: nil, startedAt: t0 + 1_000)
        guard case .success(let p) = r.applying(.pause(at: t0 + 41_000)) else { fatalError() }
        return p
    }

    let rowA = #"{"ride":"r-a","state":"riding","elapsed":192,"paused":0,"fare":1040,"currency":"KRW","remaining":1608,"limit":1800,"owner":"u1","plan":"default","started_at":1764430000000,"paused_since":null,"watchers":2}"#
    let rowB = #"{"ride":"r-b","state":"paused","elapsed":40,"paused":151,"fare":500,"currency":"KRW","plan":"default","started_at":1764430001000,"paused_since":1764430041000,"watchers":0}"#

    func testFleetFrameIsOnePositionalRowPerRide() {
        var f = OpsMessages.Fleet(seq: 7, at: t0 + 192_000, counts: RideCounts(riding: 1, paused: 1, ended: 3), rides: 2, prefix: 16)
        f.row(a, .standard, at: t0 + 192_000, watchers: 2)
        f.row(b, .standard, at: t0 + 192_000, watchers: 0)
        let bytes = f.finish()
        XCTAssertEqual(Array(bytes.prefix(16)), Array(repeating: 0, count: 16))
        XCTAssertEqual(text(Array(bytes.dropFirst(16))),
                       #"{"type":"fleet","seq":7,"at":1764430192000,"counts":{"riding":1,"paused":1,"ended":3},"rows":[["r-a","riding",192,0,1040,1608,2],["r-b","paused",40,151,500,null,0]]}"#)
    }

    func testEmptyFleetStillMakesAFrame() {
        let f = OpsMessages.Fleet(seq: 1, at: t0, counts: RideCounts(), rides: 0, prefix: 0)
        XCTAssertEqual(text(f.finish()), #"{"type":"fleet","seq":1,"at":1764430000000,"counts":{"riding":0,"paused":0,"ended":0},"rows":[]}"#)
    }

    func testSnapshotSplitsABigFleetAcrossFrames() {
        let counts = RideCounts(riding: 1, paused: 1, ended: 3)
        let rides = [(ride: a, plan: FarePlan.standard, watchers: 2), (ride: b, plan: FarePlan.standard, watchers: 0)]
        let head = #"{"type":"snapshot","id":"w1","seq":7,"at":1764430192000,"#
        let c = #""counts":{"riding":1,"paused":1,"ended":3}"#
        XCTAssertEqual(OpsMessages.snapshot(id: "w1", seq: 7, at: t0 + 192_000, counts: counts, rides: rides, perFrame: 1, prefix: 0).map(text), [
            head + #""more":true,"# + c + #","rides":["# + rowA + "]}",
            head + #""more":false,"# + c + #","rides":["# + rowB + "]}",
        ])
        XCTAssertEqual(OpsMessages.snapshot(id: "w1", seq: 7, at: t0 + 192_000, counts: counts, rides: rides, prefix: 0).map(text), [
            head + #""more":false,"# + c + #","rides":["# + rowA + "," + rowB + "]}",
        ])
        XCTAssertEqual(OpsMessages.snapshot(id: nil, seq: 0, at: t0, counts: RideCounts(), rides: [], prefix: 0).map(text), [
            #"{"type":"snapshot","seq":0,"at":1764430000000,"more":false,"counts":{"riding":0,"paused":0,"ended":0},"rides":[]}"#,
        ])
    }

    func testEventCarriesTheRideDocumentAndItsWatchers() {
        XCTAssertEqual(text(OpsMessages.event("pause", ride: b, plan: .standard, at: t0 + 41_000, watchers: 4, prefix: 0)),
                       #"{"type":"fleet_event","event":"pause","at":1764430041000,"ride":{"ride":"r-b","state":"paused","elapsed":40,"paused":0,"fare":500,"currency":"KRW","at":1764430041000,"started_at":1764430001000,"ended_at":null,"paused_since":1764430041000,"plan":"# + plan + #","watchers":4}}"#)
    }

    func testWarningAndUnwatched() {
        XCTAssertEqual(text(OpsMessages.warning(ride: "r-a", remaining: 300, at: t0, prefix: 0)),
                       #"{"type":"fleet_warning","ride":"r-a","remaining":300,"at":1764430000000}"#)
        XCTAssertEqual(text(OpsMessages.unwatched(id: "u1", prefix: 0)), #"{"type":"unwatched_all","id":"u1"}"#)
        XCTAssertEqual(text(OpsMessages.unwatched(id: nil, prefix: 0)), #"{"type":"unwatched_all"}"#)
    }

    func testListingRowsAddEndAndReasonAndTheCursor() {
        let r = Ride(id: "r-c", planID: "default", owner: nil, limit: nil, startedAt: t0)
        guard case .success(let c) = r.applying(.end(at: t0 + 200_400, reason: .rider, metres: 0)) else { return XCTFail() }
        XCTAssertEqual(text(OpsMessages.page([(c, .standard, 0)], at: t0 + 999_000, next: OpsMessages.cursor(RideKey(at: t0 + 200_400, id: "r-c")))),
                       #"{"rides":[{"ride":"r-c","state":"ended","elapsed":200,"paused":0,"fare":1040,"currency":"KRW","plan":"default","started_at":1764430000000,"ended_at":1764430200400,"paused_since":null,"reason":"rider","watchers":0}],"next":"1764430200400.r-c"}"#)
        XCTAssertEqual(text(OpsMessages.page([], at: t0, next: nil)), #"{"rides":[],"next":null}"#)
    }

    func testCursorRoundTripsAndRefusesWhatItNeverMade() {
        let k = RideKey(at: 5, id: "r.x:1")
        XCTAssertEqual(OpsMessages.cursor(k), "5.r.x:1")
        XCTAssertEqual(OpsMessages.parseCursor("5.r.x:1"), k)
        XCTAssertEqual(OpsMessages.parseCursor("-3.a"), RideKey(at: -3, id: "a"))
        for bad in ["", "abc", "5.", ".r", "x.r", "5.r 1", "5.r/1", "99999999999999999999.r"] {
            XCTAssertNil(OpsMessages.parseCursor(bad), bad)
        }
    }

    func testJournalAndWatchersFollowTheDocument() {
        let r = Ride(id: "r-c", planID: "default", owner: nil, limit: nil, startedAt: t0)
        guard case .success(let c) = r.applying(.end(at: t0 + 3, reason: .timeLimit, metres: 1200)) else { return XCTFail() }
        let journal: [RideTransition] = [.start(at: t0), .end(at: t0 + 3, reason: .timeLimit, metres: 1200)]
        let doc = text(OpsMessages.documentWithJournal(ride: c, plan: .standard, at: t0 + 5, journal: journal, watchers: 3))
        XCTAssertTrue(doc.hasPrefix(#"{"ride":"r-c","state":"ended","#), doc)
        XCTAssertTrue(doc.hasSuffix(#","journal":[{"event":"start","at":1764430000000},{"event":"end","at":1764430000003,"reason":"time_limit","distance":1200}],"watchers":3}"#), doc)
        // An operator's get: the state message with the same tail; without a journal, the plain state.
        let state = text(OpsMessages.journalState(ride: c, plan: .standard, at: t0 + 5, id: "g", journal: journal, watchers: 3, prefix: 0))
        XCTAssertEqual(state, #"{"type":"state","id":"g","# + doc.dropFirst())
        XCTAssertFalse(text(OpsMessages.journalState(ride: c, plan: .standard, at: t0 + 5, id: "g", journal: nil, watchers: 3, prefix: 0)).contains("watchers"))
    }

    /// protocol/examples/ops (the goldens test_golden.py holds the real server to): the
    /// encoders write those bytes for the golden's values.
    func testEncodersWriteTheOpsGoldens() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("protocol/examples/ops/server")
        func golden(_ name: String) throws -> String {
            try String(contentsOf: dir.appendingPathComponent(name + ".json"), encoding: .utf8)
                .trimmingCharacters(in: .newlines)
        }
        XCTAssertEqual(text(OpsMessages.unwatched(id: "u1", prefix: 0)), try golden("unwatched_all"))
        XCTAssertEqual(text(OpsMessages.warning(ride: "r-ops-2", remaining: 300, at: 1_796_121_705_000, prefix: 0)),
                       try golden("fleet_warning"))
    }
}
