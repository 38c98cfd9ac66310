@testable import RideService
import XCTest
import RideAuth
@testable import RideCore
import RideProtocol

/// One connection's protocol logic without a socket: messages in, actions out.
final class ConnectionTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let pre = 16
    let me = Requester(shard: 0, session: 9)

    final class Context: ConnectionContext {
        var config = ServerConfig()
        var signer: TokenSigner?
        var verifier: TokenVerifier?
        var clock: UnixMillis
        /// The wall clock, when a test sets it apart from the ride clock (a step the ride clock slews).
        var wall: Int64?
        var mono: Int64 = 10_000
        var rides: [String: LiveRide] = [:]
        var counted: [String] = []
        var limited = 0
        init(now: UnixMillis, auth: Bool) {
            clock = now
            let secret = Array("0123456789abcdef0123456789abcdef".utf8)
            signer = auth ? TokenSigner(secret: secret) : nil
            verifier = auth ? TokenVerifier(secret: secret) : nil
        }
        func now() -> UnixMillis { clock }
        func wallSeconds() -> Int64 { wall ?? clock / 1000 }
        func monotonic() -> Int64 { mono }
        func ride(_ id: String) -> LiveRide? { rides[id] }
        func snapshot(_ live: LiveRide) -> Ride { live.ride }
        func plan(_ id: String?) -> FarePlan? { id == nil || id == "default" ? .standard : nil }
        func count(_ type: String, _ result: String) { counted.append(type + "|" + result) }
        func rateLimited() { limited += 1 }
        func add(_ id: String, owner: String?) {
            rides[id] = LiveRide(ride: Ride(id: id, planID: "default", owner: owner, limit: nil, startedAt: clock), plan: PlanBox(.standard), shards: 1)
        }
        func token(_ claims: TokenClaims) -> String { signer!.sign(claims) }
    }

    func msg(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// Frames sent, as JSON; other actions described in words, in order.
    func describe(_ actions: [ConnectionAction]) -> [String] {
        actions.map { a in
            switch a {
            case .send(let f): return String(decoding: f[pre...], as: UTF8.self)
            case .submit(let job):
                switch job {
                case .request(let r, let id, let scope, _, let from, _): return "submit \(r.fingerprint) id=\(id ?? "-") scope=\(scope) from=\(from.session)"
                case .lookup(let ride, _, let then):
                    if case .bytes = then { return "submit behind: frame" }
                    return "submit lookup \(ride ?? "-")"
                default: return "submit other"
                }
            case .subscribe(let live): return "subscribe \(live.id)"
            case .unsubscribe(let r): return "unsubscribe \(r)"
            case .close(let code, let reason): return "close \(code) \(reason)"
            case .pauseReading: return "pause reading"
            case .resumeReading: return "resume reading"
            case .watchAll(let id): return "watch all \(id ?? "-")"
            case .unwatchAll(let id): return "unwatch all \(id ?? "-")"
            case .endFeed: return "end feed"
            }
        }
    }

    func testBadInputIsAnsweredAndTheConnectionStays() {
        let ctx = Context(now: t0, auth: false)
        var c = Connection(pre: pre)
        XCTAssertEqual(describe(c.received(msg("{nope"), ctx, from: me)),
                       [#"{"type":"error","code":"bad_request","message":"message is not valid JSON (expected a key at byte 1)"}"#])
        XCTAssertEqual(describe(c.received(msg(#"{"type":"fly","id":"x"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"x","code":"unknown_type","message":"unknown message type \"fly\""}"#])
        XCTAssertFalse(c.closing)
    }

    func testControlGoesToTheWorkerAndLaterAnswersWaitTheirTurn() throws {
        let ctx = Context(now: t0, auth: false)
        ctx.add("r", owner: nil)
        var c = Connection(pre: pre)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"pause","id":"p","ride":"r"}"#), ctx, from: me)),
                       ["submit pause r id=p scope= from=9"])
        XCTAssertEqual(c.inFlight, 1)
        // A read while the pause is at the worker: handed back in turn, not answered now.
        let get = c.received(msg(#"{"type":"get","id":"g","ride":"r"}"#), ctx, from: me)
        XCTAssertEqual(describe(get), ["submit lookup r"])
        // So is a quote's answer and an error.
        XCTAssertEqual(describe(c.received(msg(#"{"type":"quote","id":"q","seconds":60}"#), ctx, from: me)), ["submit lookup -"])
        XCTAssertEqual(describe(c.failed(ProtocolError(.tooLarge, "message larger than 4096 bytes"), from: me)), ["submit behind: frame"])
        XCTAssertEqual(c.inFlight, 4)
        XCTAssertEqual(c.answered().count, 0)
        guard case .submit(.lookup(_, _, let then)) = get[0] else { return XCTFail() }
        let back = describe(c.resumed(then, found: ctx.rides["r"], failure: nil, ctx, from: me))
        XCTAssertEqual(back.count, 1)
        XCTAssertTrue(back[0].hasPrefix(#"{"type":"state","id":"g","ride":"r","state":"riding""#), back[0])
        XCTAssertEqual(c.inFlight, 2)
    }

    func testSubscriptionsAreCappedAndUnknownRidesAreLookedUpThenRefused() {
        let ctx = Context(now: t0, auth: false)
        ctx.config.maxSubscriptions = 2
        for r in ["a", "b", "c"] { ctx.add(r, owner: nil) }
        var c = Connection(pre: pre)
        for r in ["a", "b"] {
            let out = describe(c.received(msg(#"{"type":"subscribe","ride":"\#(r)"}"#), ctx, from: me))
            XCTAssertEqual(out.first, "subscribe \(r)")
        }
        XCTAssertEqual(describe(c.received(msg(#"{"type":"subscribe","ride":"a"}"#), ctx, from: me)).count, 1, "again: state only")
        XCTAssertEqual(describe(c.received(msg(#"{"type":"subscribe","id":"s3","ride":"c"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"s3","code":"too_many_subscriptions","message":"at most 2 subscriptions per connection"}"#])
        XCTAssertEqual(c.subscribed, ["a", "b"])
        XCTAssertEqual(describe(c.received(msg(#"{"type":"unsubscribe","ride":"a"}"#), ctx, from: me)),
                       ["unsubscribe a", #"{"type":"unsubscribed","ride":"a"}"#])
        let miss = c.received(msg(#"{"type":"subscribe","id":"m","ride":"ghost"}"#), ctx, from: me)
        XCTAssertEqual(describe(miss), ["submit lookup ghost"])
        guard case .submit(.lookup(_, _, let then)) = miss[0] else { return XCTFail() }
        XCTAssertEqual(describe(c.resumed(then, found: nil, failure: nil, ctx, from: me)),
                       [#"{"type":"error","id":"m","code":"ride_not_found","message":"no ride \"ghost\""}"#])
        XCTAssertEqual(c.subscribed, ["b"])
    }

    func testAuthRequiredRateLimitAndFlooding() {
        let ctx = Context(now: t0, auth: true)
        ctx.config.controlRate = 2
        var c = Connection(pre: pre)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"get","id":"g","ride":"r"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"g","code":"unauthorized","message":"authenticate first: a token in ?token=, an Authorization header or an auth message"}"#,
                        "close 4401 unauthorized"])
        XCTAssertTrue(c.received(msg(#"{"type":"get","ride":"r"}"#), ctx, from: me).isEmpty, "nothing after the close")

        var d = Connection(pre: pre)
        let token = ctx.token(TokenClaims(sub: "alice", scope: .control, exp: t0 / 1000 + 600))
        XCTAssertEqual(describe(d.received(msg(#"{"type":"auth","id":"a","token":"\#(token)"}"#), ctx, from: me)),
                       [#"{"type":"authenticated","id":"a","sub":"alice","scope":"control"}"#])
        XCTAssertEqual(describe(d.received(msg(#"{"type":"start","ride":"x1"}"#), ctx, from: me)), ["submit start x1 id=- scope=alice from=9"])
        _ = d.answered()
        _ = d.received(msg(#"{"type":"start","ride":"x2"}"#), ctx, from: me)
        _ = d.answered()
        XCTAssertEqual(describe(d.received(msg(#"{"type":"start","id":"x3","ride":"x3"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"x3","code":"rate_limited","message":"more than 2 control messages per second; slow down"}"#])
        var last: [String] = []
        for _ in 0..<10 { last = describe(d.received(msg(#"{"type":"start","ride":"y"}"#), ctx, from: me)) }
        XCTAssertEqual(last.last, "close 1008 flooding", "more than rate × 5 strikes")
        XCTAssertEqual(ctx.limited, 11)
        // The next second, a fresh connection's window is its own.
        ctx.mono += 1000
        var e = Connection(pre: pre)
        _ = e.upgradeToken(token, ctx)
        XCTAssertEqual(describe(e.received(msg(#"{"type":"start","ride":"z"}"#), ctx, from: me)), ["submit start z id=- scope=alice from=9"])
    }

    func testWatchTokensMayNotControlOrWatchOthersRides() {
        let ctx = Context(now: t0, auth: true)
        ctx.add("mine", owner: "bob")
        ctx.add("theirs", owner: "carol")
        var c = Connection(pre: pre)
        _ = c.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .watch)), ctx)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"start","id":"s"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"s","code":"forbidden","message":"this token may only watch rides"}"#])
        XCTAssertEqual(describe(c.received(msg(#"{"type":"subscribe","ride":"mine"}"#), ctx, from: me)).first, "subscribe mine")
        XCTAssertEqual(describe(c.received(msg(#"{"type":"subscribe","id":"t","ride":"theirs"}"#), ctx, from: me)),
                       [#"{"type":"error","id":"t","code":"forbidden","message":"this token may not watch ride \"theirs\""}"#])
    }

    /// Issue 15 item 7: re-authenticating with another token re-checks every subscription.
    func testReauthenticatingEndsSubscriptionsTheNewTokenDoesNotAllow() {
        let ctx = Context(now: t0, auth: true)
        ctx.add("shared", owner: "dave")
        ctx.add("own", owner: "erin")
        var c = Connection(pre: pre)
        let link = ctx.token(TokenClaims.share(ride: "shared", now: t0 / 1000, ttl: 3600))
        _ = c.upgradeToken(link, ctx)
        XCTAssertEqual(describe(c.received(msg(#"{"type":"subscribe","ride":"shared"}"#), ctx, from: me)).first, "subscribe shared")
        let erin = ctx.token(TokenClaims(sub: "erin", scope: .control))
        _ = c.received(msg(#"{"type":"subscribe","ride":"own"}"#), ctx, from: me)  // not allowed by the link
        XCTAssertEqual(c.subscribed, ["shared"])
        XCTAssertEqual(describe(c.received(msg(#"{"type":"auth","id":"a2","token":"\#(erin)"}"#), ctx, from: me)),
                       ["unsubscribe shared", #"{"type":"unsubscribed","ride":"shared"}"#,
                        #"{"type":"authenticated","id":"a2","sub":"erin","scope":"control"}"#])
        XCTAssertEqual(c.subscribed, [])
    }

    func testExpiryAndTheAuthenticationDeadline() {
        let ctx = Context(now: t0, auth: true)
        ctx.add("r", owner: "f")
        var c = Connection(pre: pre)
        _ = c.upgradeToken(ctx.token(TokenClaims(sub: "f", scope: .control, exp: t0 / 1000 + 60)), ctx)
        _ = c.received(msg(#"{"type":"subscribe","ride":"r"}"#), ctx, from: me)
        XCTAssertTrue(c.sweep(ctx).isEmpty)
        XCTAssertTrue(c.authTimedOut(ctx).isEmpty, "authenticated: no deadline")
        ctx.clock += (60 + TokenSigner.leeway) * 1000
        XCTAssertEqual(describe(c.sweep(ctx)), ["unsubscribe r",
                                               #"{"type":"error","code":"unauthorized","message":"token expired; reconnect with a new one"}"#,
                                               "close 4401 unauthorized"])
        var quiet = Connection(pre: pre)
        XCTAssertEqual(describe(quiet.authTimedOut(ctx)),
                       [#"{"type":"error","code":"unauthorized","message":"not authenticated within 10 s of connecting"}"#, "close 4401 unauthorized"])
    }

    func testTooManyRequestsAtTheWorkerPauseReadingUntilHalfAreAnswered() {
        let ctx = Context(now: t0, auth: false)
        ctx.config.controlRate = 1_000_000
        var c = Connection(pre: pre)
        var paused = 0
        for i in 0..<Connection.maxInFlight {
            let out = describe(c.received(msg(#"{"type":"pause","ride":"r\#(i)"}"#), ctx, from: me))
            paused += out.filter { $0 == "pause reading" }.count
        }
        XCTAssertEqual(paused, 1)
        XCTAssertTrue(c.readingPaused)
        var resumed = 0
        for _ in 0..<(Connection.maxInFlight / 2) { resumed += describe(c.answered()).filter { $0 == "resume reading" }.count }
        XCTAssertEqual(resumed, 1)
        XCTAssertEqual(c.inFlight, Connection.maxInFlight / 2)
    }
}
