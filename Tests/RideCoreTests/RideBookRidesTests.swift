import XCTest
@testable import RideCore

/// The book's rides, dense in pages behind an id → position map: every lookup finds the entry
/// it was given however removals moved the others, across page boundaries.
final class RideBookRidesTests: XCTestCase {
    private func entry(_ n: Int, seq: Int64 = 1) -> RideBook.Entry {
        RideBook.Entry(ride: Ride(id: "r-\(n)", planID: "default", owner: nil, limit: nil, startedAt: Int64(n)), seq: seq)
    }

    func testPutReplaceAndRemoveAcrossPages() {
        var rides = RideBook.Rides()
        XCTAssertTrue(rides.isEmpty)
        let n = RideBook.Rides.pageSize * 2 + 3
        for i in 0..<n { rides["r-\(i)"] = entry(i) }
        XCTAssertEqual(rides.count, n)
        XCTAssertEqual(rides["r-\(n - 1)"], entry(n - 1))
        rides["r-7"] = entry(7, seq: 9)  // in place
        XCTAssertEqual(rides.count, n)
        XCTAssertEqual(rides["r-7"]?.seq, 9)
        // Removing from the first page moves the last entry (on the third page) into its place.
        rides["r-0"] = nil
        rides["r-300"] = nil
        rides["r-\(RideBook.Rides.pageSize)"] = nil
        XCTAssertEqual(rides.count, n - 3)
        XCTAssertNil(rides["r-0"])
        XCTAssertNil(rides["r-300"])
        XCTAssertFalse(rides.contains("r-\(RideBook.Rides.pageSize)"))
        rides["r-0"] = nil  // not there: nothing changes
        XCTAssertEqual(rides.count, n - 3)
        for i in 1..<n where i != 300 && i != RideBook.Rides.pageSize {
            XCTAssertEqual(rides[("r-\(i)")], entry(i, seq: i == 7 ? 9 : 1), "r-\(i)")
        }
        // Down to none (the pages go with their last entries), then in again.
        for i in 0..<n { rides["r-\(i)"] = nil }
        XCTAssertTrue(rides.isEmpty)
        XCTAssertEqual(rides.count, 0)
        rides["r-5"] = entry(5)
        XCTAssertEqual(rides["r-5"], entry(5))
        XCTAssertEqual(rides.count, 1)
    }

    func testADictionaryLiteralAndACopyLeftAsItWas() {
        let a = entry(1), b = entry(2, seq: 4)
        var rides: RideBook.Rides = ["r-1": a, "r-2": b]
        let before = rides
        rides["r-1"] = nil
        rides["r-3"] = entry(3)
        XCTAssertEqual(before["r-1"], a)
        XCTAssertEqual(before["r-2"], b)
        XCTAssertNil(before["r-3"])
        XCTAssertEqual(before.count, 2)
        XCTAssertNil(rides["r-1"])
        XCTAssertEqual(rides["r-2"], b)
        XCTAssertEqual(rides["r-3"], entry(3))
    }
}
