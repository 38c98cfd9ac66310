import Foundation
import RideCore
import RideProtocol
import XCTest
@testable import RidePushClient

/// The public position API end to end through the driver, against the in-memory FakeServer.
final class PositionDriverTests: XCTestCase {
    func client(_ server: FakeServer) -> RidePushClient {
        RidePushClient(url: URL(string: "ws://127.0.0.1:1/ws")!, transport: server, clock: SystemClock(),
                       random: SystemRandomNumberGenerator(), timing: ClientCore.Timing()) { nil }
    }

    func testStartAtAPlaceThenAReportGoOutInOrder() async throws {
        let server = FakeServer()
        let c = client(server)
        _ = try await c.start(ride: "r-42", plan: "default", at: Position(lat: 48.8616, lon: 2.2892, at: 0, accuracy: 3),
                              vehicleType: "escooter_paris")
        try c.report(position: Position(lat: 37.5665, lon: 126.978, at: 1_764_430_061_000, accuracy: 8), ride: "r-42")
        _ = try await c.start(ride: "r-43")  // answered after the position: it went out before
        let frames = server.frames
        XCTAssertEqual(frames.count, 3)
        XCTAssertTrue(frames[0].hasPrefix(#"{"type":"start","id":"rp-"#), frames[0])
        XCTAssertTrue(frames[0].hasSuffix(#","ride":"r-42","plan":"default","lat":48.8616,"lon":2.2892,"vehicle_type":"escooter_paris"}"#), frames[0])
        XCTAssertEqual(frames[1], #"{"type":"position","ride":"r-42","lat":37.5665,"lon":126.978,"at":1764430061000,"accuracy":8}"#)
        c.close()
    }

    func testAnInvalidFixThrowsAtOnceAndSendsNothing() async throws {
        let server = FakeServer()
        let c = client(server)
        XCTAssertThrowsError(try c.report(position: Position(lat: 37.5, lon: 127, at: 0, accuracy: -1), ride: "r-42")) { e in
            XCTAssertEqual(e as? RidePushError, .invalidPosition("\"accuracy\" must be a number of metres from 0 to 100000"))
        }
        XCTAssertThrowsError(try c.report(position: Position(lat: 37.5, lon: 127, at: 0, accuracy: 5), ride: "r 42")) { e in
            guard case .invalidPosition(let why)? = e as? RidePushError else { return XCTFail("\(e)") }
            XCTAssertTrue(why.hasPrefix("\"ride\" must be"), why)
        }
        _ = try await c.start(ride: "r-1")
        XCTAssertFalse(server.frames.contains { $0.contains("position") }, server.frames.joined(separator: "\n"))
        c.close()
    }

    func testARefusalWithoutAnIdArrivesOnUnansweredErrors() async throws {
        let server = FakeServer()
        let c = client(server)
        let errors = c.unansweredErrors
        _ = try await c.start(ride: "r-42")
        try c.report(position: Position(lat: 37.5665, lon: 126.978, at: 1_764_430_061_000, accuracy: 8), ride: "r-42")
        server.push(#"{"type":"error","code":"unknown_type","message":"unknown message type \"position\""}"#)
        var it = errors.makeAsyncIterator()
        let e = await it.next()
        XCTAssertEqual(e, ProtocolError(.unknownType, #"unknown message type "position""#))
        c.close()
    }
}
