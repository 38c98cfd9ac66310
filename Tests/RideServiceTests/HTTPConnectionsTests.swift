import XCTest
import RideCore
@testable import RideService

/// Issue 36, finding 2, as decisions without a socket: a place per connection (not per
/// request) in the shared per-address count, 429 over it, one deadline per request with a
/// body, and the proxy's address only from a loopback peer with --trust-proxy.
final class HTTPConnectionsTests: XCTestCase {
    func testAPlacePerConnectionAndA429OverTheLimit() throws {
        var counts: [String: Int] = [:]
        let take = { (p: String) -> Bool in
            guard counts[p, default: 0] < 2 else { return false }
            counts[p, default: 0] += 1
            return true
        }
        var c = HTTPConnections<Int>()
        for (h, n) in [(1, 0), (1, 1), (2, 2)] {  // two requests on connection 1: one place
            XCTAssertNil(c.begin(h, peer: "10.0.0.1", take: take, limit: 2, hasBody: false, now: Int64(n), timeoutSeconds: 3))
        }
        let refused = try XCTUnwrap(c.begin(3, peer: "10.0.0.1", take: take, limit: 2, hasBody: false, now: 3, timeoutSeconds: 3))
        XCTAssertEqual(refused.status, 429)
        XCTAssertEqual(try JSON.parse(refused.body)["error"]?["code"]?.string, "too_many_connections")
        XCTAssertEqual(c.forget(1), "10.0.0.1")
        XCTAssertNil(c.forget(1))  // given back once
        XCTAssertNil(c.forget(3))  // refused: it held none
    }

    func testOneDeadlinePerRequestWithABody() {
        var c = HTTPConnections<Int>()
        _ = c.begin(1, peer: "a", take: { _ in true }, limit: 9, hasBody: true, now: 1_000, timeoutSeconds: 3)
        _ = c.begin(2, peer: "b", take: { _ in true }, limit: 9, hasBody: false, now: 1_000, timeoutSeconds: 3)
        XCTAssertFalse(c.overdue(1, now: 3_999))
        XCTAssertTrue(c.overdue(1, now: 4_000))  // however many chunks came before
        XCTAssertFalse(c.overdue(2, now: 99_000))  // no body, no deadline
        XCTAssertEqual(c.takeOverdue(now: 4_000), [1])
        XCTAssertEqual(c.takeOverdue(now: 5_000), [])
        _ = c.begin(1, peer: "a", take: { _ in true }, limit: 9, hasBody: true, now: 10_000, timeoutSeconds: 3)
        c.bodyDone(1)
        XCTAssertEqual(c.takeOverdue(now: 20_000), [])
    }

    func testTheProxysAddressOnlyFromALoopbackPeerWithTrustProxy() {
        XCTAssertEqual(ClientAddress.of(peer: "127.0.0.1", trustProxy: true, forwarded: "203.0.113.1"), "203.0.113.1")
        XCTAssertEqual(ClientAddress.of(peer: "127.0.0.1", trustProxy: true, forwarded: "10.0.0.1, 198.51.100.7"), "198.51.100.7")
        XCTAssertEqual(ClientAddress.of(peer: "127.0.0.1", trustProxy: true, forwarded: "not-an-address"), "127.0.0.1")
        XCTAssertEqual(ClientAddress.of(peer: "127.0.0.1", trustProxy: false, forwarded: "203.0.113.1"), "127.0.0.1")
        XCTAssertEqual(ClientAddress.of(peer: "192.0.2.5", trustProxy: true, forwarded: "203.0.113.1"), "192.0.2.5")
    }
}
