import Foundation
import RideCore
import XCTest
@testable import RideWebhooks

/// https endpoints: a Python receiver with certificates made here by `openssl req`.
final class HTTPSPostTests: XCTestCase {
    var directory = ""
    var receivers: [PythonReceiver] = []

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "ridepush-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try makeCertificate("local", names: "IP:127.0.0.1,DNS:localhost")
        try makeCertificate("other", names: "DNS:billing.example")
    }

    override func tearDown() {
        for r in receivers { r.stop() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A self-signed P-256 certificate valid for `names` (it is its own CA).
    func makeCertificate(_ name: String, names: String) throws {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                             "-subj", "/CN=ridepush-test", "-addext", "subjectAltName=\(names)", "-days", "1",
                             "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem"]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        XCTAssertEqual(openssl.terminationStatus, 0, "openssl req failed")
    }

    func receiver(_ certificate: String) throws -> PythonReceiver {
        let r = try PythonReceiver(secret: String(decoding: secret, as: UTF8.self),
                                   certificate: "\(directory)/\(certificate).pem", key: "\(directory)/\(certificate).key")
        receivers.append(r)
        return r
    }

    func post(_ url: String, tls: TLSClient?, timeout: Int64 = HTTPPost.defaultTimeout) throws -> DeliveryResult {
        let body = WebhookEvent(type: .started, rideID: "r-1", created: 1_700_000_000_000, ride: rideJSON).body()
        let signature = WebhookSignature.header(secret: secret, timestamp: Int64(Date().timeIntervalSince1970), body: body)
        return HTTPPost.send(to: try WebhookURL(url), headers: [(WebhookSignature.headerName, signature)], body: body,
                             timeout: timeout, tls: tls)
    }

    func testTrustedCertificateDelivers() throws {
        let r = try receiver("local")
        let tls = try TLSClient(caFile: "\(directory)/local.pem")
        XCTAssertEqual(try post("https://127.0.0.1:\(r.port)/ok", tls: tls), .status(200))
        XCTAssertEqual(try post("https://localhost:\(r.port)/status/202", tls: tls), .status(202))
        let seen = r.requests(atLeast: 2)
        XCTAssertEqual(seen.compactMap { $0["verified"] as? Bool }, [true, true])
        XCTAssertEqual(seen.last?["host"] as? String, "localhost:\(r.port)")
    }

    func testUntrustedOrMisnamedCertificateIsRefusedBeforeSending() throws {
        let local = try receiver("local")
        // The system store does not know a self-signed test certificate.
        let untrusted = try post("https://127.0.0.1:\(local.port)/ok", tls: nil)
        guard case .failed(let why) = untrusted else { return XCTFail("\(untrusted)") }
        XCTAssertTrue(why.hasPrefix("TLS: certificate not trusted: self-signed certificate"), why)
        // Trusted, but issued for another name.
        let other = try receiver("other")
        let misnamed = try post("https://127.0.0.1:\(other.port)/ok", tls: TLSClient(caFile: "\(directory)/other.pem"))
        XCTAssertEqual(misnamed, .failed("TLS: certificate not trusted: IP address mismatch"))
        // Neither receiver got a request: the handshake failed, so no request was ever sent.
        XCTAssertEqual(local.requests(atLeast: 0).count, 0)
        XCTAssertEqual(other.requests(atLeast: 0).count, 0)
    }

    func testPlainHTTPReceiverAndSilentPeer() throws {
        let plain = try PythonReceiver(secret: "x")
        receivers.append(plain)
        let result = try post("https://127.0.0.1:\(plain.port)/ok", tls: TLSClient(caFile: "\(directory)/local.pem"))
        guard case .failed(let why) = result else { return XCTFail("\(result)") }
        XCTAssertTrue(why.hasPrefix("TLS: "), why)
        // A listener that never answers the ClientHello: the deadline covers the handshake.
        let (fd, port) = boundLoopbackSocket()
        defer { close(fd) }
        XCTAssertEqual(listen(fd, 4), 0)
        let started = Date()
        XCTAssertEqual(try post("https://127.0.0.1:\(port)/", tls: nil, timeout: 300), .timeout)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2.0)
    }

    func testCAFileErrors() {
        XCTAssertThrowsError(try TLSClient(caFile: "/nonexistent/ca.pem")) { error in
            XCTAssertEqual((error as? TLSClient.SetupError)?.message, "TLS: cannot read CA certificates from /nonexistent/ca.pem")
        }
    }
}
