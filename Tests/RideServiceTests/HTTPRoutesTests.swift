import XCTest
import RideAuth
import RideCore
import RideProtocol
@testable import RideService

/// HTTP routes as request in, answer out, without a socket (issue 25: bad ids refused before
/// any lookup and not echoed; tokens judged on the wall clock, "token expired" said; the
/// token checked before the ride, the ride before the journal).
final class HTTPRoutesTests: XCTestCase {
    let signer = TokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let verifier = TokenVerifier(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let wall: Int64 = 1_764_430_000

    func text(_ a: HTTPAnswer) -> String { String(decoding: a.body, as: UTF8.self) }

    func refusal(_ r: Result<RideDocumentRoute.Admitted, HTTPRefusalAnswer>) -> HTTPAnswer? {
        if case .failure(let f) = r { return f.answer }
        return nil
    }

    func testIdsOutsideTheAlphabetAreRefusedFirstAndNotEchoed() {
        for bad in [String(repeating: "a", count: 300), "a<script>", "r x", "", String(repeating: "b", count: 65), "été"] {
            // Even without a token: the id is the first thing checked, so nothing is looked up.
            let a = refusal(RideDocumentRoute.admit(id: bad, token: nil, journalAsked: true, verifier: verifier, wall: wall))
            XCTAssertEqual(a?.status, 400, bad)
            XCTAssertEqual(a.map(text), #"{"error":{"code":"bad_request","message":"a ride id is 1-64 characters of A-Z a-z 0-9 - _ . :"}}"#)
        }
        guard case .success(let ok) = RideDocumentRoute.admit(id: "r-1.a:b_c", token: nil, journalAsked: false, verifier: nil, wall: wall) else {
            return XCTFail("a good id, auth off")
        }
        XCTAssertEqual(ok, RideDocumentRoute.Admitted(claims: nil, journal: false))
    }

    func testTokensAreJudgedOnTheWallClockAndAnExpiredOneSaysSo() {
        func admit(_ token: String?) -> HTTPAnswer? {
            refusal(RideDocumentRoute.admit(id: "r", token: token, journalAsked: false, verifier: verifier, wall: wall))
        }
        XCTAssertEqual(admit(nil).map(text), #"{"error":{"code":"unauthorized","message":"a valid token is required (?token= or Authorization: Bearer)"}}"#)
        XCTAssertEqual(admit(nil)?.status, 401)
        let expired = signer.sign(TokenClaims(sub: "a", scope: .control, exp: wall - 120))
        XCTAssertEqual(admit(expired).map(text), #"{"error":{"code":"unauthorized","message":"token expired; get a new one"}}"#)
        XCTAssertEqual(admit("nodots").map(text), #"{"error":{"code":"unauthorized","message":"token refused: token must have three dot-separated parts"}}"#)
        // Valid from the wall's second on (nbf), whatever the ride clock says.
        let fresh = signer.sign(TokenClaims(sub: "a", scope: .watch, exp: wall + 60, nbf: wall - 5))
        guard case .success(let a) = RideDocumentRoute.admit(id: "r", token: fresh, journalAsked: true, verifier: verifier, wall: wall) else {
            return XCTFail("a fresh token")
        }
        XCTAssertEqual(a.claims?.sub, "a")
        XCTAssertTrue(a.journal)
        let ops = signer.sign(TokenClaims(sub: "op", scope: .watch, ops: true, exp: wall + 60))
        guard case .success(let o) = RideDocumentRoute.admit(id: "r", token: ops, journalAsked: false, verifier: verifier, wall: wall) else {
            return XCTFail("an ops token")
        }
        XCTAssertTrue(o.journal, "operators get the journal")
    }

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
