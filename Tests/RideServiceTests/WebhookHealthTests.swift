import RideCore
import RideStore
@testable import RideService
import XCTest

/// `/healthz` with webhooks: a delivery owed longer than `--webhook-health-age` says
/// `degraded` in the document while the node is still served 200 (every node shares the
/// receiver, so a 503 would take them all out for the receiver's outage).
final class WebhookHealthTests: XCTestCase {
    func report(_ webhooks: (word: String, oldestPendingAge: Int64)?, tickAge: Int64 = 10) -> (ok: Bool, json: JSON) {
        let (ok, bytes) = HealthReport(version: "v", commit: "c", tickAge: tickAge, loopAges: [5], store: "ok", listener: nil, draining: false,
                                       connections: 0, subscribers: 0, rides: (0, 0, 0), connectionsPerThread: [0], ticks: 1,
                                       storeHealth: StoreHealth(clock: { 0 }), webhooks: webhooks).verdict()
        return (ok, try! JSON.parse(bytes))
    }

    func testTheSenderIsShownAndDegradesTheWordNotTheStatusCode() {
        let quiet = report(("ok", 0))
        XCTAssertTrue(quiet.ok)
        XCTAssertEqual(quiet.json["status"]?.string, "ok")
        XCTAssertEqual(quiet.json["webhooks"]?.string, "ok")
        let late = report(("degraded", 901_000))
        XCTAssertTrue(late.ok, "still served 200")
        XCTAssertEqual(late.json["status"]?.string, "degraded")
        XCTAssertEqual(late.json["webhook_oldest_pending_age_ms"]?.int, 901_000)
        // A stalled ticker is the node's own fault: 503 as before.
        XCTAssertFalse(report(("degraded", 901_000), tickAge: 60_000).ok)
        XCTAssertNil(report(nil).json["webhooks"], "no --webhook: not shown")
    }
}
