@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
@testable import RideCore
import RideStore

/// The tick hub's logic against a hand-advanced clock: the schedule of the one shared timer
/// and the registry's per-tick work (one encode per ride, auto-ends, warnings). No sleeps.
final class TickHubTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_250  // a quarter second past a whole second
    let pre = EmbeddedService.headroom

    func registry(_ clock: ManualClock, plans: [FarePlan] = [.standard]) throws -> EmbeddedService {
        EmbeddedService(clock, plans: plans)
    }

    func json(_ frame: [UInt8]) -> String { String(decoding: frame[pre...], as: UTF8.self) }

    func testScheduleFiresOncePerWholeSecondAdvanced() {
        let clock = ManualClock(t0)
        var s = TickSchedule(now: clock.now())
        XCTAssertEqual(s.delay(now: clock.now()), 750_000)
        XCTAssertNil(s.fire(now: clock.now()), "nothing before the first whole second")
        clock.advance(millis: 750)
        var fired: [(Int64, UnixMillis)] = []
        for _ in 0..<5 {
            if let t = s.fire(now: clock.now()) { fired.append(t) }
            XCTAssertNil(s.fire(now: clock.now()), "never twice for one second")
            clock.advance(seconds: 1)
        }
        XCTAssertEqual(fired.map(\.0), (1...5).map { 1_764_430_000 + Int64($0) }, "seq = at / 1000, the same on every node")
        XCTAssertEqual(fired.map(\.1), (1...5).map { 1_764_430_000_000 + Int64($0) * 1000 })
    }

    func testLateTimerSkipsToTheCurrentSecondWithoutABurst() {
        let clock = ManualClock(1_764_430_000_000)
        var s = TickSchedule(now: clock.now())
        clock.advance(seconds: 1)
        XCTAssertEqual(s.fire(now: clock.now())?.at, 1_764_430_001_000)
        clock.advance(millis: 3_400)  // the process stalled for three seconds
        let t = s.fire(now: clock.now())
        XCTAssertEqual(t?.seq, 1_764_430_004, "seq is the Unix second: a skipped second skips it too")
        XCTAssertEqual(t?.at, 1_764_430_004_000)
        XCTAssertNil(s.fire(now: clock.now()))
        XCTAssertEqual(s.delay(now: clock.now()), 600_000)
    }

    func testOneEncodedTickPerRidePerSecondWithExactFigures() throws {
        let clock = ManualClock(t0)
        let reg = try registry(clock)
        _ = reg.request(.start(ride: "r-a", plan: nil, limit: nil, owner: nil), id: nil)
        _ = reg.request(.start(ride: "r-b", plan: nil, limit: nil, owner: nil), id: nil)
        _ = reg.request(.start(ride: "r-unwatched", plan: nil, limit: nil, owner: nil), id: nil)
        reg.watch("r-a")
        reg.watch("r-b")
        var sched = TickSchedule(now: clock.now())
        clock.advance(millis: 750)
        var elapsed: [Int64] = []
        for _ in 0..<61 {
            let (seq, at) = try XCTUnwrap(sched.fire(now: clock.now()))
            let (batch, pushes) = reg.tick(seq: seq, at: at)
            XCTAssertTrue(pushes.isEmpty)
            XCTAssertEqual(batch.rides(pre: pre).map(\.live.id).sorted(), ["r-a", "r-b"])
            XCTAssertEqual(batch.seq, seq)
            XCTAssertEqual(batch.at, at)
            let a = try XCTUnwrap(batch.rides(pre: pre).first { $0.live.id == "r-a" })
            XCTAssertEqual(Array(a.frame[..<pre]), Array(repeating: 0, count: pre), "LWS_PRE room in front")
            let doc = try JSON.parse(Array(a.frame[pre...]))
            XCTAssertEqual(doc["seq"]?.int, seq)
            XCTAssertEqual(doc["at"]?.int, at)
            elapsed.append(doc["elapsed"]!.int!)
            clock.advance(seconds: 1)
        }
        // Started a quarter second before the first whole second: elapsed 0 at 0.75 s, then +1 a second.
        XCTAssertEqual(elapsed, Array(0...60))
        let last = try XCTUnwrap(reg.tick(seq: 99, at: 1_764_430_060_000).0.rides(pre: pre).first { $0.live.id == "r-a" })
        XCTAssertEqual(json(last.frame),
                       #"{"type":"tick","ride":"r-a","state":"riding","elapsed":59,"paused":0,"fare":500,"currency":"KRW","seq":99,"at":1764430060000}"#)
        let next = try XCTUnwrap(reg.tick(seq: 100, at: 1_764_430_061_000).0.rides(pre: pre).first { $0.live.id == "r-a" })
        XCTAssertEqual(json(next.frame),
                       #"{"type":"tick","ride":"r-a","state":"riding","elapsed":60,"paused":0,"fare":680,"currency":"KRW","seq":100,"at":1764430061000}"#)
    }

    func testPausedRideTicksFrozenAndEndedRideStopsTicking() throws {
        let clock = ManualClock(1_764_430_000_000)
        let reg = try registry(clock)
        _ = reg.request(.start(ride: "r-p", plan: nil, limit: nil, owner: nil), id: nil)
        reg.watch("r-p")
        clock.advance(seconds: 90)
        let paused = reg.request(.command(.pause, ride: "r-p", metres: nil), id: "p")
        XCTAssertEqual(paused.pushes.count, 1)
        clock.advance(seconds: 30)
        let (batch, _) = reg.tick(seq: 1, at: clock.now())
        let doc = try JSON.parse(Array(batch.rides(pre: pre)[0].frame[pre...]))
        XCTAssertEqual(doc["state"]?.string, "paused")
        XCTAssertEqual(doc["elapsed"]?.int, 90)
        XCTAssertEqual(doc["paused"]?.int, 30)
        XCTAssertEqual(doc["fare"]?.int, 680)
        _ = reg.request(.command(.end, ride: "r-p", metres: nil), id: nil)
        XCTAssertTrue(reg.tick(seq: 2, at: clock.now() + 1000).0.rides(pre: pre).isEmpty)
        XCTAssertEqual(reg.registry.counts.ended, 1)
    }

    /// Watched or not (an unwatched ride's tick is not encoded), a ride is warned and ended.
    func testTimeLimitWarnsAtFiveAndOneMinuteAndEndsAtTheLimit() throws {
        for watched in [true, false] {
            try timeLimitWarnsAndEnds(watched: watched)
        }
    }

    func timeLimitWarnsAndEnds(watched: Bool) throws {
        let clock = ManualClock(1_764_430_000_000)
        let reg = try registry(clock)
        _ = reg.request(.start(ride: "r-l", plan: nil, limit: 600, owner: nil), id: nil)
        if watched { reg.watch("r-l") }
        var warnings: [(Int64, Int64)] = []  // (second, remaining)
        var endedAt: UnixMillis?
        for second in 1...601 {
            clock.set(1_764_430_000_000 + Int64(second) * 1000)
            let (batch, pushes) = reg.tick(seq: Int64(second), at: clock.now())
            for (_, frame) in pushes {
                let m = try JSON.parse(Array(frame[pre...]))
                if m["type"]?.string == "warning" { warnings.append((Int64(second), m["remaining"]!.int!)) }
                if m["type"]?.string == "state" {
                    XCTAssertEqual(m["state"]?.string, "ended")
                    XCTAssertEqual(m["receipt"]?["reason"]?.string, "time_limit")
                    XCTAssertEqual(m["receipt"]?["elapsed"]?.int, 600)
                    XCTAssertEqual(m["receipt"]?["fare"]?.int, 500 + 10 * 180)
                    endedAt = m["ended_at"]?.int
                }
            }
            if !watched {
                XCTAssertTrue(batch.rides(pre: pre).isEmpty, "nobody watches: nothing encoded")
            } else if endedAt == nil {
                let t = try JSON.parse(Array(batch.rides(pre: pre)[0].frame[pre...]))
                XCTAssertEqual(t["remaining"]?.int, Int64(600 - second))
            }
        }
        XCTAssertEqual(warnings.map(\.0), [300, 540])
        XCTAssertEqual(warnings.map(\.1), [300, 60])
        XCTAssertEqual(endedAt, 1_764_430_600_000, "ended at the limit instant, not when noticed")
    }

    /// A limit of a minute or less gets the 1-minute warning alone (it used to get a "5 minutes"
    /// warning first and the 1-minute one a tick later); a limit between them gets both, once.
    func testShortLimitsGetOnlyTheWarningsThatApply() throws {
        for (limit, expected) in [(Int64(45), [(Int64(1), Int64(44))]), (200, [(1, 199), (140, 60)])] {
            let clock = ManualClock(1_764_430_000_000)
            let reg = try registry(clock)
            _ = reg.request(.start(ride: "r-w", plan: nil, limit: limit, owner: nil), id: nil)
            var warnings: [(Int64, Int64)] = []
            var ended = false
            for second in 1...(limit + 1) {
                clock.set(1_764_430_000_000 + second * 1000)
                for (_, frame) in reg.tick(seq: second, at: clock.now()).1 {
                    let m = try JSON.parse(Array(frame[pre...]))
                    if m["type"]?.string == "warning" { warnings.append((second, m["remaining"]!.int!)) }
                    if m["receipt"]?["reason"]?.string == "time_limit" { ended = true }
                }
            }
            XCTAssertEqual(warnings.map(\.0), expected.map(\.0), "limit \(limit)")
            XCTAssertEqual(warnings.map(\.1), expected.map(\.1), "limit \(limit)")
            XCTAssertTrue(ended, "limit \(limit)")
        }
    }

    func testMaximumPauseEndsTheRideByItself() throws {
        let clock = ManualClock(1_764_430_000_000)
        var plan = FarePlan.standard
        plan.maxPauseSeconds = 120
        let reg = try registry(clock, plans: [plan])
        _ = reg.request(.start(ride: "r-mp", plan: nil, limit: nil, owner: nil), id: nil)
        clock.advance(seconds: 61)
        _ = reg.request(.command(.pause, ride: "r-mp", metres: nil), id: nil)
        clock.advance(seconds: 119)
        XCTAssertTrue(reg.tick(seq: 1, at: clock.now()).1.isEmpty)
        clock.advance(seconds: 2)
        let pushes = reg.tick(seq: 2, at: clock.now()).1
        let m = try JSON.parse(Array(try XCTUnwrap(pushes.first).1[pre...]))
        XCTAssertEqual(m["receipt"]?["reason"]?.string, "pause_limit")
        XCTAssertEqual(m["receipt"]?["paused"]?.int, 120)
        XCTAssertEqual(m["receipt"]?["elapsed"]?.int, 61)
        XCTAssertEqual(m["ended_at"]?.int, 1_764_430_000_000 + 181_000)
    }

    func testRetriedControlIsAnsweredWithTheSameReplyAndAppliedOnce() throws {
        let clock = ManualClock(1_764_430_000_000)
        let reg = try registry(clock)
        let first = reg.request(.start(ride: nil, plan: nil, limit: nil, owner: nil), id: "q1")
        clock.advance(seconds: 5)
        let again = reg.request(.start(ride: nil, plan: nil, limit: nil, owner: nil), id: "q1")
        XCTAssertEqual(first.reply, again.reply)
        XCTAssertEqual(reg.registry.counts.riding, 1)
        let rid = try JSON.parse(Array(first.reply![pre...]))["ride"]!.string!
        let end1 = reg.request(.command(.end, ride: rid, metres: nil), id: "e1")
        clock.advance(seconds: 5)
        let end2 = reg.request(.command(.end, ride: rid, metres: nil), id: "e1")
        XCTAssertEqual(end1.reply, end2.reply)
        XCTAssertTrue(end2.pushes.isEmpty, "a replayed reply changes nothing and pushes nothing")
    }
}
