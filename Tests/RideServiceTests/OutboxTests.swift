import XCTest
@testable import RideService

/// Issue 25 finding 2: one outbox per connection, one bound and one slow-consumer clock for
/// every kind of frame and the pending ticks; without a socket.
final class OutboxTests: XCTestCase {
    func frame(_ n: UInt8) -> [UInt8] { [0, 0, n] }

    func testEveryFrameAndPendingTickCountsTowardOneBound() {
        var o = Outbox()
        for i in 0..<Outbox.limit { XCTAssertTrue(o.push(frame(UInt8(i & 0xFF)), at: 10, ticks: 0), "frame \(i)") }
        XCTAssertEqual(o.count, 1024)
        XCTAssertFalse(o.push(frame(1), at: 10, ticks: 0), "the 1,025th frame of any kind")
        XCTAssertEqual(o.count, 1024, "refused: nothing queued")
        // Pending ticks take places too.
        var t = Outbox()
        for _ in 0..<(Outbox.limit - 3) { XCTAssertTrue(t.push(frame(0), at: 10, ticks: 3)) }
        XCTAssertFalse(t.push(frame(0), at: 10, ticks: 3))
        XCTAssertTrue(t.push(frame(0), at: 10, ticks: 2))
        // Taking frames off makes room again.
        _ = o.pop()
        XCTAssertTrue(o.push(frame(9), at: 10, ticks: 0))
        XCTAssertFalse(o.push(frame(9), at: 10, ticks: 0))
    }

    func testTheClockStartsAtTheOldestUnwrittenFrameAndAPushDoesNotRestartIt() {
        var o = Outbox()
        let lag: Int32 = 20  // two seconds, in tenths
        XCTAssertFalse(o.overdue(at: 1_000_000, lag: lag), "nothing waits")
        XCTAssertTrue(o.push(frame(1), at: 100, ticks: 0))
        for t: Int32 in [105, 110, 115, 119] { XCTAssertTrue(o.push(frame(2), at: t, ticks: 0)) }
        XCTAssertFalse(o.overdue(at: 120, lag: lag))
        XCTAssertTrue(o.overdue(at: 121, lag: lag), "from the first frame, though pushes kept coming")
        // A write takes one off: the peer reads, so the clock restarts for what still waits.
        _ = o.pop()
        o.progressed(at: 121, stillWaiting: !o.isEmpty)
        XCTAssertFalse(o.overdue(at: 141, lag: lag))
        XCTAssertTrue(o.overdue(at: 142, lag: lag))
        while !o.isEmpty { _ = o.pop() }
        o.progressed(at: 150, stillWaiting: false)
        XCTAssertFalse(o.overdue(at: 10_000, lag: lag), "all written: stopped")
    }

    func testAPendingTickStartsTheSameClockAndAFrameAfterItDoesNotRestartIt() {
        var o = Outbox()
        o.waiting(at: 100)  // a tick became pending
        XCTAssertTrue(o.push(frame(1), at: 115, ticks: 1))  // a state push supersedes it
        XCTAssertTrue(o.overdue(at: 121, lag: 20))
        // A tick that went without a write (unsubscribed) and nothing else waiting: stopped,
        // so a frame much later starts it afresh.
        var q = Outbox()
        q.waiting(at: 100)
        q.idle()
        XCTAssertTrue(q.push(frame(1), at: 500, ticks: 0))
        XCTAssertFalse(q.overdue(at: 520, lag: 20))
        XCTAssertTrue(q.overdue(at: 521, lag: 20))
    }

    func testTheFleetMarkerIsTakenOutInPlaceAndOrderIsKept() {
        var o = Outbox()
        for f in [frame(1), [], frame(2)] { XCTAssertTrue(o.push(f, at: 1, ticks: 0)) }
        o.removeFirst(where: \.isEmpty)
        XCTAssertEqual([o.pop(), o.pop()], [frame(1), frame(2)])
        XCTAssertTrue(o.isEmpty)
        XCTAssertTrue(o.push([], at: 1, ticks: 0))
        o.removeFirst(where: \.isEmpty)
        XCTAssertTrue(o.isEmpty)
        XCTAssertEqual(o.head, 0)
    }

    func testTenthsAreNeverZero() {
        XCTAssertEqual(Outbox.tenths(0), 1)
        XCTAssertEqual(Outbox.tenths(12_345), 123)
    }
}

/// Pending HTTP reads found by token and by connection without a scan.
final class PendingReadsTests: XCTestCase {
    func testReadsAreFoundByTokenAndForgottenWithTheirConnection() {
        var p = PendingReads<Int>()
        let a = p.add(1, "r-a")
        let b = p.add(2, "r-b")
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(p.count, 2)
        XCTAssertEqual(p.take(b).map { [String($0.handle), $0.what] }, ["2", "r-b"])
        XCTAssertNil(p.take(b), "taken once")
        p.forget(1)
        XCTAssertNil(p.take(a), "its connection closed: the answer finds nothing")
        XCTAssertEqual(p.count, 0)
        // A connection's next read replaces its earlier one.
        let c1 = p.add(3, "first")
        let c2 = p.add(3, "second")
        XCTAssertNil(p.take(c1))
        XCTAssertEqual(p.take(c2)?.what, "second")
    }
}
