import Synchronization
import Testing
@testable import RideCore

/// Two hand-moved time sources: monotonic and wall, in µs. Tests step the wall both ways
/// between readings; nothing sleeps.
final class FakeTime: Sendable {
    let mono = Mutex<Int64>(5_000_000)
    let wall = Mutex<Int64>(1_764_430_000_250_000)  // a quarter second past a whole second
    func pass(millis: Int64) {
        mono.withLock { $0 += millis * 1000 }
        wall.withLock { $0 += millis * 1000 }
    }
    func stepWall(millis: Int64) { wall.withLock { $0 += millis * 1000 } }
    func clock() -> SlewingClock {
        SlewingClock(monotonic: { self.mono.withLock { $0 } }, wall: { self.wall.withLock { $0 } })
    }
}

struct SlewingClockTests {
    let t0: UnixMillis = 1_764_430_000_250

    @Test func startsAtTheWallClockAndFollowsItWhileTheyAgree() {
        let time = FakeTime()
        let clock = time.clock()
        #expect(clock.now() == t0)
        time.pass(millis: 1234)
        #expect(clock.now() == t0 + 1234)
        #expect(clock.steps == 0 && clock.offsetMillis == 0)
    }

    @Test func aStepBackIsSlewedNotFollowed() {
        let time = FakeTime()
        let clock = time.clock()
        time.pass(millis: 1000)
        #expect(clock.now() == t0 + 1000)
        time.stepWall(millis: -30 * 60_000)
        time.pass(millis: 1000)
        // One second passed: the clock moved 1 s less at most 5 ms, never 30 minutes back.
        #expect(clock.now() == t0 + 1995)
        #expect(clock.steps == 1)
        #expect(clock.offsetMillis == -1_799_995)
        #expect(clock.takeSteps() == [-1_800_000])
        #expect(clock.takeSteps() == [], "reported once")
        for _ in 0..<10 { time.pass(millis: 1000); _ = clock.now() }
        #expect(clock.now() == t0 + 11_945)
        #expect(clock.steps == 1, "slewing is not a step")
    }

    @Test func aStepForwardIsSlewedNotFollowed() {
        let time = FakeTime()
        let clock = time.clock()
        time.stepWall(millis: 30 * 60_000)
        time.pass(millis: 1000)
        #expect(clock.now() == t0 + 1005)
        #expect(clock.takeSteps() == [1_800_000])
        #expect(clock.offsetMillis == 1_799_995)
    }

    /// Both ways between ticks, as a TickSchedule sees them: one tick per second of time
    /// that passed, `at` 1000 apart, `seq` the Unix second, never a pause or a burst.
    @Test func ticksKeepTheirPaceThroughStepsBothWays() {
        let time = FakeTime()
        let clock = time.clock()
        var schedule = TickSchedule(now: clock.now())
        var ticks: [(seq: Int64, at: UnixMillis)] = []
        for second in 0..<12 {
            if second == 4 { time.stepWall(millis: -30 * 60_000) }
            if second == 8 { time.stepWall(millis: 60 * 60_000) }
            time.pass(millis: Int64(schedule.delay(now: clock.now()) / 1000) + 10)
            if let t = schedule.fire(now: clock.now()) { ticks.append(t) }
        }
        #expect(ticks.count == 12)
        #expect(ticks.map(\.at) == (1...12).map { 1_764_430_000_000 + Int64($0) * 1000 })
        #expect(ticks.map(\.seq) == (1...12).map { 1_764_430_000 + Int64($0) })
        #expect(clock.steps == 2)
    }

    /// A small error is absorbed in bounded time, then the clock runs with the wall again.
    @Test func smallOffsetsConverge() {
        let time = FakeTime()
        let clock = time.clock()
        time.stepWall(millis: -200)  // over the 100 ms threshold: a step, absorbed in 40 s
        var last = clock.now()
        for _ in 0..<40 {
            time.pass(millis: 1000)
            let now = clock.now()
            #expect(now - last >= 995 && now - last <= 1005)
            last = now
        }
        #expect(clock.offsetMillis == 0)
        #expect(clock.now() == time.wall.withLock { $0 } / 1000)
        #expect(clock.steps == 1)
    }

    /// NTP-sized drift (0.5 ms per second) is no step, and is followed within the slew.
    @Test func driftIsNoStep() {
        let time = FakeTime()
        let clock = time.clock()
        for _ in 0..<100 {
            time.pass(millis: 1000)
            time.wall.withLock { $0 += 500 }
            _ = clock.now()
        }
        #expect(clock.steps == 0)
        #expect(clock.offsetMillis == 0)
    }

    /// Readings microseconds apart still slew (the budget below 1 µs is carried), and the
    /// clock never goes back even when the wall does.
    @Test func neverBackwardsAtFineGrain() {
        let time = FakeTime()
        let clock = time.clock()
        time.stepWall(millis: -5_000)
        var last = clock.nowMicros()
        for _ in 0..<10_000 {
            time.mono.withLock { $0 += 100 }
            time.wall.withLock { $0 += 100 }
            let now = clock.nowMicros()
            #expect(now >= last)
            last = now
        }
        // 1 s of monotonic time in 100 µs steps: slowed by exactly 5 ms.
        #expect(last == 1_764_430_000_250_000 + 1_000_000 - 5_000)
    }

    @Test func systemClockIsUnixMillisecondsNearTheWall() {
        let wall = SystemClock().now()
        let process = SlewingClock.system.now()
        #expect(abs(process - wall) < 1000)
    }
}
