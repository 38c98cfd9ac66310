import RideCore
import RideProtocol
import XCTest
@testable import RidePushClient

/// The reconnect / backoff / resubscribe / token logic, driven by hand: a ManualClock, a
/// scripted jitter source and a fake transport (the harness plays the server). No sleeps.
final class ClientCoreTests: XCTestCase {
    let t0: Int64 = 1_764_430_000_000
    var tok: String { token(exp: t0 / 1000 + 3600) }

    // MARK: backoff

    func testBackoffDoublesFromHalfASecondToTwentySecondsWithTheTopOfTheJitterRange() {
        // Drawing exactly the ceiling gives the ceiling: the range is [0, ceiling], inclusive.
        var h = Harness(jitter: [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        var delays: [Int64] = []
        for _ in 0..<8 {
            h.fail("connection refused")
            delays.append(Harness.waitDelay(h.lastState)!)
            h.advanceToWakeup()
        }
        XCTAssertEqual(delays, [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000])
        XCTAssertEqual(h.connects, Array(1...9))
        XCTAssertEqual(h.states[0], .connecting(attempt: 0))
        XCTAssertEqual(h.states.last, .connecting(attempt: 8))
        XCTAssertEqual(h.tokenFetches, 1, "a cached token is reused across reconnects")
    }

    func testJitterCanBeZeroAndWaitsExactlyTheDrawnDelay() {
        // 501 % 501 == 0: a draw one past the ceiling wraps to an immediate retry.
        var h = Harness(jitter: [501, 733])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.fail("refused")
        XCTAssertEqual(Harness.waitDelay(h.lastState), 0)
        h.advance(millis: 0)
        XCTAssertEqual(h.connects, [1, 2])
        h.fail("refused")
        XCTAssertEqual(Harness.waitDelay(h.lastState), 733)
        h.advance(millis: 732)
        XCTAssertEqual(h.connects, [1, 2], "not before the drawn delay")
        h.advance(millis: 1)
        XCTAssertEqual(h.connects, [1, 2, 3])
    }

    func testSystemJitterStaysWithinEachCeiling() {
        var core = ClientCore(clock: ManualClock(), random: SystemRandomNumberGenerator())
        let ceilings: [Int64] = [500, 1000, 2000, 4000, 8000, 16000, 20000, 20000, 20000]
        for (n, ceiling) in ceilings.enumerated() {
            var lo = Int64.max, hi = Int64.min
            for _ in 0..<5000 {
                let d = core.backoff(n)
                lo = min(lo, d)
                hi = max(hi, d)
            }
            XCTAssertGreaterThanOrEqual(lo, 0)
            XCTAssertLessThanOrEqual(hi, ceiling)
            // Spread over the whole range (5000 uniform draws: failing these is ~e^-50 unlikely).
            XCTAssertLessThan(lo, ceiling / 50 + 1)
            XCTAssertGreaterThan(hi, ceiling - ceiling / 50 - 1)
        }
        XCTAssertLessThanOrEqual(core.backoff(200), 20000, "no overflow far past the cap")
    }

    func testBackoffResetsAfterAStableConnectionOnly() {
        var h = Harness(jitter: [UInt64.max])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.fail("refused")
        h.advanceToWakeup()
        h.fail("refused")
        h.advanceToWakeup()
        XCTAssertEqual(h.lastState, .connecting(attempt: 2))
        // Connected but dropped after 4.9 s: not stable, the exponent keeps growing.
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 0, at: t0, id: Harness.id(h.frames.last!)))
        for i in 1...4 { h.advance(millis: 980); h.server(tickJSON(elapsed: Int64(i), at: t0 + Int64(i) * 1000)) }
        h.advance(millis: 980)
        h.close(1006)
        XCTAssertEqual(Harness.waitDelay(h.lastState), Int64(UInt64.max % 2001), "attempt 2: ceiling 2000")
        h.advanceToWakeup()
        // Connected for 5 s: stable; the next drop starts over at 500 ms.
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 10, at: t0 + 10_000, id: Harness.id(h.frames.last!)))
        for _ in 1...5 { h.advance(millis: 1000); h.server(tickJSON(elapsed: 11, at: t0 + 11_000)) }
        h.close(1001, "server shutting down")
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .milliseconds(Int64(UInt64.max % 501)),
                                                         reason: .closedByServer(code: 1001, reason: "server shutting down")))
    }

    // MARK: close codes and tokens

    func testAnInvalidTokenStopsForGoodWithoutRetrying() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        let start = h.core.request(.start(ride: "r-43", plan: nil, limit: nil))
        h.run()
        h.token("not-a-jwt")
        h.open()
        let auth = h.frames[0]
        XCTAssertEqual(auth, #"{"type":"auth","id":"auth-0000000000000002","token":"not-a-jwt"}"#)
        h.server(#"{"type":"error","id":"auth-0000000000000002","code":"unauthorized","message":"token refused: bad signature"}"#)
        h.close(4401, "unauthorized")
        XCTAssertEqual(h.lastState, .closed(.unauthorized("token refused: bad signature")))
        XCTAssertEqual(h.connects, [1])
        XCTAssertNil(h.core.nextWakeup, "nothing scheduled: no retry")
        XCTAssertEqual(h.replies.map(\.0), [start])
        XCTAssertEqual(h.replies[0].1, .failure(.closed(.unauthorized("token refused: bad signature"))))
        XCTAssertEqual(h.failedFeeds.map(\.0), ["r-42"])
        h.advance(millis: 60_000)
        XCTAssertEqual(h.connects, [1])
        XCTAssertEqual(h.tokenFetches, 1)
    }

    func testAnExpiredTokenAsksTheProviderOnceThenReconnectsAtOnce() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        h.token(token(exp: t0 / 1000 + 100))
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 5, at: t0, id: Harness.id(h.frames.last!)))
        h.server(#"{"type":"error","code":"unauthorized","message":"token expired; reconnect with a new one"}"#)
        h.close(4401, "unauthorized")
        XCTAssertEqual(h.tokenFetches, 2, "the provider is asked after the expiry")
        XCTAssertEqual(h.connects, [1], "no reconnect with the expired token")
        let fresh = token(exp: t0 / 1000 + 7200, tag: "b")
        h.token(fresh)
        XCTAssertEqual(h.connects, [1, 2], "reconnected at once, no backoff")
        h.open()
        XCTAssertEqual(h.frames[0], #"{"type":"auth","id":"auth-0000000000000003","token":"\#(fresh)"}"#)
        // The fresh token refused as expired too: the provider is not asked again.
        h.server(#"{"type":"error","id":"auth-0000000000000003","code":"unauthorized","message":"token refused: token expired"}"#)
        h.close(4401)
        XCTAssertEqual(h.lastState, .closed(.unauthorized("token refused: token expired")))
        XCTAssertEqual(h.tokenFetches, 2)
    }

    func testAnExpiredTokenThatWorksAfterRefreshKeepsTheWatchGoing() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        h.token(token(exp: t0 / 1000 + 100))
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 5, at: t0, id: Harness.id(h.frames.last!)))
        h.server(#"{"type":"error","code":"unauthorized","message":"token expired; reconnect with a new one"}"#)
        h.close(4401)
        h.token(token(exp: t0 / 1000 + 7200, tag: "b"))
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, #"{"type":"subscribe","id":"s-0000000000000004","ride":"r-42"}"#)
        h.server(stateJSON(elapsed: 9, at: t0 + 4000, id: "s-0000000000000004"))
        XCTAssertEqual(h.lastState, .connected)
        if case .state(let s) = h.events.last!.1 { XCTAssertEqual(s.elapsed, 9) } else { XCTFail("\(h.events)") }
        // A later expiry is again worth one refresh (the earlier one succeeded).
        h.server(#"{"type":"error","code":"unauthorized","message":"token expired; reconnect with a new one"}"#)
        h.close(4401)
        XCTAssertEqual(h.tokenFetches, 3)
    }

    func testTheTokenIsRefreshedOnTheOpenConnectionBeforeItExpires() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        let exp = t0 / 1000 + 300
        h.token(token(exp: exp))
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 0, at: t0, id: Harness.id(h.frames.last!)))
        // Ticks keep the watchdog quiet until the refresh is due at exp - 60 s.
        var fetchedAt: Int64?
        for i in 1...300 {
            h.advance(millis: 1000)
            h.server(tickJSON(elapsed: Int64(i), at: t0 + Int64(i) * 1000))
            if h.tokenFetches == 2, fetchedAt == nil { fetchedAt = h.clock.now() }
        }
        XCTAssertEqual(fetchedAt, exp * 1000 - 60_000)
        let fresh = token(exp: exp + 3600, tag: "b")
        h.token(fresh)
        XCTAssertEqual(h.frames.last, #"{"type":"auth","id":"auth-0000000000000003","token":"\#(fresh)"}"#)
        XCTAssertEqual(h.connects, [1], "refreshed without reconnecting")
        XCTAssertEqual(h.core.tokenExp, exp + 3600)
    }

    func testAProviderThatReturnsTheSameTokenIsNotAskedInALoop() {
        var h = Harness()
        let same = token(exp: t0 / 1000 + 90)
        h.token(same)
        let id = h.core.request(.quote(plan: nil, seconds: 60, paused: 0))
        h.run()
        h.connectAndAuthenticate()
        h.server(#"{"type":"quote","id":"\#(id)","plan":"default","seconds":60,"paused":0,"fare":680,"currency":"KRW","lines":[]}"#)
        h.advance(millis: 29_999)
        XCTAssertEqual(h.tokenFetches, 0, "the first token came before any fetch")
        h.advance(millis: 1)
        XCTAssertEqual(h.tokenFetches, 1, "asked at exp - 60 s")
        h.token(same)
        h.advance(millis: 10_000)
        XCTAssertEqual(h.tokenFetches, 1, "nothing newer: not asked again for this token")
        XCTAssertEqual(h.frames.filter { $0.contains(#""type":"auth""#) }.count, 1)
    }

    func testServerCloseCodesOtherThan4401Reconnect() {
        for code: UInt16 in [1001, 1006, 1008, 1012, 4008, 1000, 4999] {
            var h = Harness(jitter: [0])
            h.do { $0.subscribe("r-42") }
            h.token(nil)
            h.open()
            XCTAssertEqual(h.lastState, .connected, "no token: no auth message")
            h.close(code, "x")
            XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .zero, reason: .closedByServer(code: code, reason: "x")))
            h.advance(millis: 0)
            XCTAssertEqual(h.connects, [1, 2], "code \(code)")
        }
    }

    func testAServiceRestartReconnectsWithinTheFirstJitterKeepingFeedsAndRequests() {
        // A draining node's 1012 after two refused attempts: the next wait is drawn from the
        // first ceiling (500 ms), not the doubled one, and the feed and the unanswered
        // request carry over to the next connection with the same id.
        var h = Harness(jitter: [UInt64.max])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.fail("refused")
        h.advanceToWakeup()
        h.fail("refused")
        h.advanceToWakeup()
        XCTAssertEqual(h.lastState, .connecting(attempt: 2))
        h.connectAndAuthenticate()
        let start = h.core.request(.start(ride: "r-43", plan: nil, limit: nil))
        h.run()
        let sentStart = h.frames.first { $0.contains(#""type":"start""#) }
        XCTAssertNotNil(sentStart)
        h.close(1012, "service restart: reconnect")
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .milliseconds(Int64(UInt64.max % 501)),
                                                         reason: .closedByServer(code: 1012, reason: "service restart: reconnect")))
        h.advanceToWakeup()
        h.connectAndAuthenticate()
        XCTAssertTrue(h.frames.contains { $0.contains(#""type":"subscribe""#) && $0.contains("r-42") }, "\(h.frames)")
        XCTAssertEqual(h.frames.first { $0.contains(#""type":"start""#) }, sentStart, "resent as it was, same id")
        XCTAssertEqual(Harness.id(sentStart!), start)
    }

    // MARK: requests

    func testARequestKeepsItsIdOnEveryResendAndIsAnsweredOnce() {
        var h = Harness(jitter: [0])
        h.token(tok)  // not fetching yet: the request starts the connection
        let id = h.core.request(.start(ride: "r-7", plan: "default", limit: 1800))
        h.run()
        XCTAssertEqual(id, "rp-0000000000000001")
        XCTAssertEqual(h.connects, [1])
        h.connectAndAuthenticate()
        let frame = #"{"type":"start","id":"rp-0000000000000001","ride":"r-7","plan":"default","limit":1800}"#
        XCTAssertEqual(h.frames.last, frame)
        // The server crashes before the reply: the same frame goes again on the next connection.
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, frame)
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, frame)
        XCTAssertEqual(h.sent.values.flatMap { $0 }.filter { $0 == frame }.count, 3)
        h.server(stateJSON("r-7", elapsed: 0, at: t0, id: id))
        XCTAssertEqual(h.replies.count, 1)
        XCTAssertEqual(h.replies[0].0, id)
        h.server(stateJSON("r-7", elapsed: 0, at: t0, id: id))  // a duplicate answer is ignored
        XCTAssertEqual(h.replies.count, 1)
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertFalse(h.frames.contains(frame), "answered: not sent again")
    }

    func testUnavailableIsRetriedWithTheSameIdThenReported() {
        var h = Harness()
        h.token(tok)
        // A minute: every retry of 1+2+4+8+16 s fits before the deadline.
        let id = h.core.request(.control(.end, ride: "r-7", metres: 1200), timeout: 60_000)
        h.run()
        h.connectAndAuthenticate()
        let frame = #"{"type":"end","id":"\#(id)","ride":"r-7","distance":1200}"#
        XCTAssertEqual(h.frames.last, frame)
        let unavailable = #"{"type":"error","id":"\#(id)","code":"unavailable","message":"store"}"#
        var resentAfter: [Int64] = []
        for _ in 0..<5 {
            h.server(unavailable)
            let before = h.frames.count
            let t = h.clock.now()
            while h.frames.count == before { h.advance(millis: 100) ; h.server(#"{"type":"authenticated"}"#) }
            resentAfter.append(h.clock.now() - t)
            XCTAssertEqual(h.frames.last, frame)
        }
        XCTAssertEqual(resentAfter, [1000, 2000, 4000, 8000, 16000])
        XCTAssertEqual(h.retries.map(\.attempt), [1, 2, 3, 4, 5])
        XCTAssertEqual(h.retries.map(\.attempts), [5, 5, 5, 5, 5])
        XCTAssertEqual(h.retries.map(\.delay), [1, 2, 4, 8, 16].map { .seconds($0) })
        XCTAssertEqual(h.retries[0].error, ProtocolError(.unavailable, "store", id: id))
        h.server(unavailable)
        XCTAssertEqual(h.replies.map(\.0), [id])
        XCTAssertEqual(h.replies[0].1, .failure(.server(ProtocolError(.unavailable, "store", id: id))))
    }

    func testOtherErrorsAnswerTheRequestAtOnce() {
        var h = Harness()
        h.token(tok)
        let id = h.core.request(.control(.pause, ride: "r-7", metres: nil))
        h.run()
        h.connectAndAuthenticate()
        h.server(#"{"type":"error","id":"\#(id)","code":"invalid_transition","message":"cannot pause a paused ride"}"#)
        XCTAssertEqual(h.replies[0].1, .failure(.server(ProtocolError(.invalidTransition, "cannot pause a paused ride", id: id))))
    }

    // MARK: feeds

    func testAfterAReconnectTheFreshSnapshotComesFirstAndNothingStepsBack() {
        var h = Harness(jitter: [0])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, #"{"type":"subscribe","id":"s-0000000000000002","ride":"r-42"}"#)
        h.server(tickJSON(elapsed: 3, at: t0 + 3000))  // before the snapshot: not shown
        h.server(stateJSON(elapsed: 3, at: t0 + 3000, id: "s-0000000000000002"))
        h.server(tickJSON(elapsed: 4, at: t0 + 4000))
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, #"{"type":"subscribe","id":"s-0000000000000004","ride":"r-42"}"#)
        h.server(tickJSON(elapsed: 9, at: t0 + 9000))  // before the new snapshot: dropped
        h.server(stateJSON(elapsed: 10, at: t0 + 10_000, id: "s-0000000000000004"))
        h.server(tickJSON(elapsed: 8, at: t0 + 8000))  // older than shown: dropped
        h.server(stateJSON(elapsed: 7, at: t0 + 7000))  // an old push: dropped
        h.server(tickJSON(elapsed: 11, at: t0 + 11_000))
        let shown = h.events.map { ev -> String in
            switch ev.1 {
            case .state(let s): return "state \(s.elapsed)"
            case .tick(let t): return "tick \(t.elapsed)"
            case .warning(let r): return "warning \(r)"
            case .ended(let s): return "ended \(s.elapsed)"
            case .zone(let name, _): return "zone \(name ?? "-")"
            }
        }
        XCTAssertEqual(shown, ["state 3", "tick 4", "state 10", "tick 11"])
        XCTAssertEqual(h.latest["r-42"]?.elapsed, 11)
        XCTAssertEqual(h.latest["r-42"]?.fare, 500)
        XCTAssertEqual(h.latest["r-42"]?.owner, "u1", "the tick's figures fold into the snapshot")
    }

    func testAnEndedRideFinishesItsFeedAndIsNotResubscribed() {
        var h = Harness(jitter: [0])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 3, at: t0 + 3000, id: "s-0000000000000002"))
        h.server(#"{"type":"warning","ride":"r-42","remaining":60}"#)
        h.server(stateJSON(state: "ended", elapsed: 62, at: t0 + 62_000))
        guard case .ended(let s) = h.events.last!.1 else { return XCTFail("\(h.events)") }
        XCTAssertEqual(s.receipt?.fare, 680)
        XCTAssertEqual(h.events[1].1, .warning(remaining: 60))
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertFalse(h.frames.contains { $0.contains("subscribe") })
    }

    func testASubscribeToAMissingRideFailsTheFeed() {
        var h = Harness()
        h.do { $0.subscribe("r-404") }
        h.token(tok)
        h.connectAndAuthenticate()
        h.server(#"{"type":"error","id":"s-0000000000000002","code":"ride_not_found","message":"no ride \"r-404\""}"#)
        XCTAssertEqual(h.failedFeeds.map(\.0), ["r-404"])
        XCTAssertEqual(h.failedFeeds[0].1, .server(ProtocolError(.rideNotFound, "no ride \"r-404\"", id: "s-0000000000000002")))
    }

    func testTheWatchdogReconnectsATickingRideThatWentSilentForThreeSeconds() {
        var h = Harness(jitter: [0])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 3, at: t0 + 3000, id: "s-0000000000000002"))
        h.advance(millis: 2999)
        XCTAssertEqual(h.disconnects, [])
        h.advance(millis: 1)
        XCTAssertEqual(h.disconnects, [1000])
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .zero, reason: .silent))
        h.advance(millis: 0)
        XCTAssertEqual(h.connects, [1, 2])
    }

    func testNoWatchdogWithoutAFeed() {
        var h = Harness()
        h.token(tok)
        _ = h.core.request(.quote(plan: nil, seconds: 60, paused: 0))
        h.run()
        h.connectAndAuthenticate()
        h.server(#"{"type":"quote","id":"rp-0000000000000001","plan":"default","seconds":60,"paused":0,"fare":680,"currency":"KRW","lines":[]}"#)
        h.advance(millis: 60_000)
        XCTAssertEqual(h.disconnects, [])
        XCTAssertEqual(h.lastState, .connected)
    }

    func testAConnectionThatNeverOpensTimesOut() {
        var h = Harness(jitter: [0])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.advance(millis: 9999)
        XCTAssertEqual(h.lastState, .connecting(attempt: 0))
        h.advance(millis: 1)
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .zero, reason: .connectTimeout))
        // The abandoned transport's late events change nothing.
        h.do { $0.opened(generation: 1) }
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .zero, reason: .connectTimeout))
    }

    func testSuspendClosesAndResumeReconnectsAndResubscribes() {
        var h = Harness(jitter: [UInt64.max])
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.fail("refused")
        h.advanceToWakeup()
        h.connectAndAuthenticate()
        h.server(stateJSON(elapsed: 3, at: t0 + 3000, id: Harness.id(h.frames.last!)))
        // Longer than the suspension: a request's timeout runs while suspended too.
        let pending = h.core.request(.control(.pause, ride: "r-42", metres: nil), timeout: 900_000)
        h.run()
        h.do { $0.suspend() }
        XCTAssertEqual(h.disconnects, [1000])
        XCTAssertEqual(h.lastState, .suspended)
        h.advance(millis: 600_000)
        XCTAssertEqual(h.connects, [1, 2], "suspended: no reconnect, no watchdog")
        h.do { $0.resume() }
        XCTAssertEqual(h.lastState, .connecting(attempt: 0), "resume starts over")
        h.connectAndAuthenticate()
        XCTAssertEqual(Array(h.frames.suffix(2)), [
            #"{"type":"subscribe","id":"s-0000000000000005","ride":"r-42"}"#,
            #"{"type":"pause","id":"\#(pending)","ride":"r-42"}"#,
        ])
    }

    func testCloseFailsWhatIsPendingAndStops() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        h.token(tok)
        h.connectAndAuthenticate()
        let id = h.core.request(.share(ride: "r-42"))
        h.run()
        h.do { $0.close() }
        XCTAssertEqual(h.lastState, .closed(.closedByClient))
        XCTAssertEqual(h.replies.map(\.0), [id])
        XCTAssertEqual(h.failedFeeds.map(\.0), ["r-42"])
        let late = h.core.request(.share(ride: "r-42"))
        h.run()
        XCTAssertEqual(h.replies.last?.0, late)
        XCTAssertEqual(h.replies.last?.1, .failure(.closed(.closedByClient)))
    }

    func testTokenExpiryIsReadFromTheJWTPayload() {
        XCTAssertEqual(TokenExpiry.exp(token(exp: 1_764_433_600)), 1_764_433_600)
        XCTAssertNil(TokenExpiry.exp("abc"))
        XCTAssertNil(TokenExpiry.exp("a.!!.c"))
        XCTAssertNil(TokenExpiry.exp("a.\(base64URL(Array(#"{"sub":"x"}"#.utf8))).c"))
    }
}

extension ClientCoreTests {
    func testATokenThatLooksExpiredIsStillTriedOnceWithoutAskingAgain() {
        var h = Harness()
        h.do { $0.subscribe("r-42") }
        h.token(token(exp: t0 / 1000 - 25))  // within the server's leeway, perhaps
        XCTAssertEqual(h.tokenFetches, 1)
        XCTAssertEqual(h.connects, [1])
        XCTAssertEqual(h.lastState, .connecting(attempt: 0))
    }

    func testARequestWithNothingHeardForTenSecondsMeansADeadLink() {
        var h = Harness(jitter: [0])
        h.token(tok)
        let id = h.core.request(.control(.pause, ride: "r-7", metres: nil))
        h.run()
        h.connectAndAuthenticate()
        h.advance(millis: 9999)
        XCTAssertEqual(h.disconnects, [])
        h.advance(millis: 1)
        XCTAssertEqual(h.disconnects, [1000])
        XCTAssertEqual(h.lastState, .waitingToReconnect(delay: .zero, reason: .silent))
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.last, #"{"type":"pause","id":"\#(id)","ride":"r-7"}"#)
    }

    func testASlowReplyOnALiveLinkIsWaitedFor() {
        var h = Harness(jitter: [0])
        h.token(tok)
        _ = h.core.request(.control(.pause, ride: "r-7", metres: nil))
        h.run()
        h.connectAndAuthenticate()
        h.advance(millis: 5000)
        h.server(#"{"type":"warning","ride":"r-other","remaining":60}"#)  // the link is alive
        h.advance(millis: 20_000)
        XCTAssertEqual(h.disconnects, [])
    }

    // MARK: request timeouts

    func testARequestWhileDisconnectedWaitsForItsTimeoutThenThrowsTimedOut() {
        var h = Harness(jitter: [1000])
        h.token(tok)
        let id = h.core.request(.control(.pause, ride: "r-7", metres: nil))
        h.run()
        // The server is down: every attempt is refused, the request stays queued.
        var waited: Int64 = 0
        while waited < 29_000 {
            h.fail("connection refused")
            h.advance(millis: 1000)
            waited += 1000
        }
        XCTAssertTrue(h.replies.isEmpty, "still waiting at 29 s")
        h.advance(millis: 999)
        XCTAssertTrue(h.replies.isEmpty, "still waiting at 29.999 s")
        h.advance(millis: 1)
        XCTAssertEqual(h.replies.map(\.0), [id])
        XCTAssertEqual(h.replies[0].1, .failure(.timedOut(after: .seconds(30))))
        XCTAssertEqual(RidePushError.timedOut(after: .seconds(30)).description, "no answer within 30 s")
        // Connected after all: the request that timed out is not sent.
        h.fail("connection refused")
        h.advanceToWakeup()
        h.connectAndAuthenticate()
        XCTAssertFalse(h.frames.contains { $0.contains(id) })
    }

    func testACallsOwnTimeoutWinsOverTheDefault() {
        var timing = ClientCore.Timing()
        timing.requestTimeout = 60_000
        var h = Harness(timing: timing)
        h.token(tok)
        let short = h.core.request(.get(ride: "r-1"), timeout: 2_500)
        let long = h.core.request(.get(ride: "r-2"))
        h.run()
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.count, 3, "auth and both requests sent")
        XCTAssertEqual(h.core.nextWakeup, h.clock.now() + 2_500)
        h.server(#"{"type":"authenticated"}"#)  // heard from the server: the link is alive
        h.advance(millis: 2_499)
        XCTAssertTrue(h.replies.isEmpty)
        h.advance(millis: 1)
        XCTAssertEqual(h.replies.map(\.0), [short])
        XCTAssertEqual(h.replies[0].1, .failure(.timedOut(after: .milliseconds(2_500))))
        XCTAssertEqual(h.core.pending.map(\.id), [long], "the other request keeps waiting")
    }

    func testARetryThatCouldNotBeAnsweredBeforeTheDeadlineReportsTheServersAnswerAtOnce() {
        var h = Harness()
        h.token(tok)
        let id = h.core.request(.control(.pause, ride: "r-7", metres: nil), timeout: 4_000)
        h.run()
        h.connectAndAuthenticate()
        XCTAssertEqual(h.core.pending.map(\.retries), [0])
        let unavailable = #"{"type":"error","id":"\#(id)","code":"unavailable","message":"ride storage is unavailable"}"#
        h.server(unavailable)                 // t=0: retry in 1 s (1/5)
        h.advance(millis: 1_000)
        h.server(unavailable)                 // t=1: retry in 2 s (2/5), at 3 s < 4 s
        h.advance(millis: 2_000)
        XCTAssertTrue(h.replies.isEmpty)
        h.server(unavailable)                 // t=3: the next retry (4 s) would be at 7 s > 4 s
        XCTAssertEqual(h.retries.map(\.attempt), [1, 2])
        XCTAssertEqual(h.retries.map(\.delay), [.seconds(1), .seconds(2)])
        XCTAssertEqual(h.replies.map(\.0), [id])
        XCTAssertEqual(h.replies[0].1, .failure(.server(ProtocolError(.unavailable, "ride storage is unavailable", id: id))))
        XCTAssertTrue(h.core.pending.isEmpty)
    }
}
