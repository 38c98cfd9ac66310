@testable import RideService
import XCTest

/// The soak's finding (issue 15): freed heap is handed back once a crowd has left, not
/// during a steady churn.
final class HeapTrimPolicyTests: XCTestCase {
    func testTrimsOnceWhenTheCrowdLeavesAndNotWhileItChurns() {
        var p = HeapTrimPolicy()
        for n in [0, 800, 2000, 1950, 2050, 1900, 2000] { XCTAssertFalse(p.observe(n), "steady churn at \(n)") }
        XCTAssertEqual(p.peak, 2050)
        XCTAssertFalse(p.observe(1100), "down by 950 but above half the peak")
        XCTAssertTrue(p.observe(1025), "half of 2050")
        XCTAssertEqual(p.peak, 1025)
        XCTAssertFalse(p.observe(600), "down by 425 from the new peak")
        XCTAssertTrue(p.observe(0), "the rest leaving: again")
        XCTAssertFalse(p.observe(0))
    }

    func testSmallServersNeverTrim() {
        var p = HeapTrimPolicy()
        XCTAssertFalse(p.observe(499))
        XCTAssertFalse(p.observe(0), "a drop under 500 connections is not worth a trim")
        XCTAssertFalse(p.observe(500))
        XCTAssertTrue(p.observe(0))
        XCTAssertEqual(p.peak, 0)
    }
}
