@testable import RideService
import XCTest
import RideAuth
@testable import RideCore

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

/// Issue 25 finding 1: one authorization decision, re-evaluated when the token changes or
/// expires, asked by every path: the operator feed ends the moment the token stops allowing it.
extension ConnectionTests {
    func watching(_ ctx: Context, exp: Int64) -> Connection {
        var op = Connection(pre: pre)
        _ = op.upgradeToken(ctx.token(TokenClaims(sub: "op", scope: .watch, ops: true, exp: exp)), ctx)
        XCTAssertEqual(describe(op.received(msg(#"{"type":"watch_all","id":"w"}"#), ctx, from: me)), ["watch all w"])
        XCTAssertTrue(op.watchingAll)
        return op
    }

    func testAuthWithATokenWithoutOpsEndsTheFeedAtOnce() {
        let ctx = Context(now: t0, auth: true)
        ctx.add("r", owner: "alice")
        var op = watching(ctx, exp: t0 / 1000 + 3600)
        let link = ctx.token(TokenClaims.share(ride: "r", now: t0 / 1000, ttl: 3600))
        XCTAssertEqual(describe(op.received(msg(#"{"type":"auth","id":"a","token":"\#(link)"}"#), ctx, from: me)),
                       ["unwatch all -", #"{"type":"authenticated","id":"a","sub":"share:r","scope":"watch"}"#])
        XCTAssertFalse(op.watchingAll)
        XCTAssertFalse(op.mayWatchAll(ctx.wallSeconds(), authOn: true))
        XCTAssertEqual(describe(op.received(msg(#"{"type":"watch_all","id":"w2"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"w2","code":"forbidden","message":"watch_all needs an operator (ops) token"}"#])
        // Another ops token keeps it: nothing ends.
        var op2 = watching(ctx, exp: t0 / 1000 + 3600)
        let other = ctx.token(TokenClaims(sub: "op2", scope: .control, ops: true, exp: t0 / 1000 + 60))
        XCTAssertEqual(describe(op2.received(msg(#"{"type":"auth","token":"\#(other)"}"#), ctx, from: me)),
                       [#"{"type":"authenticated","sub":"op2","scope":"control"}"#])
        XCTAssertTrue(op2.watchingAll)
    }

    func testAnExpiredOpsTokenEndsTheFeedBeforeTheRefusal() {
        let ctx = Context(now: t0, auth: true)
        var op = watching(ctx, exp: t0 / 1000 + 60)
        XCTAssertTrue(op.mayWatchAll(ctx.wallSeconds(), authOn: true))
        ctx.clock += (60 + TokenSigner.leeway) * 1000
        // Every delivery asks: nothing more of the feed from this second on, sweep or not.
        XCTAssertFalse(op.mayWatchAll(ctx.wallSeconds(), authOn: true))
        XCTAssertEqual(describe(op.sweep(ctx)), ["end feed",
                                                #"{"type":"error","code":"unauthorized","message":"token expired; reconnect with a new one"}"#,
                                                "close 4401 unauthorized"])
        XCTAssertFalse(op.watchingAll)
        XCTAssertTrue(Connection(pre: pre).mayWatchAll(ctx.wallSeconds(), authOn: false), "auth off: anyone")
    }

    func testMessagesDeferredBehindTheWorkerAreCheckedAgainWhenTheirTurnComes() {
        let ctx = Context(now: t0, auth: true)
        ctx.add("r", owner: "g")
        var c = Connection(pre: pre)
        _ = c.upgradeToken(ctx.token(TokenClaims(sub: "g", scope: .control, exp: t0 / 1000 + 60)), ctx)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"pause","id":"p","ride":"r"}"#), ctx, from: me)), ["submit pause r id=p scope=g from=9"])
        let get = c.received(msg(#"{"type":"get","id":"g","ride":"r"}"#), ctx, from: me)
        guard case .submit(.lookup(_, _, let then)) = get.first else { return XCTFail("not deferred: \(describe(get))") }
        ctx.clock += (60 + TokenSigner.leeway) * 1000
        XCTAssertEqual(describe(c.resumed(then, found: ctx.rides["r"], failure: nil, ctx, from: me)),
                       [#"{"type":"error","id":"g","code":"unauthorized","message":"token expired; reconnect with a new one"}"#,
                        "close 4401 unauthorized"])
    }

    /// Finding 3: token times on the wall clock, which a step moves at once, while the ride
    /// clock slews toward it.
    func testTokenTimesAreJudgedOnTheWallClockNotTheRideClock() {
        let ctx = Context(now: t0, auth: true)
        ctx.wall = t0 / 1000 + 600  // the wall stepped 10 minutes ahead; the ride clock has not
        var fresh = Connection(pre: pre)
        let issued = TokenClaims(sub: "h", scope: .control, exp: ctx.wall! + 3600, nbf: ctx.wall! - 5)
        XCTAssertEqual(describe(fresh.upgradeToken(ctx.token(issued), ctx)), [])
        XCTAssertTrue(fresh.authenticated)
        var stale = Connection(pre: pre)
        let old = TokenClaims(sub: "h", scope: .control, exp: ctx.wall! - 540)
        XCTAssertEqual(describe(stale.upgradeToken(ctx.token(old), ctx)),
                       [#"{"type":"error","code":"unauthorized","message":"token refused: token expired"}"#, "close 4401 unauthorized"])
        // The sweep judges the same way.
        var soon = Connection(pre: pre)
        _ = soon.upgradeToken(ctx.token(TokenClaims(sub: "h", scope: .control, exp: ctx.wall! + 10)), ctx)
        ctx.wall! += 10 + TokenSigner.leeway
        XCTAssertEqual(describe(soon.sweep(ctx)).last, "close 4401 unauthorized")
    }
}
