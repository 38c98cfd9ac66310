import XCTest
@testable import RideCore
import RideStore
@testable import RideService

/// `GET /rides`'s query: unknown and repeated parameters refused as `/quote` refuses them
/// (a misspelt filter must not list every rider's rides), and `rider=` with the state filter.
final class RidesQueryTests: XCTestCase {
    func parse(_ query: [(String, String)]) -> Result<RidesQuery, HTTPRefusalAnswer> {
        RidesQuery.parse(query.map { (name: $0.0, value: $0.1) })
    }

    func problem(_ query: [(String, String)]) -> String? {
        guard case .failure(let r) = parse(query) else { return nil }
        XCTAssertEqual(r.answer.status, 400)
        return (try? JSON.parse(r.answer.body))?["error"]?["message"]?.string
    }

    func testUnknownRepeatedAndMalformedParametersAre400NamingTheParameter() {
        XCTAssertEqual(problem([("bogus", "1")]), "unknown parameter \"bogus\" (known: state, rider, limit, cursor, token)")
        XCTAssertEqual(problem([("ridr", "alice")])?.hasPrefix("unknown parameter \"ridr\""), true)
        XCTAssertEqual(problem([("rider", "alice"), ("rider", "bob")]), "rider= is given more than once")
        XCTAssertEqual(problem([("rider", "")])?.hasPrefix("rider= is a rider's id"), true)
        XCTAssertEqual(problem([("rider", "a\u{1}b")])?.hasPrefix("rider= is a rider's id"), true)
        XCTAssertEqual(problem([("state", "open")])?.hasPrefix("state= must be"), true)
        XCTAssertEqual(problem([("limit", "501")])?.hasPrefix("limit= must be"), true)
        XCTAssertEqual(problem([("limit", "0")])?.hasPrefix("limit= must be"), true)
        XCTAssertEqual(problem([("cursor", "x")])?.hasPrefix("cursor= is not"), true)
    }

    func testARidersQueryWithStateLimitAndCursor() throws {
        XCTAssertEqual(try parse([]).get(), RidesQuery())
        XCTAssertEqual(try parse([("token", "x.y.z")]).get(), RidesQuery(), "the token (read by the router) is no filter")
        let q = try parse([("rider", "alice"), ("state", "ended"), ("limit", "5"), ("cursor", "17.r-1")]).get()
        XCTAssertEqual(q, RidesQuery(state: .ended, rider: "alice", limit: 5, cursor: RideKey(at: 17, id: "r-1")))
        XCTAssertEqual(q.storePage, .ended(before: RideKey(at: 17, id: "r-1")))
        XCTAssertEqual(RidesQuery(rider: "alice").storePage, .byStart(after: nil))
    }

    func testOpenRidesFromMemoryAreTheRidersAfterTheCursor() {
        let alice = Ride(id: "r-a", planID: "p", owner: "alice", limit: nil, startedAt: 10)
        let bob = Ride(id: "r-b", planID: "p", owner: "bob", limit: nil, startedAt: 10)
        let q = RidesQuery(state: .riding, rider: "alice")
        XCTAssertTrue(q.includes(open: alice, key: RideKey(at: 10, id: "r-a")))
        XCTAssertFalse(q.includes(open: bob, key: RideKey(at: 10, id: "r-b")), "another rider's")
        XCTAssertFalse(RidesQuery(state: .paused, rider: "alice").includes(open: alice, key: RideKey(at: 10, id: "r-a")), "another state")
        XCTAssertFalse(RidesQuery(state: .riding, cursor: RideKey(at: 10, id: "r-a")).includes(open: alice, key: RideKey(at: 10, id: "r-a")),
                       "at the cursor: on the page before")
        XCTAssertTrue(RidesQuery(state: .riding).includes(open: bob, key: RideKey(at: 10, id: "r-b")), "no rider: every rider's")
    }
}
