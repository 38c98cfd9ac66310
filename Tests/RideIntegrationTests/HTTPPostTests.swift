import Foundation
import RideCore
import XCTest
@testable import RideWebhooks

final class WebhookURLTests: XCTestCase {
    func testParses() throws {
        let a = try WebhookURL("http://127.0.0.1:8081/hooks/ridepush?x=1#frag")
        XCTAssertEqual([a.host, "\(a.port)", a.target, a.hostHeader], ["127.0.0.1", "8081", "/hooks/ridepush?x=1", "127.0.0.1:8081"])
        let b = try WebhookURL("HTTP://billing.internal")
        XCTAssertEqual([b.host, "\(b.port)", b.target, b.hostHeader], ["billing.internal", "80", "/", "billing.internal"])
        let c = try WebhookURL("http://[::1]:9000?q")
        XCTAssertEqual([c.host, "\(c.port)", c.target, c.hostHeader], ["::1", "9000", "/?q", "[::1]:9000"])
        let d = try WebhookURL("https://billing.example/hooks")
        XCTAssertEqual([d.host, "\(d.port)", d.target, d.hostHeader, d.description],
                       ["billing.example", "443", "/hooks", "billing.example", "https://billing.example/hooks"])
        XCTAssertTrue(d.secure)
        XCTAssertFalse(a.secure)
        XCTAssertEqual(try WebhookURL("https://billing.example:8443").hostHeader, "billing.example:8443")
    }

    func testRefusals() {
        for (bad, why) in [("ftp://x/", "must start with http:// or https://"),
                           ("http:///p", "no host"), ("http://x:0/", "port must be"), ("http://x:99999/", "port must be"),
                           ("http://u:p@x/", "credentials"), ("http://x/a b", "spaces"), ("http://[::1/", "unclosed")] {
            XCTAssertThrowsError(try WebhookURL(bad), bad) { error in
                XCTAssertTrue((error as! WebhookURL.ParseError).message.contains(why), "\(bad): \(error)")
            }
        }
    }
}

/// The client against a real receiver on a real socket.
final class HTTPPostReceiverTests: XCTestCase {
    var receiver: PythonReceiver!

    override func setUpWithError() throws {
        receiver = try PythonReceiver(secret: String(decoding: secret, as: UTF8.self))
    }

    override func tearDown() {
        receiver?.stop()
    }

    func post(_ path: String, body: [UInt8], timeout: Int64 = HTTPPost.defaultTimeout, event: String = "evt_test") throws -> DeliveryResult {
        let url = try WebhookURL("http://127.0.0.1:\(receiver.port)\(path)")
        let signature = WebhookSignature.header(secret: secret, timestamp: Int64(Date().timeIntervalSince1970), body: body)
        return HTTPPost.send(to: url, headers: [(WebhookSignature.eventIDHeaderName, event), (WebhookSignature.headerName, signature)],
                             body: body, timeout: timeout)
    }

    func testDeliveredAndVerifiedByPythonHMAC() throws {
        let event = WebhookEvent(type: .ended, rideID: "r-7", created: 1_700_000_000_000, ride: Array(#"{"id":"r-7","fare":{"total":"3.10"},"name":"Zoë"}"#.utf8))
        XCTAssertEqual(try post("/ok", body: event.body(), event: event.id), .status(200))
        let seen = receiver.requests(atLeast: 1)
        XCTAssertEqual(seen.count, 1)
        XCTAssertEqual(seen.first?["verified"] as? Bool, true)
        XCTAssertEqual(seen.first?["event"] as? String, event.id)
        XCTAssertEqual(seen.first?["type"] as? String, "application/json")
        XCTAssertEqual(seen.first?["host"] as? String, "127.0.0.1:\(receiver.port)")
        XCTAssertEqual(seen.first?["body"] as? String, String(decoding: event.body(), as: UTF8.self))
    }

    func testWrongSecretIsRefusedByTheReceiver() throws {
        let url = try WebhookURL("http://127.0.0.1:\(receiver.port)/ok")
        let body = Array(#"{"id":"evt_x"}"#.utf8)
        let forged = WebhookSignature.header(secret: Array("whsec_wrong".utf8), timestamp: 1_700_000_000, body: body)
        XCTAssertEqual(HTTPPost.send(to: url, headers: [(WebhookSignature.headerName, forged)], body: body), .status(400))
        XCTAssertEqual(receiver.requests(atLeast: 1).first?["verified"] as? Bool, false)
    }

    func testNon2xxStatusesComeBack() throws {
        XCTAssertEqual(try post("/status/503", body: Array("{}".utf8)), .status(503))
        XCTAssertEqual(try post("/status/302", body: Array("{}".utf8)), .status(302))
        XCTAssertFalse(DeliveryResult.status(302).delivered)
        XCTAssertTrue(DeliveryResult.status(204).delivered)
    }

    /// A receiver that reads the request and never answers costs the deadline, not more.
    func testHangingReceiverTimesOut() throws {
        let started = Date()
        XCTAssertEqual(try post("/hang", body: Array("{}".utf8), timeout: 400), .timeout)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(elapsed, 0.39)
        XCTAssertLessThan(elapsed, 2.0)
    }

    func testConnectionRefused() throws {
        let port = closedPort()
        let result = HTTPPost.send(to: try WebhookURL("http://127.0.0.1:\(port)/"), headers: [], body: [])
        XCTAssertEqual(result, .failed("connect: Connection refused"))
        XCTAssertEqual(result.metricLabel, "connect_error")
    }
}
