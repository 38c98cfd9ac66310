import XCTest
import RideCore
@testable import RideWebhooks

let secret = Array("whsec_0123456789abcdef".utf8)
let rideJSON = Array(#"{"id":"r-1"}"#.utf8)

final class WebhookEventTests: XCTestCase {
    func testBodyIsTheDocumentedShape() throws {
        let event = WebhookEvent(id: "evt_1", type: .started, rideID: "r-1", created: 1_700_000_000_123, ride: rideJSON)
        XCTAssertEqual(String(decoding: event.body(), as: UTF8.self),
                       #"{"id":"evt_1","type":"ride.started","created":1700000000123,"ride":{"id":"r-1"}}"#)
        let parsed = try JSON.parse(event.body())
        XCTAssertEqual(parsed["ride"]?["id"]?.string, "r-1")
        XCTAssertEqual(WebhookEventType.allCases.map(\.rawValue), ["ride.started", "ride.paused", "ride.resumed", "ride.ended"])
    }

    func testIDsAreRandomAndShaped() {
        let ids = (0..<200).map { _ in WebhookEvent.newID() }
        XCTAssertEqual(Set(ids).count, 200)
        for id in ids {
            XCTAssertTrue(id.hasPrefix("evt_") && id.count == 28, id)
            XCTAssertTrue(id.dropFirst(4).allSatisfy { "0123456789abcdef".contains($0) }, id)
        }
    }
}

final class WebhookSignatureTests: XCTestCase {
    let body = Array(#"{"id":"evt_1","type":"ride.started","created":1700000000123,"ride":{"id":"r-1"}}"#.utf8)

    /// Pinned from python3: hmac.new(secret, b"1700000000." + body, hashlib.sha256).hexdigest().
    func testPinnedAgainstPythonHMAC() {
        XCTAssertEqual(WebhookSignature.header(secret: secret, timestamp: 1_700_000_000, body: body),
                       "t=1700000000,v1=e6fbec2dbdc44d186f3db3f41beb06bf612a1f74efb2e67f1c11037e2756a7f4")
    }

    func verify(_ header: String, body: [UInt8]? = nil, secret: [UInt8] = secret, now: Int64 = 1_700_000_100) -> WebhookSignature.Failure? {
        do {
            try WebhookSignature.verify(header: header, body: body ?? self.body, secret: secret, now: now)
            return nil
        } catch {
            return error
        }
    }

    func testVerifierAcceptsItsOwnAndRefusesTheRest() {
        let good = WebhookSignature.header(secret: secret, timestamp: 1_700_000_000, body: body)
        XCTAssertNil(verify(good))
        XCTAssertNil(verify(good.uppercased().replacingOccurrences(of: "T=", with: "t=").replacingOccurrences(of: "V1=", with: "v1=")))
        XCTAssertEqual(verify(good, secret: Array("whsec_other".utf8)), .noMatchingSignature)
        XCTAssertEqual(verify(good, body: body + [0x20]), .noMatchingSignature)
        // Re-signed time without re-signing the MAC: the timestamp is part of what is signed.
        XCTAssertEqual(verify(good.replacingOccurrences(of: "t=1700000000", with: "t=1700000090")), .noMatchingSignature)
        // Age: five minutes either way.
        XCTAssertNil(verify(good, now: 1_700_000_300))
        XCTAssertEqual(verify(good, now: 1_700_000_301), .outsideTolerance)
        XCTAssertEqual(verify(good, now: 1_699_999_699), .outsideTolerance)
        // A clock or a header at the ends of 64 bits is refused, not an overflow trap.
        XCTAssertEqual(verify(good, now: .max), .outsideTolerance)
        XCTAssertEqual(verify(good, now: .min), .outsideTolerance)
        // Several v1 (a rotation) and unknown schemes: any matching v1 will do.
        let v1 = String(good.split(separator: "=").last!)
        XCTAssertNil(verify("t=1700000000,v0=abc,v1=\(String(repeating: "0", count: 64)),v1=\(v1)"))
        for malformed in ["", "t=1700000000", "v1=\(v1)", "t=abc,v1=\(v1)", "t=1700000000,v1=xyz", "t=1,t=2,v1=\(v1)", "t=1700000000,v1=abc"] {
            XCTAssertEqual(verify(malformed), .malformedHeader, malformed)
        }
        XCTAssertEqual(verify("t=\(Int64.max),v1=\(v1)"), .noMatchingSignature)
    }
}

final class RetryScheduleTests: XCTestCase {
    func testDoublingToTheCap() {
        let s = RetrySchedule()
        XCTAssertEqual((1...12).map { s.delay(afterAttempt: $0) / 1000 }, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300])
        XCTAssertEqual(s.delay(afterAttempt: 10_000), 300_000)
        XCTAssertEqual(s.delay(afterAttempt: Int.max), 300_000)
    }

    func testDeadAfterADay() {
        let s = RetrySchedule()
        let created: UnixMillis = 1_700_000_000_000
        XCTAssertEqual(s.next(created: created, attempt: 1, failedAt: created), .retry(at: created + 1_000))
        XCTAssertEqual(s.next(created: created, attempt: 3, failedAt: created + 5_000), .retry(at: created + 9_000))
        let day: Int64 = 86_400_000
        XCTAssertEqual(s.next(created: created, attempt: 40, failedAt: created + day - 300_000), .retry(at: created + day))
        XCTAssertEqual(s.next(created: created, attempt: 40, failedAt: created + day - 299_999), .dead)
        // Failing instantly every time: 9 doublings (511 s), then every 5 min to the day's end.
        var attempts = 0, now = created
        while case .retry(let at) = s.next(created: created, attempt: attempts + 1, failedAt: now) {
            attempts += 1
            now = at
        }
        XCTAssertEqual(attempts + 1, 1 + 9 + (86_400 - 511) / 300)
    }
}
