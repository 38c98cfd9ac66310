import XCTest
@testable import RideCore
@testable import RidePushServer

/// Issue 15 item 10: the slow-consumer clock starts when a tick became pending, not when the
/// connection last had nothing to send.
final class SlowConsumerTests: XCTestCase {
    func testTheLagCountsFromWhenTheTickBecamePending() {
        let session = Session(wsi: OpaquePointer(bitPattern: 0x10)!, peer: "test", serial: 1)
        var sub = Subscriber(session: session)
        // Quiet for an hour (nothing to send), then a tick is pending and the next arrives.
        let hourLater = session.connectedAt + 3_600_000
        XCTAssertFalse(sub.overdue(hourLater, lag: 10_000), "nothing pending")
        sub.tickPending(hourLater)
        XCTAssertFalse(sub.overdue(hourLater + 1_000, lag: 10_000), "one second behind is not slow")
        XCTAssertFalse(sub.overdue(hourLater + 10_000, lag: 10_000))
        XCTAssertTrue(sub.overdue(hourLater + 10_001, lag: 10_000))
        sub.pending = false
        XCTAssertFalse(sub.overdue(hourLater + 20_000, lag: 10_000))
    }
}
