import Foundation
import RideCore
import XCTest
@testable import RideProtocol

/// protocol/examples: every golden decodes to a typed message that re-encodes to the same
/// bytes (ServerPathTests: the server's own calls write them; OpsCodecTests: the operator
/// feed's). tests/test_golden.py holds the real server to the same files, and the pages'
/// message switch, close codes and fleet row positions to them.
final class GoldenTests: XCTestCase {
    static let examples = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/examples")

    private func files(_ side: String) throws -> [(String, [UInt8])] {
        let dir = Self.examples.appendingPathComponent(side)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { name in
            var bytes = Array(try Data(contentsOf: dir.appendingPathComponent(name)))
            if bytes.last == 0x0A { bytes.removeLast() }
            return (String(name.dropLast(5)), bytes)
        }
    }

    func testEveryServerGoldenRoundTripsByteForByte() throws {
        let goldens = try files("server")
        XCTAssertEqual(goldens.count, 13)
        var types = Set<String>()
        for (name, bytes) in goldens {
            switch ServerCodec.decode(bytes) {
            case .success(let m):
                XCTAssertEqual(String(decoding: ServerCodec.encode(m), as: UTF8.self), String(decoding: bytes, as: UTF8.self), name)
                XCTAssertEqual(name.split(separator: ".").first.map(String.init), m.type, "file named for its type")
                types.insert(m.type)
            case .failure(let e):
                XCTFail("\(name): \(e.code) \(e.message)")
            }
        }
        XCTAssertEqual(types, ["authenticated", "error", "quote", "share", "state", "tick", "unsubscribed", "warning"])
    }

    func testEveryClientGoldenRoundTripsByteForByte() throws {
        let goldens = try files("client")
        XCTAssertEqual(goldens.map(\.0), ["auth", "end", "get", "pause", "quote", "resume", "share", "start", "subscribe", "unsubscribe"])
        for (name, bytes) in goldens {
            switch ClientCodec.decode(bytes) {
            case .success(let env):
                XCTAssertEqual(String(decoding: ClientCodec.encode(env), as: UTF8.self), String(decoding: bytes, as: UTF8.self), name)
            case .failure(let e):
                XCTFail("\(name): \(e.code) \(e.message)")
            }
        }
    }

    func testTheGoldenStateDecodesToTheseExactValues() throws {
        let bytes = try files("server").first { $0.0 == "state.ended" }!.1
        guard case .success(.state(let s, let id)) = ServerCodec.decode(bytes) else { return XCTFail() }
        XCTAssertEqual(id, "q6")
        XCTAssertEqual(s.ride, "r-43")
        XCTAssertEqual(s.state, .ended)
        XCTAssertEqual(s.elapsed, 192)
        XCTAssertEqual(s.fare, 1040)
        XCTAssertEqual(s.endedAt, 1_764_430_192_750)
        XCTAssertNil(s.limit)
        XCTAssertEqual(s.plan.perMinute, [FareSegment(start: 0, rate: 180, interval: 1)])
        XCTAssertEqual(s.receipt?.distance, 1200)
        XCTAssertEqual(s.receipt?.reason, .rider)
        XCTAssertEqual(s.plan.billing, .completed)
        XCTAssertEqual(s.receipt?.lines, [FareLine(label: .unlock, amount: 500), FareLine(label: .riding, minutes: 3, amount: 540)])
    }

    func testCloseCodesMatchTheGoldenList() throws {
        let data = try Data(contentsOf: Self.examples.appendingPathComponent("close-codes.json"))
        let json = try JSON.parse(Array(data))
        let codes = json.object!.keys.compactMap { UInt16($0) }.sorted()
        XCTAssertEqual(codes, CloseCode.sent)
    }

    func testEveryErrorCodeRoundTrips() {
        let all: [ErrorCode] = [.badRequest, .unknownType, .rideNotFound, .invalidTransition, .conflict, .tooLarge, .unavailable,
                                .unauthorized, .forbidden, .rateLimited, .planNotFound, .tooManySubscriptions]
        for code in all {
            let e = ProtocolError(code, "why", id: nil)
            XCTAssertEqual(ServerCodec.decode(ServerMessages.error(e)), .success(.error(e)))
        }
    }

    func testServerDecodeNamesWhatIsWrong() {
        func why(_ s: String) -> String? {
            if case .failure(let e) = ServerCodec.decode(Array(s.utf8)) { return e.message }
            return nil
        }
        XCTAssertEqual(why(#"{"type":"tick","ride":"r","state":"riding"}"#), "missing \"elapsed\"")
        XCTAssertEqual(why(#"{"type":"warning","ride":"r","remaining":"60"}"#), "\"remaining\" must be a whole number")
        XCTAssertEqual(why(#"{"type":"tick","ride":"r","state":"flying","elapsed":1}"#), "unknown ride state \"flying\"")
        XCTAssertEqual(why(#"{"type":"error","code":"nope","message":"x"}"#), "unknown error code \"nope\"")
        XCTAssertEqual(why(#"{"type":"hello"}"#), "unknown server message type \"hello\"")
        XCTAssertEqual(why(#"[1]"#), "server message must be a JSON object")
        XCTAssertEqual(why(String(repeating: " ", count: ServerCodec.maxFrame + 1)), "server message over 65536 bytes")
    }

    func testClientEncodeDecodesBackToTheSameEnvelope() {
        let all: [ClientEnvelope] = [
            ClientEnvelope(id: "a", .start(ride: nil, plan: nil, limit: nil)),
            ClientEnvelope(id: nil, .start(ride: "r-1", plan: "night", limit: 60)),
            ClientEnvelope(id: "b", .control(.end, ride: "r-1", metres: nil)),
            ClientEnvelope(id: "c", .control(.end, ride: "r-1", metres: 0)),
            ClientEnvelope(id: "d", .quote(plan: nil, seconds: 0, paused: 0)),
            ClientEnvelope(id: "e", .auth(token: "t\"\\x")),
        ]
        for e in all { XCTAssertEqual(ClientCodec.decode(ClientCodec.encode(e)), .success(e)) }
    }
}
