@testable import RideService
import XCTest
@testable import RidePushServer

/// The frames `Shard.writeOutbox` puts together itself (RFC 6455 5.2, server to client: FIN,
/// text, no mask), each length form at its boundaries.
final class ReplyWritesTests: XCTestCase {
    private func framed(_ payload: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0xEE, count: payload.count + 12)
        let n = out.withUnsafeMutableBufferPointer { o in
            payload.withUnsafeBufferPointer { p in Shard.frame(p.baseAddress ?? UnsafePointer(o.baseAddress!), payload.count, into: o.baseAddress!) }
        }
        XCTAssertEqual(n, Shard.frameHeaderLength(payload.count) + payload.count)
        XCTAssertEqual(out[n], 0xEE, "nothing written past the frame")
        return Array(out[..<n])
    }

    func testHeaderLengths() {
        XCTAssertEqual(Shard.frameHeaderLength(0), 2)
        XCTAssertEqual(Shard.frameHeaderLength(125), 2)
        XCTAssertEqual(Shard.frameHeaderLength(126), 4)
        XCTAssertEqual(Shard.frameHeaderLength(65_535), 4)
        XCTAssertEqual(Shard.frameHeaderLength(65_536), 10)
    }

    func testShortFrame() {
        XCTAssertEqual(framed(Array(#"{"a":1}"#.utf8)), [0x81, 7] + Array(#"{"a":1}"#.utf8))
        XCTAssertEqual(framed([]), [0x81, 0])
        let p125 = [UInt8](repeating: 0x61, count: 125)
        XCTAssertEqual(framed(p125), [0x81, 125] + p125)
    }

    func testSixteenBitLength() {
        let p126 = [UInt8](repeating: 0x62, count: 126)
        XCTAssertEqual(framed(p126), [0x81, 126, 0x00, 0x7E] + p126)
        let p300 = (0..<300).map { UInt8($0 & 0x7F) }
        XCTAssertEqual(framed(p300), [0x81, 126, 0x01, 0x2C] + p300)
        let pMax = [UInt8](repeating: 0x63, count: 65_535)
        let f = framed(pMax)
        XCTAssertEqual(Array(f[..<4]), [0x81, 126, 0xFF, 0xFF])
        XCTAssertEqual(f.count, 65_539)
    }

    func testSixtyFourBitLength() {
        let p = (0..<70_000).map { UInt8($0 % 251) }
        let f = framed(p)
        XCTAssertEqual(Array(f[..<10]), [0x81, 127, 0, 0, 0, 0, 0x00, 0x01, 0x11, 0x70])
        XCTAssertEqual(Array(f[10...]), p)
    }
}
