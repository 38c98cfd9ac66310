import Foundation
import XCTest
@testable import RideService

/// Which peeked bytes are a request line with a NUL in its target (RequestLineNUL.swift), and
/// the answer written for one.
final class RequestLineNULTests: XCTestCase {
    func found(_ s: String) -> Bool { RequestLineNUL.found(in: Array(s.utf8)) }

    func testANulInTheTargetOfAWholeRequestLineIsFound() {
        XCTAssertTrue(found("GET /rides/a%00 HTTP/1.1\r\nHost: x\r\n\r\n"))
        XCTAssertTrue(found("GET /rides?state=%00 HTTP/1.1\r\n"))
        XCTAssertTrue(found("POST /v1/rides/a%00b/end HTTP/1.0\n"), "a bare LF ends a line too")
        XCTAssertTrue(found("GET /%00 HTTP/1.1\r\n"), "lws routes this one as /")
        XCTAssertTrue(found("HEAD /x%00%00 HTTP/1.1\r\n"))
        XCTAssertTrue(RequestLineNUL.found(in: Array("GET /a".utf8) + [0] + Array("b HTTP/1.1\r\n".utf8)), "a raw NUL")
    }

    func testEverythingElseIsLeftToLws() {
        XCTAssertFalse(found("GET /rides/a HTTP/1.1\r\nX-Note: a%00b\r\n\r\n"), "a header's %00 is not the target's")
        XCTAssertFalse(found("GET /rides/a%0 HTTP/1.1\r\n"))
        XCTAssertFalse(found("GET /rides/a%01 HTTP/1.1\r\n"), "other control bytes: the router answers them")
        XCTAssertFalse(found("GET /rides/a%00"), "a line not complete in these bytes")
        XCTAssertFalse(found("GET /rides/a%00 HTTP/1.1"), "no line end yet")
        XCTAssertFalse(found("GET /rides/a%00 HTTP/1.1\r"), "no line end yet")
        XCTAssertFalse(found("GET /a%00\r\n"), "no version")
        XCTAssertFalse(found("GET /a%00 HTTP/2.0\r\n"))
        XCTAssertFalse(found("get /a%00 HTTP/1.1\r\n"), "not a method lws knows")
        XCTAssertFalse(found("{\"rider\": \"GET /a%00 HTTP/1.1\"}\r\n"), "a body")
        XCTAssertFalse(found("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
        XCTAssertFalse(found(" /a%00 HTTP/1.1\r\n"))
        XCTAssertFalse(found("GET  HTTP/1.1\r\n"), "an empty target")
        XCTAssertFalse(RequestLineNUL.found(in: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]), "a TLS ClientHello")
        XCTAssertFalse(found(""))
    }

    func testTheAnswerIsAWhole400WithTheJSONErrorAndTheHeadersGiven() throws {
        let bytes = RequestLineNUL.answer(headers: [("x-content-type-options:", "nosniff")])
        let text = try XCTUnwrap(String(bytes: bytes, encoding: .utf8))
        let parts = text.components(separatedBy: "\r\n\r\n")
        XCTAssertEqual(parts.count, 2)
        let lines = parts[0].components(separatedBy: "\r\n")
        XCTAssertEqual(lines.first, "HTTP/1.1 400 Bad Request")
        XCTAssertTrue(lines.contains("connection: close"))
        XCTAssertTrue(lines.contains("x-content-type-options: nosniff"))
        XCTAssertTrue(lines.contains("content-length: \(parts[1].utf8.count)"))
        let error = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(parts[1].utf8)) as? [String: Any])?["error"] as? [String: String])
        XCTAssertEqual(error["code"], "bad_request")
        XCTAssertTrue(error["message"]!.contains("NUL (%00)"))
    }
}
