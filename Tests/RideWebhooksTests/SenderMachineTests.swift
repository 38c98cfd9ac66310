import XCTest
import RideCore
@testable import RideWebhooks

/// The sender's decisions, driven by a clock advanced by hand.
final class SenderMachineTests: XCTestCase {
    let clock = ManualClock(1_700_000_000_000)
    var seq: Int64 = 0

    func row(_ ride: String, _ type: WebhookEventType, endpoint: String = "http://127.0.0.1:9/hook") -> OutboxRow {
        seq += 1
        let event = WebhookEvent(id: "evt_\(seq)", type: type, rideID: ride, created: clock.now(), ride: Array(#"{"id":"\#(ride)"}"#.utf8))
        return OutboxRow(seq: seq, event: event, endpoint: endpoint)
    }

    func testOneRideInCommitOrderEvenWhenTheHeadFails() {
        var m = SenderMachine(maxInFlight: 8)
        let rows = WebhookEventType.allCases.map { row("r-1", $0) }
        m.load(rows)
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1])
        // While the head is out, nothing else of this ride goes.
        XCTAssertEqual(m.due(now: clock.now()), [])
        XCTAssertEqual(m.finished(seq: 1, result: .status(500), now: clock.now()),
                       .retry(seq: 1, attempts: 1, at: clock.now() + 1_000, lastResult: "HTTP 500"))
        // Row 2 is due (created now) but waits behind the failed head.
        XCTAssertEqual(m.due(now: clock.now()), [])
        XCTAssertEqual(m.nextWake(), clock.now() + 1_000)
        clock.advance(millis: 999)
        XCTAssertEqual(m.due(now: clock.now()), [])
        clock.advance(millis: 1)
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1])
        XCTAssertEqual(m.finished(seq: 1, result: .timeout, now: clock.now()),
                       .retry(seq: 1, attempts: 2, at: clock.now() + 2_000, lastResult: "timeout"))
        clock.advance(seconds: 2)
        var order = [Int64]()
        while let next = m.due(now: clock.now()).first {
            order.append(next.seq)
            XCTAssertEqual(m.finished(seq: next.seq, result: .status(204), now: clock.now()),
                           .delivered(seq: next.seq, attempts: next.seq == 1 ? 3 : 1))
        }
        XCTAssertEqual(order, [1, 2, 3, 4])
        XCTAssertEqual(m.pendingCount, 0)
        XCTAssertEqual(m.counts.delivered, 4)
        XCTAssertEqual(m.counts.retried, 2)
        XCTAssertEqual(m.counts.attemptsByResult, ["delivered": 4, "http_error": 1, "timeout": 1])
    }

    func testRidesAndEndpointsAreSeparateLanes() {
        var m = SenderMachine(maxInFlight: 8)
        m.load([row("a", .started), row("b", .started), row("a", .ended), row("a", .started, endpoint: "http://127.0.0.1:9/other")])
        // a's first, b's first, and a's first to the other endpoint; a's end waits.
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1, 2, 4])
        _ = m.finished(seq: 2, result: .status(200), now: clock.now())
        XCTAssertEqual(m.due(now: clock.now()), [])
        _ = m.finished(seq: 1, result: .status(200), now: clock.now())
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [3])
    }

    func testInFlightIsBoundedAndOldestGoFirst() {
        var m = SenderMachine(maxInFlight: 2)
        m.load((0..<5).map { row("r-\($0)", .started) })
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1, 2])
        XCTAssertNil(m.nextWake(), "all slots busy: only a finish frees one")
        XCTAssertEqual(m.due(now: clock.now()), [])
        _ = m.finished(seq: 2, result: .failed("connect: Connection refused"), now: clock.now())
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [3])
        XCTAssertEqual(m.inFlightCount, 2)
    }

    func testDeadAfterADayThenTheRideMovesOn() {
        var m = SenderMachine(maxInFlight: 1)
        let created = clock.now()
        m.load([row("r-1", .started), row("r-1", .ended)])
        var attempts = 0
        var last: OutboxUpdate?
        while attempts < 1_000 {
            guard let next = m.due(now: clock.now()).first else {
                guard let wake = m.nextWake() else { break }
                clock.set(wake)
                continue
            }
            XCTAssertEqual(next.seq, 1, "the ended event never overtakes the started one")
            attempts += 1
            last = m.finished(seq: next.seq, result: .status(503), now: clock.now())
            if case .dead = last { break }
        }
        XCTAssertEqual(last, .dead(seq: 1, attempts: attempts, lastResult: "HTTP 503"))
        XCTAssertEqual(attempts, 1 + 9 + (86_400 - 511) / 300)
        XCTAssertLessThanOrEqual(clock.now() - created, 86_400_000)
        XCTAssertEqual(m.counts.dead, 1)
        // Row 2 was created with row 1: its own day is nearly over too, but it gets its turn.
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [2])
        XCTAssertEqual(m.oldestPendingCreated, created)
    }

    func testLoadIsIdempotentAndResultsCountOnce() {
        var m = SenderMachine()
        let r = row("r-1", .started)
        m.load([r])
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1])
        m.load([r])  // the loop re-reads the table while it is in flight
        XCTAssertEqual(m.pendingCount, 1)
        XCTAssertEqual(m.due(now: clock.now()), [])
        XCTAssertEqual(m.finished(seq: 1, result: .status(200), now: clock.now()), .delivered(seq: 1, attempts: 1))
        XCTAssertNil(m.finished(seq: 1, result: .status(200), now: clock.now()))
        XCTAssertNil(m.finished(seq: 99, result: .status(200), now: clock.now()))
        XCTAssertEqual(m.counts.delivered, 1)
    }

    func testRestartResumesFromTheStoredRow() {
        // A row read back after a restart carries its attempts and schedule.
        var stored = row("r-1", .paused)
        stored.attempts = 4
        stored.nextAttemptAt = clock.now() + 8_000
        var m = SenderMachine()
        m.load([stored])
        XCTAssertEqual(m.due(now: clock.now()), [])
        XCTAssertEqual(m.nextWake(), clock.now() + 8_000)
        clock.advance(seconds: 8)
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1])
        XCTAssertEqual(m.finished(seq: 1, result: .status(500), now: clock.now()),
                       .retry(seq: 1, attempts: 5, at: clock.now() + 16_000, lastResult: "HTTP 500"))
    }

    func testDropForgetsLostLeasesButNotInFlight() {
        var m = SenderMachine()
        m.load([row("a", .started), row("b", .started)])
        XCTAssertEqual(m.due(now: clock.now()).map(\.seq), [1, 2])
        _ = m.finished(seq: 2, result: .status(500), now: clock.now())
        m.drop(seqs: [1, 2])
        XCTAssertEqual(m.pendingCount, 1, "1 is in flight and stays until it finishes")
        XCTAssertEqual(m.finished(seq: 1, result: .status(200), now: clock.now()), .delivered(seq: 1, attempts: 1))
        XCTAssertEqual(m.pendingCount, 0)
    }
}
