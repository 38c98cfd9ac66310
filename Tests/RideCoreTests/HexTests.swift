import XCTest
import RideCore

final class HexTests: XCTestCase {
    func testEveryNibbleLowerCaseTwoDigitsAByte() {
        XCTAssertEqual(Hex.lower([UInt8]()), "")
        XCTAssertEqual(Hex.lower([0x00, 0x01, 0x0f, 0x10, 0x7f, 0x80, 0xf0, 0xff]), "00010f107f80f0ff")
        XCTAssertEqual(Hex.lower(Array(0...255).map(UInt8.init)).count, 512)
        XCTAssertEqual(Hex.lower(Array(0...15).map { UInt8($0 * 17) }), "00112233445566778899aabbccddeeff")
    }

    func testAStringsUTF8() {
        XCTAssertEqual(Hex.lower("반납".utf8), "ebb098eb82a9")
        XCTAssertEqual(Hex.lower("r-1".utf8), "722d31")
    }
}
