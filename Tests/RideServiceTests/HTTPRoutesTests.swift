import XCTest
import RideAuth
import RideCore
import RideProtocol
@testable import RideService

/// HTTP routes' answers as request in, answer out, without a socket (the id and token checks
/// before them are HTTPRouterTests').
final class HTTPRoutesTests: XCTestCase {
    let signer = TokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let verifier = TokenVerifier(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let wall: Int64 = 1_764_430_000

    func text(_ a: HTTPAnswer) -> String { String(decoding: a.body, as: UTF8.self) }

    func testTheAnswerOnceTheRideIsKnown() {
        let ride = Ride(id: "r", planID: "default", owner: "alice", limit: nil, startedAt: wall * 1000 - 60_000)
        let alice = TokenClaims(sub: "alice", scope: .watch)
        let mallory = TokenClaims(sub: "mallory", scope: .control)
        let at = wall * 1000
        XCTAssertEqual(RideDocumentRoute.answer(id: "r", claims: alice, ride: nil, plan: nil, failure: nil, at: at),
                       .error(404, "ride_not_found", "no ride \"r\""))
        XCTAssertEqual(RideDocumentRoute.answer(id: "r", claims: alice, ride: nil, plan: nil,
                                                failure: ProtocolError(.unavailable, "ride storage is unavailable: disk"), at: at),
                       .error(503, "unavailable", "ride storage is unavailable: disk"))
        XCTAssertEqual(RideDocumentRoute.answer(id: "r", claims: mallory, ride: ride, plan: .standard, failure: nil, at: at),
                       .error(403, "forbidden", "this token may not read ride \"r\""))
        let ok = RideDocumentRoute.answer(id: "r", claims: alice, ride: ride, plan: .standard, failure: nil, at: at)
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.body, ServerMessages.rideDocument(ride: ride, plan: .standard, at: at))
        XCTAssertEqual(RideDocumentRoute.answer(id: "r", claims: nil, ride: ride, plan: .standard, failure: nil, at: at).status, 200,
                       "auth off")
    }

    func testQuotes() {
        let plans: (String?) -> FarePlan? = { $0 == nil || $0 == "default" ? .standard : nil }
        XCTAssertEqual(QuoteRoute.answer(plan: nil, seconds: nil, paused: nil, plans: plans).status, 400)
        XCTAssertEqual(QuoteRoute.answer(plan: nil, seconds: "60", paused: "x", plans: plans).status, 400)
        XCTAssertEqual(QuoteRoute.answer(plan: "gold", seconds: "60", paused: nil, plans: plans),
                       .error(404, "plan_not_found", "no plan \"gold\""))
        let q = QuoteRoute.answer(plan: nil, seconds: "60", paused: nil, plans: plans)
        XCTAssertEqual(q.status, 200)
        XCTAssertEqual(try JSON.parse(q.body)["fare"]?.int, 680, "the built-in plan's minute (as over the socket)")
    }
}
