import Dispatch
import Foundation
import XCTest
@testable import RideCore
import RideProtocol

/// Clocks, the whole-second schedule, and the tick progression the hub relies on: with the
/// clock advanced by exactly one second per tick, every tick shows one more second of riding.
final class ClockTests: XCTestCase {
    private let t0: UnixMillis = 1_764_430_000_000

    // MARK: ManualClock

    func testManualClockStartsWhereToldAndMovesOnlyByHand() {
        XCTAssertEqual(ManualClock().now(), 1_764_430_000_000)
        let clock = ManualClock(42)
        XCTAssertEqual(clock.now(), 42)
        XCTAssertEqual(clock.now(), 42)
        clock.advance(seconds: 3)
        XCTAssertEqual(clock.now(), 3_042)
        clock.advance(millis: 7)
        XCTAssertEqual(clock.now(), 3_049)
        clock.advance(millis: -49)
        XCTAssertEqual(clock.now(), 3_000)
        clock.set(t0 + 123)
        XCTAssertEqual(clock.now(), t0 + 123)
    }

    func testManualClockIsARideClockSharedAcrossThreads() {
        let clock = ManualClock(0)
        let shared: any RideClock = clock
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<1_000 { clock.advance(millis: 1) }
        }
        XCTAssertEqual(shared.now(), 8_000)
    }

    // MARK: SystemClock

    func testSystemClockIsUnixMilliseconds() {
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let now = SystemClock().now()
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        XCTAssertGreaterThanOrEqual(now, before - 1)
        XCTAssertLessThanOrEqual(now, after + 1)
        XCTAssertGreaterThan(now, 1_700_000_000_000, "milliseconds, not seconds")
    }

    // MARK: nextWholeSecond

    func testNextWholeSecondIsStrictlyAfter() {
        XCTAssertEqual(nextWholeSecond(after: 0), 1_000)
        XCTAssertEqual(nextWholeSecond(after: 1), 1_000)
        XCTAssertEqual(nextWholeSecond(after: 999), 1_000)
        XCTAssertEqual(nextWholeSecond(after: 1_000), 2_000, "a whole second is not after itself")
        XCTAssertEqual(nextWholeSecond(after: 1_001), 2_000)
        XCTAssertEqual(nextWholeSecond(after: t0 + 123), t0 + 1_000)
        XCTAssertEqual(nextWholeSecond(after: t0), t0 + 1_000)
        XCTAssertEqual(nextWholeSecond(after: t0 + 999), t0 + 1_000)
    }

    func testNextWholeSecondBefore1970() {
        XCTAssertEqual(nextWholeSecond(after: -1), 0)
        XCTAssertEqual(nextWholeSecond(after: -999), 0)
        XCTAssertEqual(nextWholeSecond(after: -1_000), 0)
        XCTAssertEqual(nextWholeSecond(after: -1_001), -1_000)
        XCTAssertEqual(nextWholeSecond(after: -1_500), -1_000)
        XCTAssertEqual(nextWholeSecond(after: -2_000), -1_000)
    }

    func testNextWholeSecondAlwaysLandsOnASecondWithinOneSecond() {
        for t in stride(from: t0 - 2_500, through: t0 + 2_500, by: 7) {
            let n = nextWholeSecond(after: t)
            XCTAssertEqual(n % 1_000, 0)
            XCTAssertGreaterThan(n, t)
            XCTAssertLessThanOrEqual(n - t, 1_000)
        }
    }

    func testALateTimerStillSchedulesOneTickPerSecond() {
        // The hub re-arms its timer for the next whole second after "now"; firing a little late
        // must neither skip a second nor fire twice for one.
        var tick = nextWholeSecond(after: t0 + 123)
        var ticks: [UnixMillis] = [tick]
        for lateness in [0, 3, 250, 999, 1, 0] as [Int64] {
            tick = nextWholeSecond(after: tick + lateness)
            ticks.append(tick)
        }
        XCTAssertEqual(ticks, (1...7).map { t0 + Int64($0) * 1_000 })
    }

    // MARK: tick progression (the hub's schedule against a manual clock)

    func testOneTickPerSecondAdvancedAddsExactlyOneSecond() {
        let clock = ManualClock(t0 + 123)  // not on a whole second
        let ride = Ride(id: "r-42", planID: "default", owner: nil, limit: nil, startedAt: clock.now())

        var at = nextWholeSecond(after: clock.now())
        clock.set(at)
        XCTAssertEqual(at, t0 + 1_000)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 0, "877 ms in: zero whole seconds")
        var previous = ride.elapsedSeconds(at: clock.now())
        var fares: [Int64: Int64] = [:]

        for n in 1...180 {
            clock.advance(seconds: 1)
            let next = nextWholeSecond(after: at)
            XCTAssertEqual(next, clock.now(), "tick \(n) is at the clock's whole second")
            at = next
            let elapsed = ride.elapsedSeconds(at: at)
            XCTAssertEqual(elapsed, previous + 1, "tick \(n)")
            XCTAssertEqual(elapsed, Int64(n))
            let f = RideFigures(ride, .standard, at: at)
            XCTAssertEqual(f.elapsed, elapsed)
            XCTAssertEqual(f.paused, 0)
            fares[elapsed] = f.fare
            previous = elapsed
        }
        XCTAssertEqual(fares[59], 500)
        XCTAssertEqual(fares[60], 680)
        XCTAssertEqual(fares[61], 680)
        XCTAssertEqual(fares[119], 680)
        XCTAssertEqual(fares[120], 860)
        XCTAssertEqual(fares[180], 1040)
    }

    func testTicksWhilePausedKeepElapsedAndGrowPausedByOne() {
        let clock = ManualClock(t0 + 123)
        var ride = Ride(id: "r-42", planID: "default", owner: nil, limit: nil, startedAt: clock.now())
        var at = nextWholeSecond(after: clock.now())
        clock.set(at)
        for _ in 0..<29 { clock.advance(seconds: 1); at = nextWholeSecond(after: at) }
        XCTAssertEqual(ride.elapsedSeconds(at: at), 29)

        clock.advance(millis: 500)  // pause between two ticks
        guard case .success(let pause) = ride.transition(for: .pause, at: clock.now()),
              case .success(let paused) = ride.applying(pause) else { return XCTFail("pause") }
        ride = paused
        clock.set(at)

        var series: [(Int64, Int64)] = []
        for _ in 0..<5 {
            clock.advance(seconds: 1)
            at = nextWholeSecond(after: at)
            XCTAssertEqual(at, clock.now())
            series.append((ride.elapsedSeconds(at: at), ride.pausedSeconds(at: at)))
        }
        // Paused 30.377 s into the ride: elapsed 30; the ticks see 0.5, 1.5, 2.5 … s of pause.
        XCTAssertEqual(series.map(\.0), [30, 30, 30, 30, 30])
        XCTAssertEqual(series.map(\.1), [0, 1, 2, 3, 4])
    }

    func testTickMessagesAlongTheSchedule() {
        let clock = ManualClock(t0 + 123)
        let ride = Ride(id: "r-42", planID: "default", owner: nil, limit: nil, startedAt: clock.now())
        var at = nextWholeSecond(after: clock.now())
        clock.set(at)
        var buffer: [UInt8] = []
        for seq in Int64(1)...Int64(65) {
            clock.advance(seconds: 1)
            at = nextWholeSecond(after: at)
            ServerMessages.tick(into: &buffer, ride: ride, plan: .standard, seq: seq, at: at, prefix: 0)
            let fare = seq >= 60 ? 680 : 500
            XCTAssertEqual(String(decoding: buffer, as: UTF8.self),
                           #"{"type":"tick","ride":"r-42","state":"riding","elapsed":\#(seq),"paused":0,"fare":\#(fare),"currency":"KRW","seq":\#(seq),"at":\#(at)}"#)
        }
    }
}
