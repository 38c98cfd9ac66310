import XCTest
@testable import RideService

/// A connection's subscribed ride ids come back as they went in, however many.
final class RideIDsTests: XCTestCase {
    func testNoneOneAndSeveralInOrder() {
        XCTAssertEqual(RideIDs().array, [])
        XCTAssertEqual(RideIDs([]).array, [])
        XCTAssertEqual(RideIDs(["r1"]).array, ["r1"])
        let long = String(repeating: "x", count: 64)
        let several = ["b", "a.b:c-d_e", long, "A9"]
        XCTAssertEqual(RideIDs(several).array, several)
        XCTAssertEqual(RideIDs([long]).array, [long])
    }
}
