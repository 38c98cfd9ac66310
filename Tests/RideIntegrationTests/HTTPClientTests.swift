import Foundation
import Glibc
import XCTest
@testable import RideHTTPClient

/// The client against a real HTTP/1.1 server on a free port.
final class HTTPClientTests: XCTestCase {
    var server: PythonServer!
    var client: HTTPClient!

    override func setUpWithError() throws {
        server = try PythonServer()
        client = HTTPClient()
    }

    override func tearDown() {
        client?.shutdown()
        server?.stop()
    }

    var base: String { "http://127.0.0.1:\(server.port)" }

    func testGetReturnsStatusHeadersAndBody() throws {
        let response = try client.send(HTTPRequest(url: "\(base)/hello")).get()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), "GET /hello ")
        XCTAssertEqual(response.header("x-test"), "yes")
        XCTAssertEqual(response.httpVersion, "1.1")
        XCTAssertFalse(response.bodyTruncated)
    }

    func testBodiesAndMethods() throws {
        let post = try client.send(HTTPRequest(method: "POST", url: "\(base)/p", headers: [("Content-Type", "text/plain")],
                                               body: Array("payload".utf8))).get()
        XCTAssertEqual([post.status], [201])
        XCTAssertEqual(String(decoding: post.body, as: UTF8.self), "POST /p payload")
        let put = try client.send(HTTPRequest(method: "PUT", url: "\(base)/q", body: Array("x".utf8))).get()
        XCTAssertEqual(String(decoding: put.body, as: UTF8.self), "PUT /q x")
        // Above libcurl's Expect: 100-continue size, which this server never answers.
        let large = [UInt8](repeating: UInt8(ascii: "a"), count: 200_000)
        let big = try client.send(HTTPRequest(method: "POST", url: "\(base)/l", body: large, timeout: 5_000)).get()
        XCTAssertEqual(big.body.count, "POST /l ".utf8.count + large.count)
    }

    func testBodyLimitKeepsThePrefix() throws {
        let response = try client.send(HTTPRequest(url: "\(base)/big", bodyLimit: 10)).get()
        XCTAssertEqual(response.body, Array("xxxxxxxxxx".utf8))
        XCTAssertTrue(response.bodyTruncated)
    }

    /// Keep-alive: the multi handle keeps the connection, so only the first request opens one.
    func testSequentialRequestsReuseTheConnection() throws {
        let opened = try (0..<3).map { _ in try client.send(HTTPRequest(url: "\(base)/again")).get().newConnections }
        XCTAssertEqual(opened, [1, 0, 0])
    }

    func testManyConcurrentSubmissionsAllComplete() {
        let done = expectation(description: "all answered")
        done.expectedFulfillmentCount = 20
        let statuses = LockedList()
        let client = client!, base = base
        DispatchQueue.concurrentPerform(iterations: 20) { i in
            client.submit(HTTPRequest(url: "\(base)/c/\(i)")) { result in
                statuses.append((try? result.get().status) ?? -1)
                done.fulfill()
            }
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(statuses.values, Array(repeating: 200, count: 20))
    }

    /// A server that reads the request and never answers costs the timeout, not more.
    func testTimeout() {
        let started = Date()
        let result = client.send(HTTPRequest(url: "\(base)/hang", timeout: 300))
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(result.failureKind, .timeout)
        XCTAssertGreaterThanOrEqual(elapsed, 0.29)
        XCTAssertLessThan(elapsed, 2.0)
    }

    func testConnectionRefused() {
        guard case .failure(let error) = client.send(HTTPRequest(url: "http://127.0.0.1:\(closedPort())/")) else {
            return XCTFail("answered")
        }
        XCTAssertEqual(error.kind, .connect)
        XCTAssertEqual(error.osErrno, ECONNREFUSED)
        XCTAssertFalse(error.message.isEmpty)
    }

    func testHeadersThatWouldSplitTheRequestAreRefused() {
        for bad in [("X-A", "1\r\nX-B: 2"), ("X A", "1"), ("X:A", "1")] {
            XCTAssertEqual(client.send(HTTPRequest(url: "\(base)/", headers: [bad])).failureKind, .invalidRequest, "\(bad)")
        }
    }

    func testOtherSchemesAreNotFetched() {
        XCTAssertEqual(client.send(HTTPRequest(url: "file:///etc/hostname")).failureKind, .other)
    }

    /// Shutting down completes what is in flight and refuses what comes after.
    func testShutdownCancels() {
        let cancelled = expectation(description: "cancelled")
        client.submit(HTTPRequest(url: "\(base)/hang", timeout: 30_000)) { result in
            XCTAssertEqual(result.failureKind, .cancelled)
            cancelled.fulfill()
        }
        client.shutdown()
        wait(for: [cancelled], timeout: 5)
        XCTAssertEqual(client.send(HTTPRequest(url: "\(base)/")).failureKind, .cancelled)
    }

    /// `http_proxy` (and every other proxy variable) is read as every libcurl program reads it:
    /// the request goes to the proxy with the absolute URL, unless `no_proxy` names the host.
    func testProxyFromTheEnvironment() throws {
        setenv("http_proxy", base, 1)
        defer { unsetenv("http_proxy"); unsetenv("no_proxy") }
        let proxied = try client.send(HTTPRequest(url: "http://ridepush-upstream.invalid/via")).get()
        XCTAssertEqual(String(decoding: proxied.body, as: UTF8.self), "GET http://ridepush-upstream.invalid/via ")
        setenv("no_proxy", "ridepush-upstream.invalid", 1)
        XCTAssertEqual(client.send(HTTPRequest(url: "http://ridepush-upstream.invalid/via")).failureKind, .resolve)
    }
}

/// https with a CA made here by `openssl`.
final class HTTPSClientTests: XCTestCase {
    var pki: TestPKI!
    var server: PythonServer!

    override func setUpWithError() throws {
        pki = try TestPKI()
        server = try PythonServer(certificate: pki.certificate, key: pki.key)
    }

    override func tearDown() {
        server?.stop()
        pki?.remove()
    }

    func testPrivateCATrusted() throws {
        let client = try HTTPClient(caFile: pki.ca)
        for host in ["127.0.0.1", "localhost"] {
            let response = try client.send(HTTPRequest(url: "https://\(host):\(server.port)/secure")).get()
            XCTAssertEqual(response.status, 200)
            // Python's ssl offers no h2 in ALPN: HTTP/1.1 over TLS.
            XCTAssertEqual(response.httpVersion, "1.1")
        }
    }

    func testUnknownCAIsRefusedWithCurlsMessage() {
        guard case .failure(let error) = HTTPClient().send(HTTPRequest(url: "https://127.0.0.1:\(server.port)/")) else {
            return XCTFail("answered")
        }
        XCTAssertEqual(error.kind, .peerNotVerified)
        XCTAssertEqual(error.verifyResult, 20)  // X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        XCTAssertTrue(error.message.contains("certificate"), error.message)
    }

    func testNameMismatchHasNoChainError() throws {
        let other = try TestPKI(names: "DNS:billing.example")
        defer { other.remove() }
        let misnamed = try PythonServer(certificate: other.certificate, key: other.key)
        defer { misnamed.stop() }
        guard case .failure(let error) = try HTTPClient(caFile: other.ca).send(HTTPRequest(url: "https://127.0.0.1:\(misnamed.port)/")) else {
            return XCTFail("answered")
        }
        XCTAssertEqual([error.kind], [.peerNotVerified])
        XCTAssertEqual(error.verifyResult, 0)
        XCTAssertTrue(error.message.contains("127.0.0.1"), error.message)
    }

    func testPlainHTTPPeerIsATLSFailure() throws {
        let plain = try PythonServer()
        defer { plain.stop() }
        XCTAssertEqual(try HTTPClient(caFile: pki.ca).send(HTTPRequest(url: "https://127.0.0.1:\(plain.port)/")).failureKind, .tls)
    }

    func testUnreadableCAFile() {
        XCTAssertThrowsError(try HTTPClient(caFile: "\(pki.directory)/missing.pem")) { error in
            XCTAssertEqual((error as? HTTPClient.SetupError)?.message, "TLS: cannot read CA certificates from \(pki.directory)/missing.pem")
        }
        XCTAssertThrowsError(try HTTPClient(caFile: pki.key))
    }
}

/// HTTP/2: nghttpd (Debian's nghttp2-server) with the test CA's certificate.
final class HTTP2ClientTests: XCTestCase {
    func testRequestsShareOneConnection() throws {
        let nghttpd = "/usr/sbin/nghttpd"
        guard FileManager.default.isExecutableFile(atPath: nghttpd) else { throw XCTSkip("nghttpd not installed (apt nghttp2-server)") }
        let pki = try TestPKI()
        defer { pki.remove() }
        try "h2".write(toFile: "\(pki.directory)/index.html", atomically: true, encoding: .utf8)
        let port = closedPort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: nghttpd)
        server.arguments = ["--address=127.0.0.1", "--htdocs=\(pki.directory)", "\(port)", pki.key, pki.certificate]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        XCTAssertTrue(waitForListener(port: port, seconds: 10), "nghttpd did not listen")

        let client = try HTTPClient(caFile: pki.ca)
        let done = expectation(description: "answered")
        done.expectedFulfillmentCount = 6
        let answers = LockedList()
        let versions = LockedStrings()
        for _ in 0..<6 {
            client.submit(HTTPRequest(url: "https://127.0.0.1:\(port)/index.html")) { result in
                if case .success(let r) = result {
                    answers.append(r.newConnections)
                    versions.append("\(r.status) HTTP/\(r.httpVersion) \(String(decoding: r.body, as: UTF8.self))")
                }
                done.fulfill()
            }
        }
        wait(for: [done], timeout: 10)
        XCTAssertEqual(versions.values, Array(repeating: "200 HTTP/2 h2", count: 6))
        // Submitted together: one connection opened, the other five are streams on it.
        XCTAssertEqual(answers.values.reduce(0, +), 1)
    }
}

final class LockedList: @unchecked Sendable {  // `list` only under `lock`
    private let lock = NSLock()
    private var list: [Int] = []
    func append(_ v: Int) { lock.lock(); list.append(v); lock.unlock() }
    var values: [Int] { lock.lock(); defer { lock.unlock() }; return list.sorted() }
}

final class LockedStrings: @unchecked Sendable {  // `list` only under `lock`
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ v: String) { lock.lock(); list.append(v); lock.unlock() }
    var values: [String] { lock.lock(); defer { lock.unlock() }; return list }
}

extension Result where Failure == HTTPClientError {
    var failureKind: HTTPClientError.Kind? {
        if case .failure(let error) = self { return error.kind }
        return nil
    }
}
