@testable import RideService
import XCTest
import RideAuth
@testable import RideCore

/// A connection's deadlines as one decision, at instants chosen by hand: no socket, no sleep.
final class ConnectionTimersTests: XCTestCase {
    let timers = ConnectionTimers(keepaliveSeconds: 30, handshakeSeconds: 10, slowConsumerSeconds: 10, authRequired: true)
    let open = ConnectionTimers(keepaliveSeconds: 30, handshakeSeconds: 10, slowConsumerSeconds: 10, authRequired: false)

    func session() -> Session { Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16) }

    func testKeepaliveAloneTableDriven() {
        // (seconds silent, ping already sent) → due, with authentication off.
        let table: [(Int64, Bool, [ConnectionTimers.Due])] = [
            (0, false, []), (14, false, []), (15, false, [.ping]), (20, true, []), (29, true, []),
            (30, true, [.drop]), (30, false, [.drop]), (45, false, [.drop]),
        ]
        for (silent, pinged, expected) in table {
            let s = session()
            s.pingSent = pinged
            XCTAssertEqual(open.due(s, now: s.connectedAt + silent * 1000, wall: 1_764_430_000), expected, "\(silent) s, pinged \(pinged)")
        }
    }

    func testTrafficPushesTheKeepaliveBack() {
        let s = session()
        s.lastHeard = s.connectedAt + 20_000
        XCTAssertEqual(open.due(s, now: s.connectedAt + 34_000, wall: 0), [])
        XCTAssertEqual(open.due(s, now: s.connectedAt + 35_000, wall: 0), [.ping])
        s.lastTick = s.connectedAt + 40_000  // a tick written is traffic too
        XCTAssertEqual(open.due(s, now: s.connectedAt + 50_000, wall: 0), [])
    }

    func testAnUpgradeThatNeverAuthenticatesIsClosedAtTheHandshakeDeadline() {
        let s = session()
        XCTAssertEqual(timers.due(s, now: s.connectedAt + 9_999, wall: 0), [])
        XCTAssertEqual(timers.due(s, now: s.connectedAt + 10_000, wall: 0), [.authTimedOut])
        XCTAssertEqual(open.due(s, now: s.connectedAt + 10_000, wall: 0), [], "nothing to authenticate with --auth none")
    }

    func testATokenThatExpiresIsRefusedPastTheLeewayOnTheWallClock() throws {
        let ctx = ConnectionTests.Context(now: 1_764_430_000_000, auth: true)
        let wall: Int64 = 1_764_430_000
        let s = session()
        _ = s.conn.upgradeToken(ctx.token(TokenClaims(sub: "a", scope: .control, exp: wall + 60)), ctx)
        XCTAssertTrue(s.conn.authenticated)
        let now = s.connectedAt + 11_000  // past the handshake deadline: authenticated, so nothing
        XCTAssertEqual(timers.due(s, now: now, wall: wall + 60 + TokenSigner.leeway - 1), [])
        XCTAssertEqual(timers.due(s, now: now, wall: wall + 60 + TokenSigner.leeway), [.tokenExpired])
    }

    func testAMessageWhoseLastFragmentNeverComes() {
        let s = session()
        s.rxSince = s.connectedAt + 1_000
        XCTAssertEqual(open.due(s, now: s.connectedAt + 10_999, wall: 0), [])
        XCTAssertEqual(open.due(s, now: s.connectedAt + 11_000, wall: 0), [.incompleteMessage(reason: "message not completed within 10 s")])
    }

    func testTheSlowConsumerClockClosesWhatWaitsAndResetsOverNothing() {
        let s = session()
        let t = s.connectedAt
        XCTAssertTrue(s.outbox.push([1, 2, 3], at: Outbox.tenths(t), ticks: 0))
        XCTAssertEqual(open.due(s, now: t + 10_000, wall: 0), [], "10 s is the lag, not past it")
        XCTAssertEqual(open.due(s, now: t + 10_100, wall: 0), [.slowConsumer(reason: "slow consumer: nothing read for 10s")])
        // The clock left running over nothing (a fleet marker taken back out): reset, not closed.
        let idle = session()
        idle.outbox.waiting(at: Outbox.tenths(t))
        XCTAssertEqual(open.due(idle, now: t + 10_100, wall: 0), [.outboxIdle])
    }

    func testOneReasonToCloseAtATimeAndNoneOnceClosing() {
        let s = session()
        let t = s.connectedAt
        XCTAssertTrue(s.outbox.push([1], at: Outbox.tenths(t), ticks: 0))
        s.rxSince = t
        // Slow, unauthenticated, an unfinished message and silent: the first reason only, and
        // the keepalive's verdict.
        XCTAssertEqual(timers.due(s, now: t + 31_000, wall: 0), [.slowConsumer(reason: "slow consumer: nothing read for 10s"), .drop])
        s.rareBox().closing = Closing(code: 4008, reason: "slow consumer")  // as the adapter's close does
        XCTAssertEqual(timers.due(s, now: t + 31_000, wall: 0), [.drop])
    }
}
