@testable import RideService
import XCTest
import RideAuth
@testable import RideCore
import RideProtocol
import RideServiceTesting
import RideStore

/// `register_push` / `unregister_push` (issue 38, item 1) through a connection: the token's
/// refusals on the service thread, then the job the store worker runs (here by hand, on a
/// memory store holding the rides) and the answer it gives.
final class PushRegistrationTests: XCTestCase {
    typealias Context = ConnectionTests.Context
    let t0: UnixMillis = 1_764_430_000_000
    let pre = EmbeddedService.headroom
    let me = Requester(shard: 0, session: 9)
    let apns = String(repeating: "ab", count: 32)

    /// A memory store with bob's ride "mine" (riding), carol's "theirs" and bob's ended "done".
    func store() throws -> MemoryStore {
        let s = MemoryStore()
        _ = try s.commit([
            .create(NewRide(id: "mine", planID: "default", owner: "bob", limit: nil, startedAt: t0), reply: nil),
            .create(NewRide(id: "theirs", planID: "default", owner: "carol", limit: nil, startedAt: t0), reply: nil),
            .create(NewRide(id: "done", planID: "default", owner: "bob", limit: nil, startedAt: t0), reply: nil),
            .append(JournalEntry(ride: "done", seq: 2, transition: .end(at: t0 + 1000, reason: .rider, metres: 0)), reply: nil),
        ])
        return s
    }

    /// Sends `json` on `c` and returns what the client gets: a frame made on the service
    /// thread, or the store worker's answer to the job it submitted (run on `store`).
    func ask(_ c: inout Connection, _ json: String, _ ctx: Context, _ store: RideStore, _ svc: EmbeddedService) -> String {
        let actions = c.received(Array(json.utf8), ctx, from: me)
        for a in actions {
            switch a {
            case .send(let f): return String(decoding: f[pre...], as: UTF8.self)
            case .submit(.read(_, _, let work)):
                _ = c.answered()
                return String(decoding: work(store, svc.registry).body[pre...], as: UTF8.self)
            case .close: continue
            default: XCTFail("unexpected \(a)")
            }
        }
        return "nothing"
    }

    func register(_ ride: String?, token: String? = nil, id: String = "q", kind: String = "liveactivity", type: String = "register_push") -> String {
        let r = ride.map { #","ride":"\#($0)""# } ?? ""
        return #"{"type":"\#(type)","id":"\#(id)","platform":"apns","kind":"\#(kind)"\#(r),"token":"\#(token ?? apns)"}"#
    }

    func code(_ answer: String) -> String? {
        (try? JSON.parse(Array(answer.utf8)))?["code"]?.string
    }

    func testARiderRegistersOnTheirOwnRidesOnlyAndAnOperatorOnAny() throws {
        let ctx = Context(now: t0, auth: true)
        let svc = EmbeddedService(ManualClock(t0))
        let s = try store()
        var bob = Connection(pre: pre)
        _ = bob.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .control)), ctx)
        XCTAssertEqual(ask(&bob, register("mine"), ctx, s, svc),
                       #"{"type":"push_registered","id":"q","platform":"apns","kind":"liveactivity","ride":"mine"}"#)
        XCTAssertEqual(try s.pushTargets(ride: "mine").map(\.rider), ["bob"])
        XCTAssertEqual(code(ask(&bob, register("theirs"), ctx, s, svc)), "forbidden")
        XCTAssertEqual(code(ask(&bob, register("nope"), ctx, s, svc)), "ride_not_found")
        XCTAssertEqual(code(ask(&bob, register("done"), ctx, s, svc)), "bad_request", "an ended ride takes no new target")
        XCTAssertEqual(try s.pushTargets(ride: "theirs"), [])
        // An operator registers on anyone's ride.
        var ops = Connection(pre: pre)
        _ = ops.upgradeToken(ctx.token(TokenClaims(sub: "op-1", scope: .control, ops: true)), ctx)
        XCTAssertEqual(code(ask(&ops, register("theirs", id: "o"), ctx, s, svc)), nil)
        XCTAssertEqual(try s.pushTargets(ride: "theirs").map(\.rider), ["op-1"])
        // Unregister: the same ownership rule; the target is gone.
        XCTAssertEqual(code(ask(&bob, register("theirs", type: "unregister_push"), ctx, s, svc)), "forbidden")
        XCTAssertEqual(ask(&bob, register("mine", id: "u", type: "unregister_push"), ctx, s, svc),
                       #"{"type":"push_unregistered","id":"u","platform":"apns","kind":"liveactivity","ride":"mine"}"#)
        XCTAssertEqual(try s.pushTargets(ride: "mine"), [])
    }

    func testUnauthenticatedWatchOnlyAndMalformedRequestsAreRefused() throws {
        let ctx = Context(now: t0, auth: true)
        let svc = EmbeddedService(ManualClock(t0))
        let s = try store()
        var anon = Connection(pre: pre)
        XCTAssertEqual(code(ask(&anon, register("mine"), ctx, s, svc)), "unauthorized")
        var watcher = Connection(pre: pre)
        _ = watcher.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .watch)), ctx)
        XCTAssertEqual(code(ask(&watcher, register("mine"), ctx, s, svc)), "forbidden")
        var bob = Connection(pre: pre)
        _ = bob.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .control)), ctx)
        XCTAssertEqual(code(ask(&bob, register(nil), ctx, s, svc)), "bad_request", "a live activity needs its ride")
        XCTAssertEqual(code(ask(&bob, register("mine", token: "xyz"), ctx, s, svc)), "bad_request", "not hex")
        XCTAssertEqual(code(ask(&bob, register("mine", kind: "push_to_start"), ctx, s, svc)), "bad_request", "push-to-start has no ride")
        XCTAssertEqual(try s.pushTargets(ride: "mine"), [])
    }

    func testPushToStartIsTheRidersAndAFifthReplacesTheOldest() throws {
        let ctx = Context(now: t0, auth: true)
        let svc = EmbeddedService(ManualClock(t0))
        let s = try store()
        var bob = Connection(pre: pre)
        _ = bob.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .control)), ctx)
        let tokens = (1...5).map { String(repeating: String(format: "%02x", $0), count: 32) }
        for (i, t) in tokens.enumerated() {
            ctx.mono += 1000  // one a second: within the control rate
            XCTAssertEqual(ask(&bob, register(nil, token: t, id: "p\(i)", kind: "push_to_start"), ctx, s, svc),
                           #"{"type":"push_registered","id":"p\#(i)","platform":"apns","kind":"push_to_start"}"#)
            ctx.mono += 1000
            XCTAssertEqual(code(ask(&bob, register("mine", token: t, id: "l\(i)"), ctx, s, svc)), nil)
        }
        XCTAssertEqual(try s.pushToStartTokens(rider: "bob").map(\.token), Array(tokens.dropFirst()))
        XCTAssertEqual(try s.pushTargets(ride: "mine").map(\.token), Array(tokens.dropFirst()))
    }

    func testWithAuthOffAnyoneRegistersAndTheRiderIsEmpty() throws {
        let ctx = Context(now: t0, auth: false)
        let svc = EmbeddedService(ManualClock(t0))
        let s = try store()
        var c = Connection(pre: pre)
        XCTAssertEqual(code(ask(&c, register("theirs"), ctx, s, svc)), nil)
        XCTAssertEqual(try s.pushTargets(ride: "theirs").map(\.rider), [""])
    }

    /// Sent while the connection's start is still at the store worker, a registration waits
    /// its turn (as a `get` does), so the ride it names is committed when its owner is read.
    func testARegistrationBehindAStartWaitsItsTurn() throws {
        let ctx = Context(now: t0, auth: true)
        let svc = EmbeddedService(ManualClock(t0))
        let s = try store()
        var bob = Connection(pre: pre)
        _ = bob.upgradeToken(ctx.token(TokenClaims(sub: "bob", scope: .control)), ctx)
        guard case .submit(.request)? = bob.received(Array(#"{"type":"start","ride":"new"}"#.utf8), ctx, from: me).first else {
            return XCTFail("the start goes to the worker")
        }
        let behind = bob.received(Array(register("new").utf8), ctx, from: me)
        guard case .submit(.lookup(nil, _, let then))? = behind.first, behind.count == 1 else { return XCTFail("\(behind)") }
        // The start commits; then the worker hands the registration back in turn.
        _ = try s.commit([.create(NewRide(id: "new", planID: "default", owner: "bob", limit: nil, startedAt: t0), reply: nil)])
        _ = bob.answered()
        let resumed = bob.resumed(then, found: nil, failure: nil, ctx, from: me)
        guard case .submit(.read(_, _, let work))? = resumed.first else { return XCTFail("\(resumed)") }
        XCTAssertEqual(String(decoding: work(s, svc.registry).body[pre...], as: UTF8.self),
                       #"{"type":"push_registered","id":"q","platform":"apns","kind":"liveactivity","ride":"new"}"#)
        XCTAssertEqual(try s.pushTargets(ride: "new").count, 1)
    }
}
