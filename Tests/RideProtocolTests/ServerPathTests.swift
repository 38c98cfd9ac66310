import RideCore
import XCTest
@testable import RideProtocol

/// The calls the server makes (ServerMessages from a Ride and a FarePlan; the operator rows
/// from the same) write exactly the golden bytes of protocol/examples: the encoder the server
/// sends is the one the goldens check, with no second copy to drift from it.
final class ServerPathTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    private func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

    private func apply(_ r: Ride, _ t: RideTransition, file: StaticString = #filePath, line: UInt = #line) -> Ride {
        guard case .success(let next) = r.applying(t) else {
            XCTFail("\(t) refused", file: file, line: line)
            return r
        }
        return next
    }

    /// The golden conversation (tests/test_golden.py's collect): r-42 with a 30-minute limit,
    /// r-43 without, both u1's, started at t0.
    var r42: Ride { Ride(id: "r-42", planID: "default", owner: "u1", limit: 1800, startedAt: t0) }
    var r43: Ride { Ride(id: "r-43", planID: "default", owner: "u1", limit: nil, startedAt: t0) }

    func testRideMessagesFromRidesAreTheServerGoldens() throws {
        let paused = apply(r42, .pause(at: t0 + 193_420))
        let ended = apply(r43, .end(at: t0 + 192_750, reason: .rider, metres: 1200))
        var tick: [UInt8] = [], tickLimit: [UInt8] = []
        ServerMessages.tick(into: &tick, ride: r43, plan: .standard, seq: 1234, at: t0 + 192_000, prefix: 0)
        ServerMessages.tick(into: &tickLimit, ride: r42, plan: .standard, seq: 1234, at: t0 + 193_000, prefix: 0)
        let share = try Goldens.text("server/share.json")
        let token = String(share[share.range(of: #""token":""#)!.upperBound...].dropLast(2))
        guard case .failure(let notJSON) = ClientCodec.decode(Array("not json".utf8)) else { return XCTFail() }
        let server: [String: [UInt8]] = [
            "authenticated": ServerMessages.authenticated(id: "q1", sub: "u1", scope: "control", prefix: 0),
            "error.bad_request": ServerMessages.error(notJSON),
            "error.ride_not_found": ServerMessages.error(ProtocolError(.rideNotFound, "no ride \"r-404\"", id: "q9")),
            "quote": ServerMessages.quote(id: "q8", plan: .standard, quote: FareEngine.quote(.standard, riding: 192, paused: 30),
                                          seconds: 192, paused: 30),
            "share": ServerMessages.share(ride: "r-43", id: "q5", url: "/?ride=r-43&token=\(token)", token: token, prefix: 0),
            "state.ended": ServerMessages.stateReplyAndPush(ride: ended, plan: .standard, at: t0 + 192_750, id: "q6", prefix: 0).reply,
            "state.paused": ServerMessages.stateReplyAndPush(ride: paused, plan: .standard, at: t0 + 193_420, id: "q4", prefix: 0).reply,
            "state.riding": ServerMessages.stateReplyAndPush(ride: r42, plan: .standard, at: t0, id: "q2", prefix: 0).reply,
            "state.subscribed": ServerMessages.state(ride: r42, plan: .standard, at: t0 + 192_040, id: "q3", prefix: 0),
            "tick": tick,
            "tick.limit": tickLimit,
            "unsubscribed": ServerMessages.unsubscribed(ride: "r-44", id: "q7", prefix: 0),
            "warning": ServerMessages.warning(ride: "r-44", remaining: 300, prefix: 0),
        ]
        let goldens = try Goldens.all("server")
        XCTAssertEqual(goldens.map(\.0), server.keys.sorted(), "one server call per golden")
        for (name, bytes) in goldens {
            XCTAssertEqual(server[name].map(text), text(bytes), name)
        }
    }

    /// The operator goldens (tests/test_golden.py's collect_ops): r-ops-1 started at s0 with a
    /// 30-minute limit and one watcher; r-ops-3 ended at once with 1,200 m.
    func testOperatorMessagesFromRidesAreTheOpsGoldens() throws {
        let s0: UnixMillis = 1_796_121_701_999
        let one = Ride(id: "r-ops-1", planID: "default", owner: "u1", limit: 1800, startedAt: s0)
        let onePaused = apply(one, .pause(at: 1_796_121_703_002))
        let three = apply(Ride(id: "r-ops-3", planID: "default", owner: "u1", limit: nil, startedAt: 1_796_121_703_003),
                          .end(at: 1_796_121_703_004, reason: .rider, metres: 1200))
        let counts = RideCounts(riding: 1, paused: 0, ended: 0)
        var fleet = OpsCodec.FleetEncoder(seq: 1_796_121_703, at: 1_796_121_703_000, counts: counts, rides: 1, prefix: 0)
        fleet.row(one, .standard, at: 1_796_121_703_000, watchers: 1)
        let journal: [RideTransition] = [.start(at: 1_796_121_703_003), .end(at: 1_796_121_703_004, reason: .rider, metres: 1200)]
        let ops: [String: [UInt8]] = [
            "fleet": fleet.finish(),
            "fleet_event": OpsCodec.encode(.fleetEvent(FleetEvent(
                event: TransitionKind(.pause(at: 0)), at: 1_796_121_703_002,
                ride: WatchedRide(ride: RideSnapshot(onePaused, .standard, at: 1_796_121_703_002), watchers: 1)))),
            "fleet_warning": OpsCodec.encode(.fleetWarning(FleetWarning(ride: "r-ops-2", remaining: 300, at: 1_796_121_705_000))),
            "snapshot": OpsCodec.encode(.snapshot(FleetSnapshot(
                id: "w1", seq: 1_796_121_702, at: 1_796_121_702_018, more: false, counts: counts,
                rides: [RideRow(one, .standard, at: 1_796_121_702_018, watchers: 1)]))),
            "state.journal": OpsCodec.encode(.state(WatchedRide(ride: RideSnapshot(three, .standard, at: 1_796_121_703_005),
                                                                journal: journal.map(JournalEntry.init), watchers: 0), id: "g1")),
            "unwatched_all": OpsCodec.encode(.unwatchedAll(id: "u1")),
        ]
        let goldens = try Goldens.all("ops/server")
        XCTAssertEqual(goldens.map(\.0), ops.keys.sorted(), "one operator message per golden")
        for (name, bytes) in goldens {
            XCTAssertEqual(ops[name].map(text), text(bytes), name)
        }
    }

    func testEveryMessageFollowsItsPrefixUnchanged() {
        let r = apply(r43, .end(at: t0 + 5_000, reason: .byOperator, metres: 0))
        for n in [0, 16] {
            let frames: [[UInt8]] = [
                ServerCodec.encode(.tick(RideTick(ride: "r-42", state: .riding, elapsed: 0, paused: 0, fare: 500, currency: "KRW", seq: 1, at: t0)), prefix: n),
                OpsCodec.encode(.unwatchedAll(id: nil), prefix: n),
                OpsCodec.encode(.fleetWarning(FleetWarning(ride: "r", remaining: 60, at: t0)), prefix: n),
                OpsCodec.encode(.fleet(FleetFrame(seq: 1, at: t0, counts: RideCounts(), rows: [FleetRow(ride: "r-42", state: .riding, elapsed: 0, paused: 0, fare: 500, remaining: 1800, watchers: 0)])), prefix: n),
                OpsCodec.encode(.snapshot(FleetSnapshot(id: nil, seq: 1, at: t0, more: false, counts: RideCounts(), rides: [])), prefix: n),
                OpsCodec.encode(.fleetEvent(FleetEvent(event: .end, at: t0, ride: WatchedRide(ride: RideSnapshot(r, .standard, at: t0 + 5_000), watchers: 0))), prefix: n),
            ]
            for f in frames {
                XCTAssertEqual(Array(f.prefix(n)), Array(repeating: 0, count: n))
                XCTAssertEqual(f.dropFirst(n).first, UInt8(ascii: "{"), text(f))
            }
        }
    }

    func testAnOperatorsEndSaysOperator() {
        let r = apply(r43, .end(at: t0 + 61_000, reason: .byOperator, metres: 0))
        let bytes = ServerMessages.state(ride: r, plan: .standard, at: t0 + 61_000, id: nil, prefix: 0)
        XCTAssertTrue(text(bytes).contains(#""reason":"operator""#), text(bytes))
        guard case .success(.state(let s, nil)) = ServerCodec.decode(bytes) else { return XCTFail(text(bytes)) }
        XCTAssertEqual(s.receipt?.reason, .byOperator)
        XCTAssertEqual(ServerCodec.encode(.state(s, id: nil)), bytes)
    }
}
