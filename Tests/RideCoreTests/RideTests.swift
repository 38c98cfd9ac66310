import XCTest
@testable import RideCore
import RideProtocol

/// The ride engine against a `ManualClock` advanced by hand: exact elapsed, pause and fare at
/// chosen instants, every transition the state machine allows or refuses, auto-end, replay.
final class RideTests: XCTestCase {
    private let t0: UnixMillis = 1_764_430_000_000
    private let plan = FarePlan.standard

    // MARK: helpers

    private func newRide(_ clock: ManualClock, id: String = "r-42", limit: Int64? = nil) -> Ride {
        Ride(id: id, planID: "default", owner: nil, limit: limit, startedAt: clock.now())
    }

    /// Asks the state machine for `command` now and applies what it records; fails on refusal.
    @discardableResult
    private func perform(_ ride: inout Ride, _ command: RideCommand, _ clock: ManualClock,
                         metres: Int64 = 0, journal: inout [RideTransition],
                         file: StaticString = #filePath, line: UInt = #line) -> RideTransition? {
        switch ride.transition(for: command, at: clock.now(), metres: metres) {
        case .failure(let e):
            XCTFail("\(command) refused: \(e)", file: file, line: line)
            return nil
        case .success(let tr):
            switch ride.applying(tr) {
            case .success(let next): ride = next
            case .failure(let e): XCTFail("applying \(tr) failed: \(e)", file: file, line: line)
            }
            journal.append(tr)
            return tr
        }
    }

    private func perform(_ ride: inout Ride, _ command: RideCommand, _ clock: ManualClock,
                         metres: Int64 = 0, file: StaticString = #filePath, line: UInt = #line) {
        var ignored: [RideTransition] = []
        perform(&ride, command, clock, metres: metres, journal: &ignored, file: file, line: line)
    }

    private func apply(_ ride: inout Ride, _ tr: RideTransition, file: StaticString = #filePath, line: UInt = #line) {
        switch ride.applying(tr) {
        case .success(let next): ride = next
        case .failure(let e): XCTFail("applying \(tr) failed: \(e)", file: file, line: line)
        }
    }

    private func fare(_ ride: Ride, at t: UnixMillis) -> Int64 {
        RideFigures(ride, plan, at: t).fare
    }

    private func refusal(_ ride: Ride, _ command: RideCommand, at t: UnixMillis) -> RideError? {
        if case .failure(let e) = ride.transition(for: command, at: t) { return e }
        return nil
    }

    // MARK: elapsed and fare of the default plan

    func testNewRideIsRidingAtZero() {
        let clock = ManualClock(t0)
        let ride = newRide(clock)
        XCTAssertEqual(ride.state, .riding)
        XCTAssertEqual(ride.startedAt, t0)
        XCTAssertNil(ride.endedAt)
        XCTAssertNil(ride.endReason)
        XCTAssertNil(ride.pausedSince)
        XCTAssertEqual(ride.lastInstant, t0)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 0)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
    }

    func testElapsedAndFareAtMinuteBoundaries() {
        let clock = ManualClock(t0)
        let ride = newRide(clock)
        // (clock offset in ms, elapsed, fare): 500 KRW + 180 per completed minute.
        let expected: [(Int64, Int64, Int64)] = [
            (0, 0, 500),
            (999, 0, 500),
            (1_000, 1, 500),
            (59_000, 59, 500),
            (59_999, 59, 500),
            (60_000, 60, 680),
            (61_000, 61, 680),
            (119_999, 119, 680),
            (120_000, 120, 860),
            (192_000, 192, 1040),
            (3_600_000, 3600, 500 + 60 * 180),
        ]
        for (offset, elapsed, expectedFare) in expected {
            clock.set(t0 + offset)
            XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), elapsed, "at +\(offset) ms")
            XCTAssertEqual(ride.ridingMillis(at: clock.now()), offset, "at +\(offset) ms")
            XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0, "at +\(offset) ms")
            XCTAssertEqual(fare(ride, at: clock.now()), expectedFare, "at +\(offset) ms")
        }
    }

    func testElapsedAdvancesByHandNotByCounting() {
        // Two readings at the same instant agree; nothing inside the ride counts up.
        let clock = ManualClock(t0)
        let ride = newRide(clock)
        clock.advance(seconds: 75)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 75)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 75)
        clock.advance(millis: -30_000)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 45)
    }

    // MARK: pause and resume

    func testPauseAtHalfSecondFreezesElapsedWhilePausedGrows() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(millis: 30_500)
        perform(&ride, .pause, clock)
        XCTAssertEqual(ride.state, .paused)
        XCTAssertEqual(ride.pausedSince, t0 + 30_500)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 30)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0)

        // (ms since the pause began, paused seconds); elapsed stays 30 throughout.
        for (sincePause, paused) in [(499, 0), (999, 0), (1_000, 1), (10_000, 10), (10_499, 10), (10_500, 10),
                                     (11_000, 11), (600_000, 600)] as [(Int64, Int64)] {
            clock.set(t0 + 30_500 + sincePause)
            XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 30, "+\(sincePause) ms into the pause")
            XCTAssertEqual(ride.ridingMillis(at: clock.now()), 30_500, "+\(sincePause) ms into the pause")
            XCTAssertEqual(ride.pausedSeconds(at: clock.now()), paused, "+\(sincePause) ms into the pause")
            XCTAssertEqual(ride.pausedMillis(at: clock.now()), sincePause)
            XCTAssertEqual(fare(ride, at: clock.now()), 500, "paused time is not billed")
        }
    }

    func testElapsedAfterPauseAndResumeIsExact() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(millis: 30_500)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 45)
        perform(&ride, .resume, clock)
        XCTAssertEqual(ride.state, .riding)
        XCTAssertNil(ride.pausedSince)
        XCTAssertEqual(ride.pausedMillisBefore, 45_000)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 30)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 45)

        clock.advance(millis: 29_499)  // riding 59.999 s
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 59)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
        clock.advance(millis: 1)  // riding exactly 60 s, wall time 105 s
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 60)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 45)
        XCTAssertEqual(fare(ride, at: clock.now()), 680)
        clock.advance(seconds: 1)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 61)
        XCTAssertEqual(fare(ride, at: clock.now()), 680)
        clock.advance(seconds: 59)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 120)
        XCTAssertEqual(fare(ride, at: clock.now()), 860)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 45, "paused stays put while riding")
    }

    func testSeveralPausesAddUp() {
        let clock = ManualClock(t0 + 123)
        var ride = newRide(clock)
        var riding: Int64 = 0, paused: Int64 = 0
        for (ride_ms, pause_ms) in [(10_250, 3_333), (5_000, 700), (44_750, 60_000), (1, 1)] as [(Int64, Int64)] {
            clock.advance(millis: ride_ms); riding += ride_ms
            perform(&ride, .pause, clock)
            clock.advance(millis: pause_ms); paused += pause_ms
            XCTAssertEqual(ride.pausedMillis(at: clock.now()), paused)
            perform(&ride, .resume, clock)
            XCTAssertEqual(ride.ridingMillis(at: clock.now()), riding)
            XCTAssertEqual(ride.pausedMillis(at: clock.now()), paused)
        }
        XCTAssertEqual(riding, 60_001)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 60)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 64)
        XCTAssertEqual(fare(ride, at: clock.now()), 680)
    }

    func testPausedTimeIsNotBilled() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(seconds: 59)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 3_600)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
        perform(&ride, .resume, clock)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
        clock.advance(seconds: 1)
        XCTAssertEqual(fare(ride, at: clock.now()), 680)
        perform(&ride, .end, clock)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 60)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 3_600)
        XCTAssertEqual(fare(ride, at: clock.now()), 680)
    }

    // MARK: end

    func testEndWhileRidingFreezesEverything() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(millis: 200_400)
        perform(&ride, .end, clock, metres: 1_234)
        XCTAssertEqual(ride.state, .ended)
        XCTAssertEqual(ride.endedAt, t0 + 200_400)
        XCTAssertEqual(ride.endReason, .rider)
        XCTAssertEqual(ride.metres, 1_234)
        XCTAssertEqual(ride.lastInstant, t0 + 200_400)
        clock.advance(seconds: 10_000)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 200)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0)
        XCTAssertEqual(fare(ride, at: clock.now()), 1040)
    }

    func testEndWhilePausedCountsThePause() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(seconds: 90)
        perform(&ride, .pause, clock)
        clock.advance(millis: 20_750)
        perform(&ride, .end, clock)
        XCTAssertEqual(ride.state, .ended)
        XCTAssertNil(ride.pausedSince)
        XCTAssertEqual(ride.endedAt, t0 + 110_750)
        XCTAssertEqual(ride.pausedMillisBefore, 20_750)
        // Frozen from here on, however far the clock goes.
        for _ in 0..<3 {
            XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 90)
            XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 20)
            XCTAssertEqual(ride.pausedMillis(at: clock.now()), 20_750)
            XCTAssertEqual(fare(ride, at: clock.now()), 680)
            clock.advance(seconds: 3_600)
        }
    }

    // MARK: refused transitions

    func testEveryInvalidTransitionIsRefusedWithTheState() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        XCTAssertEqual(refusal(ride, .resume, at: clock.now()), RideError(state: .riding, command: .resume))
        XCTAssertNil(refusal(ride, .pause, at: clock.now()))
        XCTAssertNil(refusal(ride, .end, at: clock.now()))

        clock.advance(seconds: 5)
        perform(&ride, .pause, clock)
        XCTAssertEqual(refusal(ride, .pause, at: clock.now()), RideError(state: .paused, command: .pause))
        XCTAssertNil(refusal(ride, .resume, at: clock.now()))
        XCTAssertNil(refusal(ride, .end, at: clock.now()))

        clock.advance(seconds: 5)
        perform(&ride, .end, clock)
        for command in [RideCommand.pause, .resume, .end] {
            XCTAssertEqual(refusal(ride, command, at: clock.now()), RideError(state: .ended, command: command))
        }
    }

    func testApplyingAnInvalidRecordedTransitionFails() {
        let clock = ManualClock(t0)
        let riding = newRide(clock)
        XCTAssertEqual(riding.applying(.resume(at: t0 + 1)), .failure(RideError(state: .riding, command: .resume)))
        guard case .success(let paused) = riding.applying(.pause(at: t0 + 1)) else { return XCTFail("pause") }
        XCTAssertEqual(paused.applying(.pause(at: t0 + 2)), .failure(RideError(state: .paused, command: .pause)))
        guard case .success(let ended) = paused.applying(.end(at: t0 + 3, reason: .rider, metres: 0)) else {
            return XCTFail("end")
        }
        XCTAssertEqual(ended.applying(.pause(at: t0 + 4)), .failure(RideError(state: .ended, command: .pause)))
        XCTAssertEqual(ended.applying(.resume(at: t0 + 4)), .failure(RideError(state: .ended, command: .resume)))
        XCTAssertEqual(ended.applying(.end(at: t0 + 4, reason: .rider, metres: 0)),
                       .failure(RideError(state: .ended, command: .end)))
        // A second start is never a valid transition.
        if case .success = riding.applying(.start(at: t0 + 5)) { XCTFail("start applied to a started ride") }
        if case .success = ended.applying(.start(at: t0 + 5)) { XCTFail("start applied to an ended ride") }
    }

    func testRideErrorsReadLikeSentences() {
        XCTAssertEqual(RideError(state: .ended, command: .pause).description, "ride has ended; cannot pause")
        XCTAssertEqual(RideError(state: .paused, command: .pause).description, "ride is paused; cannot pause")
        XCTAssertEqual(RideError(state: .riding, command: .resume).description, "ride is riding; cannot resume")
        XCTAssertEqual(RideError(state: .ended, command: .end).description, "ride has ended; cannot end")
    }

    func testTransitionKindsAndInstants() {
        let all: [RideTransition] = [.start(at: 1), .pause(at: 2), .resume(at: 3), .end(at: 4, reason: .timeLimit, metres: 9)]
        XCTAssertEqual(all.map(\.kind), ["start", "pause", "resume", "end"])
        XCTAssertEqual(all.map(\.at), [1, 2, 3, 4])
        XCTAssertEqual(EndReason.rider.rawValue, "rider")
        XCTAssertEqual(EndReason.timeLimit.rawValue, "time_limit")
        XCTAssertEqual(EndReason.pauseLimit.rawValue, "pause_limit")
        XCTAssertEqual(RideState.riding.rawValue, "riding")
        XCTAssertEqual(RideState.paused.rawValue, "paused")
        XCTAssertEqual(RideState.ended.rawValue, "ended")
    }

    // MARK: a clock that steps backwards

    func testClockBeforeStartGivesZeroNotNegative() {
        let clock = ManualClock(t0)
        let ride = newRide(clock)
        clock.advance(seconds: -5)
        XCTAssertEqual(ride.ridingMillis(at: clock.now()), 0)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 0)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
    }

    func testTransitionsOnABackwardClockAreRecordedAtTheLastInstant() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(seconds: 10)
        perform(&ride, .pause, clock)
        clock.advance(seconds: -60)  // NTP step back while paused
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 0)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10)
        var journal: [RideTransition] = []
        let resume = perform(&ride, .resume, clock, journal: &journal)
        XCTAssertEqual(resume, .resume(at: t0 + 10_000), "a resume before the pause is recorded at the pause")
        XCTAssertEqual(ride.pausedMillisBefore, 0, "a pause is never negative")
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10)
    }

    func testBackwardClockAfterResumeNeverShrinksElapsed() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        clock.advance(seconds: 10)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 90)
        perform(&ride, .resume, clock)  // resumed at +100 s: 10 s riding, 90 s paused
        XCTAssertEqual(ride.lastInstant, t0 + 100_000)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10)

        clock.set(t0 + 50_000)  // the clock steps back 50 s, to before the resume
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10, "elapsed must not go back")
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 90)

        var journal: [RideTransition] = []
        let pause = perform(&ride, .pause, clock, journal: &journal)
        XCTAssertEqual(pause, .pause(at: t0 + 100_000))
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10)
        clock.advance(seconds: 5)
        let end = perform(&ride, .end, clock, journal: &journal)
        XCTAssertEqual(end, .end(at: t0 + 100_000, reason: .rider, metres: 0))
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 10)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 90)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
    }

    func testAppliedTransitionsFromTheFutureBackwardsAreClamped() {
        // A journal whose instants run backwards (written by a server whose clock stepped):
        // replaying it must give no negative pause and no shrinking ride.
        let journal: [RideTransition] = [
            .start(at: t0),
            .pause(at: t0 + 20_000),
            .resume(at: t0 + 15_000),   // before the pause
            .end(at: t0 + 5_000, reason: .rider, metres: 0),  // before everything
        ]
        guard case .success(let ride)? = Ride.replay(id: "r", planID: "default", owner: nil, limit: nil, journal: journal) else {
            return XCTFail("replay")
        }
        XCTAssertEqual(ride.pausedMillisBefore, 0)
        XCTAssertEqual(ride.endedAt, t0 + 20_000)
        XCTAssertEqual(ride.elapsedSeconds(at: t0 + 99_000), 20)
        XCTAssertEqual(ride.pausedSeconds(at: t0 + 99_000), 0)
    }

    // MARK: replay

    func testReplayOfTheJournalEqualsApplyingStepByStep() {
        let clock = ManualClock(t0 + 777)
        var ride = Ride(id: "r-7", planID: "default", owner: "rider-1", limit: 3_600, startedAt: clock.now())
        var journal: [RideTransition] = [.start(at: clock.now())]
        var snapshots: [Ride] = [ride]
        let steps: [(Int64, RideCommand)] = [(12_345, .pause), (4_000, .resume), (61_001, .pause), (1, .resume),
                                             (999, .pause), (30_000, .resume), (7_007, .end)]
        for (ms, command) in steps {
            clock.advance(millis: ms)
            perform(&ride, command, clock, metres: command == .end ? 2_500 : 0, journal: &journal)
            snapshots.append(ride)
        }
        XCTAssertEqual(journal.count, steps.count + 1)
        for n in 1...journal.count {
            let replayed = Ride.replay(id: "r-7", planID: "default", owner: "rider-1", limit: 3_600,
                                       journal: Array(journal.prefix(n)))
            XCTAssertEqual(replayed, .success(snapshots[n - 1]), "after \(n) journal entries")
        }
        XCTAssertEqual(ride.metres, 2_500)
        XCTAssertEqual(ride.ridingMillis(at: clock.now()), 12_345 + 61_001 + 999 + 7_007)
        XCTAssertEqual(ride.pausedMillis(at: clock.now()), 4_000 + 1 + 30_000)
    }

    func testReplayNeedsAStartFirstAndReportsABadEntry() {
        XCTAssertNil(Ride.replay(id: "r", planID: "default", owner: nil, limit: nil, journal: []))
        XCTAssertNil(Ride.replay(id: "r", planID: "default", owner: nil, limit: nil, journal: [.pause(at: t0)]))
        let bad: [RideTransition] = [.start(at: t0), .pause(at: t0 + 1), .pause(at: t0 + 2)]
        XCTAssertEqual(Ride.replay(id: "r", planID: "default", owner: nil, limit: nil, journal: bad),
                       .failure(RideError(state: .paused, command: .pause)))
        guard case .success(let r)? = Ride.replay(id: "r", planID: "p", owner: "o", limit: 60, journal: [.start(at: t0)]) else {
            return XCTFail("replay of a lone start")
        }
        XCTAssertEqual(r, Ride(id: "r", planID: "p", owner: "o", limit: 60, startedAt: t0))
    }

    // MARK: auto-end

    func testAutoEndAtTimeLimitIsRecordedAtTheExactLimitInstant() {
        let clock = ManualClock(t0 + 123)
        let start = clock.now()
        var ride = newRide(clock, limit: 120)
        clock.advance(seconds: 30)
        perform(&ride, .pause, clock)
        clock.advance(millis: 15_250)
        XCTAssertNil(ride.dueAutoEnd(at: clock.now() + 10_000_000, maxPauseSeconds: nil),
                     "a paused ride does not run into its time limit")
        perform(&ride, .resume, clock)

        let due = start + 15_250 + 120_000  // start + paused + limit
        XCTAssertNil(ride.dueAutoEnd(at: due - 1, maxPauseSeconds: nil))
        XCTAssertEqual(ride.dueAutoEnd(at: due, maxPauseSeconds: nil), .end(at: due, reason: .timeLimit, metres: 0))
        // Noticed late (the server was busy or down): still recorded at the limit.
        clock.set(due + 42_000)
        guard let tr = ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: 600) else { return XCTFail("not due") }
        XCTAssertEqual(tr, .end(at: due, reason: .timeLimit, metres: 0))
        apply(&ride, tr)
        XCTAssertEqual(ride.state, .ended)
        XCTAssertEqual(ride.endedAt, due)
        XCTAssertEqual(ride.endReason, .timeLimit)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 120)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 15)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 0)
        XCTAssertEqual(fare(ride, at: clock.now()), 860, "billed exactly up to the limit")
        XCTAssertNil(ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: 600), "an ended ride never ends again")
    }

    func testAutoEndAtMaxPause() {
        let clock = ManualClock(t0)
        var ride = newRide(clock, limit: 3_600)
        clock.advance(millis: 30_500)
        perform(&ride, .pause, clock)
        let due = t0 + 30_500 + 600_000
        XCTAssertNil(ride.dueAutoEnd(at: due - 1, maxPauseSeconds: 600))
        XCTAssertNil(ride.dueAutoEnd(at: due + 1_000_000, maxPauseSeconds: nil), "no maximum pause, no end")
        XCTAssertEqual(ride.dueAutoEnd(at: due, maxPauseSeconds: 600), .end(at: due, reason: .pauseLimit, metres: 0))
        clock.set(due + 5 * 60_000)
        guard let tr = ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: 600) else { return XCTFail("not due") }
        XCTAssertEqual(tr, .end(at: due, reason: .pauseLimit, metres: 0))
        apply(&ride, tr)
        XCTAssertEqual(ride.endedAt, due)
        XCTAssertEqual(ride.endReason, .pauseLimit)
        XCTAssertEqual(ride.elapsedSeconds(at: clock.now()), 30)
        XCTAssertEqual(ride.pausedSeconds(at: clock.now()), 600)
        XCTAssertEqual(fare(ride, at: clock.now()), 500)
    }

    func testMaxPauseCountsTheCurrentPauseOnly() {
        let clock = ManualClock(t0)
        var ride = newRide(clock)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 500)
        perform(&ride, .resume, clock)
        clock.advance(seconds: 1)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 500)
        XCTAssertNil(ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: 600), "two 500 s pauses are not one 1000 s pause")
        clock.advance(seconds: 100)
        XCTAssertEqual(ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: 600),
                       .end(at: clock.now(), reason: .pauseLimit, metres: 0))
    }

    func testNoLimitNeverAutoEnds() {
        let clock = ManualClock(t0)
        let ride = newRide(clock)
        XCTAssertNil(ride.dueAutoEnd(at: t0 + 365 * 86_400_000, maxPauseSeconds: 600))
        XCTAssertNil(ride.remainingSeconds(at: t0 + 1_000))
    }

    func testAbsurdLimitsMeanNeverInsteadOfTrapping() {
        let clock = ManualClock(t0)
        var ride = newRide(clock, limit: Int64.max)
        clock.advance(seconds: 3_600)
        XCTAssertNil(ride.dueAutoEnd(at: clock.now(), maxPauseSeconds: nil))
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), Int64.max - 3_600)
        perform(&ride, .pause, clock)
        XCTAssertNil(ride.dueAutoEnd(at: clock.now() + 86_400_000, maxPauseSeconds: Int64.max))
        XCTAssertEqual(Ride.instant(t0, plusSeconds: 2), t0 + 2_000)
        XCTAssertEqual(Ride.instant(t0, plusSeconds: Int64.max / 1000), Int64.max)
    }

    /// The optionals are stored as sentinels: nil, zero and the extremes read back as given,
    /// and the pause and end instants come and go with the transitions.
    func testOptionalsReadBackThroughTheirSentinels() {
        let clock = ManualClock(t0)
        XCTAssertNil(newRide(clock).limit)
        XCTAssertEqual(newRide(clock, limit: 0).limit, 0)
        XCTAssertEqual(newRide(clock, limit: -5).limit, -5)
        XCTAssertEqual(newRide(clock, limit: Int64.max).limit, Int64.max)
        XCTAssertEqual(newRide(clock, limit: Int64.min).limit, Int64.min + 1, "the sentinel itself is not a limit")
        XCTAssertEqual(newRide(clock, limit: Int64.min).remainingSeconds(at: t0), 0)
        var ride = newRide(clock, limit: 60)
        XCTAssertNil(ride.pausedSince)
        XCTAssertNil(ride.endedAt)
        XCTAssertNil(ride.endReason)
        clock.advance(seconds: 10)
        perform(&ride, .pause, clock)
        XCTAssertEqual(ride.pausedSince, t0 + 10_000)
        clock.advance(seconds: 5)
        perform(&ride, .resume, clock)
        XCTAssertNil(ride.pausedSince)
        XCTAssertEqual(ride.pausedMillisBefore, 5_000)
        clock.advance(seconds: 1)
        perform(&ride, .end, clock)
        XCTAssertEqual(ride.endedAt, t0 + 16_000)
        XCTAssertEqual(ride.endReason, .rider)
        XCTAssertEqual(ride.limit, 60)
        XCTAssertNotEqual(newRide(clock, limit: nil), newRide(clock, limit: 0))
        // Held by the book, the registry and every change in flight: the optionals in place took 136.
        XCTAssertEqual(MemoryLayout<Ride>.size, 106)
        XCTAssertEqual(MemoryLayout<RideBook.Entry>.stride, 120)
    }

    // MARK: remaining

    func testRemainingSeconds() {
        let clock = ManualClock(t0)
        var ride = newRide(clock, limit: 300)
        XCTAssertEqual(ride.limit, 300)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 300)
        clock.advance(millis: 59_500)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 241)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 1_000)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 241, "frozen while paused")
        perform(&ride, .resume, clock)
        clock.advance(millis: 240_499)  // riding 299.999 s
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 1)
        clock.advance(millis: 1)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 0)
        clock.advance(seconds: 100)
        XCTAssertEqual(ride.remainingSeconds(at: clock.now()), 0, "never negative")
        XCTAssertEqual(RideFigures(ride, plan, at: clock.now()).remaining, 0)
    }

    func testFiguresAgreeWithTheRideAndTheFareEngine() {
        let clock = ManualClock(t0)
        var ride = newRide(clock, limit: 600)
        clock.advance(seconds: 125)
        perform(&ride, .pause, clock)
        clock.advance(seconds: 7)
        let f = RideFigures(ride, plan, at: clock.now())
        XCTAssertEqual(f.elapsed, 125)
        XCTAssertEqual(f.paused, 7)
        XCTAssertEqual(f.fare, 860)
        XCTAssertEqual(f.remaining, 475)
        XCTAssertEqual(f.fare, FareEngine.quote(plan, riding: 125, paused: 7).total)
    }
}
