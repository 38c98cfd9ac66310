import XCTest
@testable import RideCore

final class Base64URLTests: XCTestCase {
    func testRFC4648Vectors() {
        // RFC 4648 §10, minus the padding.
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            XCTAssertEqual(Base64URL.encode(Array(plain.utf8)), encoded)
            XCTAssertEqual(Base64URL.decode(encoded), Array(plain.utf8))
        }
        // The url-safe alphabet: 0xfb 0xff is "+/8=" in standard base64.
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF]), "-_8")
        XCTAssertEqual(Base64URL.decode("-_8"), [0xFB, 0xFF])
    }

    func testRoundTripAllLengths() {
        var bytes = [UInt8]()
        for n in 0..<70 {
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes, "length \(n)")
            bytes.append(UInt8(truncatingIfNeeded: n &* 37 &+ 200))
        }
    }

    func testDecodeRejects() {
        for bad in ["Zg==", "Zg=", "+/8", "Zm9v Yg", "Zm9v\n", "Zm9v.", "Z", "Zm9vY", "é", "Zh", "Zm9"] {
            XCTAssertNil(Base64URL.decode(bad), bad)
        }
        // "Zh" and "Zm9" carry non-zero leftover bits: same bytes as "Zg"/"Zm8", a second spelling.
        XCTAssertEqual(Base64URL.decode("Zg"), Array("f".utf8))
    }
}
