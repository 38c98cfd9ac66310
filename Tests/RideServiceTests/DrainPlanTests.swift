@testable import RideService
import XCTest

/// The drain's closes decided on a manual clock: which connections go at each beat.
final class DrainPlanTests: XCTestCase {
    /// Beats every 100 ms from `from` to `to` (inclusive); (ms since start, serials closed).
    func run(_ plan: inout DrainPlan, from: Int64 = 0, to: Int64, busy: (UInt64, Int64) -> Bool = { _, _ in false }) -> [(Int64, UInt64)] {
        var closed: [(Int64, UInt64)] = []
        var t = from
        let start = plan.start
        while t <= to {
            let now = start + t
            for s in plan.beat(now: now, busy: { busy($0, now - start) }) { closed.append((t, s)) }
            t += DrainPlan.beatMillis
        }
        return closed
    }

    func testFortyConnectionsOverFourSecondsCloseOneEveryHundredMilliseconds() {
        var plan = DrainPlan(sessions: Array(1...40), start: 1_000_000, length: 4_000)
        let closed = run(&plan, to: 4_000)
        XCTAssertEqual(closed.map(\.1), Array(1...40), "each once, oldest first")
        XCTAssertEqual(closed.first?.0, 0, "the first at once")
        XCTAssertEqual(closed.last?.0, 3_900, "the last one share before the end")
        for (k, (t, _)) in closed.enumerated() { XCTAssertEqual(t, Int64(k) * 100, "connection \(k + 1)") }
        XCTAssertTrue(plan.finished)
    }

    func testManyConnectionsAreSpreadEvenlyAcrossBeats() {
        var plan = DrainPlan(sessions: Array(1...1_000), start: 0, length: 10_000)
        let closed = run(&plan, to: 10_000)
        XCTAssertEqual(closed.count, 1_000)
        // 10 per beat, never a herd: no beat closes more than its share (the first beat takes
        // only the one due at once, the last the remaining 9).
        let perBeat = Dictionary(grouping: closed, by: \.0).mapValues(\.count)
        XCTAssertEqual(perBeat.values.max(), 10)
        XCTAssertEqual(perBeat.count, 101)
        XCTAssertEqual(perBeat[0], 1)
    }

    func testNoDrainClosesEverythingAtTheFirstBeat() {
        var plan = DrainPlan(sessions: [3, 5, 9], start: 500, length: 0)
        XCTAssertEqual(plan.beat(now: 500, busy: { _ in false }), [3, 5, 9])
        XCTAssertTrue(plan.finished)
        XCTAssertEqual(plan.deadline, 3_500, "a no-drain stop keeps its 3 s bound")
    }

    func testNothingToCloseIsFinishedAtOnce() {
        var plan = DrainPlan(sessions: [], start: 0, length: 10_000)
        XCTAssertEqual(plan.beat(now: 0, busy: { _ in false }), [])
        XCTAssertTrue(plan.finished)
    }

    func testAConnectionWithAnUnansweredRequestWaitsForItsAnswer() {
        var plan = DrainPlan(sessions: [1, 2, 3, 4], start: 0, length: 400)
        // Connection 1's request is answered at 250 ms; the others go on time.
        let closed = run(&plan, to: 1_000, busy: { s, t in s == 1 && t < 250 })
        XCTAssertEqual(closed.map(\.1), [2, 3, 1, 4])
        XCTAssertEqual(closed.first { $0.1 == 1 }?.0, 300, "closed at the first beat after its answer")
        XCTAssertTrue(plan.finished)
    }

    func testAStuckRequestHoldsTheCloseOnlyUntilTheGraceRunsOut() {
        var plan = DrainPlan(sessions: [1, 2], start: 0, length: 1_000)
        let closed = run(&plan, to: 3_000, busy: { s, _ in s == 2 })
        XCTAssertEqual(closed.map(\.1), [1, 2])
        XCTAssertEqual(closed.last?.0, 1_000 + DrainPlan.graceMillis, "forced at end + grace")
        XCTAssertTrue(plan.finished)
        XCTAssertLessThanOrEqual(plan.deadline - plan.start, 1_000 + 5_000, "exits within drain + 5 s")
    }

    func testALateBeatCatchesUpOnEverythingDue() {
        // A loaded thread's timer fires late: whatever fell due meanwhile goes at that beat.
        var plan = DrainPlan(sessions: Array(1...10), start: 0, length: 1_000)
        XCTAssertEqual(plan.beat(now: 0, busy: { _ in false }), [1])
        XCTAssertEqual(plan.beat(now: 550, busy: { _ in false }), [2, 3, 4, 5, 6])
        XCTAssertEqual(plan.beat(now: 2_000, busy: { _ in false }), [7, 8, 9, 10])
    }

    func testHealthSaysDrainingWith503WhateverElseHolds() {
        XCTAssertEqual(Health.status(healthy: true, draining: true).word, "draining")
        XCTAssertFalse(Health.status(healthy: true, draining: true).ok)
        XCTAssertEqual(Health.status(healthy: true, draining: false).word, "ok")
        XCTAssertEqual(Health.status(healthy: false, draining: false).word, "degraded")
    }
}
