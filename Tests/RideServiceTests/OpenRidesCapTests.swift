@testable import RideService
import XCTest
import RideServiceTesting
import RideStoreTesting
import RideAuth
@testable import RideCore
import RideProtocol

/// Issue 25 finding 6: --max-open-rides-per-rider, decided by the store worker with the
/// starts of the same group counted, operators exempt; through the worker's turn by hand.
final class OpenRidesCapTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    func start(_ rid: String, owner: String) -> RideBook.Request { .start(ride: rid, plan: nil, limit: nil, owner: owner) }

    func code(_ h: EmbeddedService, _ frame: [UInt8]?) -> String? {
        guard let frame else { return nil }
        let j = h.json(frame)
        return j["type"]?.string == "error" ? j["code"]?.string : j["state"]?.string
    }

    func testARiderAtTheCapIsRefusedUntilOneOfItsRidesEnds() {
        let h = EmbeddedService(ManualClock(t0), maxOpenRides: 2)
        XCTAssertEqual(code(h, h.request(start("a1", owner: "alice"), id: "1").reply), "riding")
        XCTAssertEqual(code(h, h.request(start("a2", owner: "alice"), id: "2").reply), "riding")
        let refused = h.request(start("a3", owner: "alice"), id: "3").reply
        XCTAssertEqual(code(h, refused), "too_many_rides")
        XCTAssertEqual(h.json(refused!)["message"]?.string, "at most 2 open rides per rider; end one first")
        XCTAssertNil(h.registry.find("a3"))
        XCTAssertEqual(code(h, h.request(start("b1", owner: "bob"), id: "4").reply), "riding", "a cap per rider")
        XCTAssertEqual(code(h, h.request(.command(.end, ride: "a1", metres: nil), id: "5").reply), "ended")
        XCTAssertEqual(code(h, h.request(start("a3", owner: "alice"), id: "6").reply), "riding")
        // A retry of an applied start is its reply again, not a refusal.
        XCTAssertEqual(code(h, h.request(start("a2", owner: "alice"), id: "2").reply), "riding")
    }

    func testStartsDecidedInOneGroupCountBeforeTheyArePublished() {
        let h = EmbeddedService(ManualClock(t0), maxOpenRides: 2)
        for i in 0..<4 {
            h.submit(.request(start("g\(i)", owner: "carol"), id: "g\(i)", scope: "carol", access: nil,
                                       from: Requester(shard: 0, session: 1)))
        }
        h.run()
        XCTAssertEqual(h.replies(to: 1).map { code(h, $0) }, ["riding", "riding", "too_many_rides", "too_many_rides"])
        XCTAssertEqual(h.registry.openRides(of: "carol"), 2, "published: open, no longer pending")
    }

    func testOperatorsAreExempt() {
        let h = EmbeddedService(ManualClock(t0), maxOpenRides: 1)
        let ops = Access(TokenClaims(sub: "op", scope: .control, ops: true))
        for i in 0..<3 {
            h.submit(.request(start("o\(i)", owner: "op"), id: "o\(i)", scope: "op", access: ops,
                                       from: Requester(shard: 0, session: 1)))
        }
        h.run()
        XCTAssertEqual(h.replies(to: 1).map { code(h, $0) }, ["riding", "riding", "riding"])
    }
}
