import XCTest
import RideAuth
@testable import RideCore
@testable import RidePushServer

/// `watch_all` / `unwatch_all` through one connection's protocol logic, without a socket.
extension ConnectionTests {
    func testWatchAllIsForOpsTokensOnlyAndStaysOpenOtherwise() {
        let ctx = Context(now: t0, auth: true)
        var anon = Connection(pre: pre)
        let refused = describe(anon.received(msg(#"{"type":"watch_all","id":"w"}"#), ctx, from: me))
        XCTAssertEqual(refused.first, #"{"type":"error","id":"w","code":"unauthorized","message":"authenticate first: a token in ?token=, an Authorization header or an auth message"}"#)
        XCTAssertEqual(refused.last, "close 4401 unauthorized")

        var rider = Connection(pre: pre)
        _ = rider.upgradeToken(ctx.token(TokenClaims(sub: "alice", scope: .control, exp: t0 / 1000 + 60)), ctx)
        XCTAssertEqual(describe(rider.received(msg(#"{"type":"watch_all","id":"w"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"w","code":"forbidden","message":"watch_all needs an operator (ops) token"}"#])
        XCTAssertFalse(rider.closing)

        var op = Connection(pre: pre)
        _ = op.upgradeToken(ctx.token(TokenClaims(sub: "op", scope: .watch, ops: true, exp: t0 / 1000 + 60)), ctx)
        XCTAssertEqual(describe(op.received(msg(#"{"type":"watch_all","id":"w"}"#), ctx, from: me)), ["watch all w"])
        XCTAssertEqual(describe(op.received(msg(#"{"type":"unwatch_all"}"#), ctx, from: me)), ["unwatch all -"])
        XCTAssertEqual(ctx.counted.suffix(3), ["watch_all|forbidden", "watch_all|ok", "unwatch_all|ok"])
    }

    func testWatchAllWaitsItsTurnBehindRequestsAtTheWorker() throws {
        let ctx = Context(now: t0, auth: false)
        ctx.add("r", owner: nil)
        var c = Connection(pre: pre)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"end","id":"e","ride":"r"}"#), ctx, from: me)), ["submit end r id=e scope= from=9"])
        let w = c.received(msg(#"{"type":"watch_all","id":"w"}"#), ctx, from: me)
        XCTAssertEqual(describe(w), ["submit lookup -"], "not before the end's reply")
        guard case .submit(.lookup(_, _, let then)) = w[0] else { return XCTFail() }
        XCTAssertEqual(c.answered().count, 0)
        XCTAssertEqual(describe(c.resumed(then, found: nil, failure: nil, ctx, from: me)), ["watch all w"])
        XCTAssertEqual(c.inFlight, 0)
    }

    func testSnapshotsAreRateLimitedAndOperatorsGetTheJournalThroughTheWorker() {
        let ctx = Context(now: t0, auth: true)
        ctx.config.controlRate = 2
        ctx.add("r", owner: "alice")
        var op = Connection(pre: pre)
        _ = op.upgradeToken(ctx.token(TokenClaims(sub: "op", scope: .control, ops: true, exp: t0 / 1000 + 60)), ctx)
        XCTAssertEqual((0..<3).map { describe(op.received(msg(#"{"type":"watch_all","id":"w\#($0)"}"#), ctx, from: me)) }, [
            ["watch all w0"], ["watch all w1"],
            [#"{"type":"error","id":"w2","code":"rate_limited","message":"more than 2 requests per second; slow down"}"#],
        ])
        XCTAssertEqual(ctx.limited, 1)
        XCTAssertEqual(describe(op.received(msg(#"{"type":"get","id":"g","ride":"r"}"#), ctx, from: me)), ["submit other"])
        var rider = Connection(pre: pre)
        _ = rider.upgradeToken(ctx.token(TokenClaims(sub: "alice", scope: .control, exp: t0 / 1000 + 60)), ctx)
        let plain = describe(rider.received(msg(#"{"type":"get","id":"g","ride":"r"}"#), ctx, from: me))
        XCTAssertTrue(plain[0].hasPrefix(#"{"type":"state","id":"g","ride":"r""#) && !plain[0].contains("journal"), plain[0])
    }
}
