@testable import RideService
import XCTest
@testable import RideCore

/// The session's one slow-consumer clock (issue 25; Outbox.swift has the clock itself): a tick
/// that goes without a write, leaving nothing waiting, stops it, so a frame much later is not
/// judged by the old start (a quiet connection is not "slow" at its next frame).
final class SlowConsumerTests: XCTestCase {
    func testATickDroppedWithNothingElseWaitingStopsTheClock() {
        let session = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16)
        session.pendingTicks = 1
        session.outbox.waiting(at: 100)
        XCTAssertTrue(session.outbox.overdue(at: 221, lag: 100), "the pending tick waited 12 s")
        session.tickDropped()  // superseded by a state push that was then written, or unsubscribed
        XCTAssertEqual(session.pendingTicks, 0)
        XCTAssertFalse(session.outbox.overdue(at: 10_000, lag: 100), "nothing waits: stopped")
    }

    func testATickDroppedBehindQueuedFramesKeepsTheClock() {
        let session = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16)
        session.pendingTicks = 1
        session.outbox.waiting(at: 100)
        XCTAssertTrue(session.queue([0, 1]))
        session.tickDropped()
        XCTAssertTrue(session.outbox.overdue(at: 201, lag: 100), "the frame still waits: from the first start")
    }
}
