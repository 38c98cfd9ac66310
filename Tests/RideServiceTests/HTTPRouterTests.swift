import XCTest
import RideAuth
import RideCore
import RideProtocol
@testable import RideService

/// The one route table, request in, answer out, no socket (as Hummingbird's `.router` test
/// mode): every path and method, who may call each route, and the token judged once.
final class HTTPRouterTests: XCTestCase {
    let signer = TokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let verifier = TokenVerifier(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let wall: Int64 = 1_764_430_000

    func text(_ a: HTTPAnswer) -> String { String(decoding: a.body, as: UTF8.self) }

    func testWebhookRoutesRefuseOtherMethodsAndUnknownPaths() {
        for (method, path, status, allow) in [(HTTPMethod.get, "/v1/webhooks/test", UInt32(405), "POST"),
                                              (.post, "/v1/webhooks/dead", 405, "GET, HEAD"),
                                              (.get, "/v1/webhooks/dead/evt_1/retry", 405, "POST"),
                                              (.post, "/v1/webhooks/dead/evt_1", 404, nil),
                                              (.get, "/v1/webhooks", 404, nil)] {
            guard case .failure(let r) = HTTPRouter.route(method, path) else { return XCTFail("\(method) \(path) routed") }
            XCTAssertEqual(r.answer.status, status, path)
            XCTAssertEqual(r.allow, allow, path)
        }
    }

    func testEveryRouteIsFoundWithWhoMayCallIt() throws {
        let table: [(HTTPMethod, String, HTTPEndpoint, HTTPAccess)] = [
            (.get, "/healthz", .health, .anyone),
            (.head, "/healthz", .health, .anyone),
            (.get, "/metrics", .metrics, .anyone),
            (.get, "/plans", .plans, .anyone),
            (.get, "/zones", .zones, .anyone),
            (.get, "/quote", .quote, .anyone),
            (.get, "/rides", .ridesListing, .ops(what: "listing rides")),
            (.get, "/v1/webhooks/dead", .webhooks(.dead), .ops(what: "the dead-letter listing")),
            (.head, "/v1/webhooks/dead", .webhooks(.dead), .ops(what: "the dead-letter listing")),
            (.post, "/v1/webhooks/dead/evt_1/retry", .webhooks(.retry(id: "evt_1")), .ops(what: "retrying a dead webhook event")),
            (.post, "/v1/webhooks/test", .webhooks(.test), .ops(what: "a test webhook delivery")),
            (.get, "/rides/r-1.a:b_c", .rideDocument(id: "r-1.a:b_c"), .token),
            (.head, "/rides/x", .rideDocument(id: "x"), .token),
            (.post, "/v1/rides", .serverAPI(.create), .token),
            (.post, "/v1/rides/r1/pause", .serverAPI(.transition(.pause, ride: "r1")), .token),
            (.post, "/v1/rides/r1/end", .serverAPI(.transition(.end, ride: "r1")), .token),
            // The server API's read is GET /rides/{id}'s endpoint: one handler, one document.
            (.get, "/v1/rides/r1", .rideDocument(id: "r1"), .token),
            (.head, "/v1/rides/r-1.a:b_c", .rideDocument(id: "r-1.a:b_c"), .token),
            (.get, "/", .file(path: "/"), .anyone),
            (.get, "/ops/ops.js", .file(path: "/ops/ops.js"), .anyone),
            (.get, "/nothing-here", .file(path: "/nothing-here"), .anyone),
        ]
        for (method, path, endpoint, access) in table {
            guard case .success(let m) = HTTPRouter.route(method, path) else { return XCTFail("\(method) \(path) refused") }
            XCTAssertEqual(m.endpoint, endpoint, path)
            XCTAssertEqual(m.access, access, path)
        }
    }

    func testRefusalsBeforeAnyHandler() {
        let table: [(HTTPMethod, String, UInt32, String?, Bool, String)] = [
            (.post, "/healthz", 405, "GET, HEAD", true, "only GET and HEAD are served"),
            (.other, "/", 405, "GET, HEAD", true, "only GET and HEAD are served"),
            (.get, "/v1/rides", 405, "POST", true, "/v1/rides takes POST only"),
            (.head, "/v1/rides/r/pause", 405, "POST", true, "/v1/rides/r/pause takes POST only"),
            (.post, "/v1/rides/r/fly", 404, nil, true, "no such route: /v1/rides/r/fly"),
            (.get, "/v1/rides/", 404, nil, true, "no such route: /v1/rides/"),
            (.post, "/v1/rides/r", 405, "GET, HEAD", true, "/v1/rides/{id} takes GET and HEAD"),
            (.other, "/v1/rides/r", 405, "GET, HEAD", true, "/v1/rides/{id} takes GET and HEAD"),
        ]
        for (method, path, status, allow, close, message) in table {
            guard case .failure(let r) = HTTPRouter.route(method, path) else { return XCTFail("\(method) \(path) routed") }
            XCTAssertEqual(r.answer.status, status, path)
            XCTAssertEqual(r.allow, allow, path)
            XCTAssertEqual(r.close, close, path)
            XCTAssertTrue(text(r.answer).contains(message), text(r.answer))
        }
    }

    func testRideIdsOutsideTheAlphabetAreRefusedBeforeTheTokenAndNotEchoed() {
        for bad in [String(repeating: "a", count: 300), "a<script>", "r x", "", String(repeating: "b", count: 65), "été"] {
            guard case .failure(let r) = HTTPRouter.route(.get, "/rides/" + bad) else { return XCTFail(bad) }
            XCTAssertEqual(r.answer.status, 400, bad)
            XCTAssertFalse(r.close, "answered on a connection that stays open")
            XCTAssertEqual(text(r.answer), #"{"error":{"code":"bad_request","message":"a ride id is 1-64 characters of A-Z a-z 0-9 - _ . :"}}"#)
        }
    }

    /// `GET /v1/rides/{id}`: the id checked as on /rides/{id}, and (unlike that older route)
    /// an unknown parameter refused, as the server API refuses an unknown field.
    func testTheServerAPIReadChecksItsIdAndRefusesUnknownParameters() {
        for bad in ["a<script>", String(repeating: "b", count: 65)] {
            guard case .failure(let r) = HTTPRouter.route(.get, "/v1/rides/" + bad) else { return XCTFail(bad) }
            XCTAssertEqual(r.answer.status, 400, bad)
            XCTAssertFalse(r.close)
            XCTAssertFalse(text(r.answer).contains(bad), "not echoed")
        }
        guard case .failure(let r) = HTTPRouter.route(.get, "/v1/rides/r1", query: ["journal=1", "jurnal=1"]) else { return XCTFail("routed") }
        XCTAssertEqual(r.answer.status, 400)
        XCTAssertTrue(text(r.answer).contains(#"unknown parameter \"jurnal\""#), text(r.answer))
        guard case .success(let m) = HTTPRouter.route(.head, "/v1/rides/r1", query: ["journal=1", "token=x"]) else { return XCTFail("refused") }
        XCTAssertEqual(m, HTTPRouter.Match(endpoint: .rideDocument(id: "r1"), access: .token))
    }

    /// lws ends an HTTP/1 request line at a decoded %0D or %0A, so `/rides/a%0Ab` arrives as
    /// `/rides/a` with no HTTP version: refused, and the connection closed (the rest of the
    /// line was read as a header), rather than answered for the path's first part.
    func testARequestLineCutBeforeItsVersionIsRefused() {
        guard case .failure(let r) = HTTPRouter.route(.get, "/rides/a", lineCut: true) else { return XCTFail("routed") }
        XCTAssertEqual(r.answer.status, 400)
        XCTAssertTrue(r.close)
        XCTAssertTrue(text(r.answer).contains("%0D or %0A"), text(r.answer))
        guard case .success = HTTPRouter.route(.get, "/rides/a") else { return XCTFail("refused") }
    }

    func testTheTokenIsJudgedOnceOnTheWallClockAndAnExpiredOneSaysSo() {
        func refused(_ access: HTTPAccess, _ token: String?) -> HTTPAnswer? {
            if case .failure(let r) = HTTPRouter.authorize(access, token: token, verifier: verifier, wall: wall) { return r.answer }
            return nil
        }
        XCTAssertEqual(refused(.token, nil).map(text), #"{"error":{"code":"unauthorized","message":"a valid token is required (?token= or Authorization: Bearer)"}}"#)
        XCTAssertEqual(refused(.token, nil)?.status, 401)
        let expired = signer.sign(TokenClaims(sub: "a", scope: .control, exp: wall - 120))
        XCTAssertEqual(refused(.token, expired).map(text), #"{"error":{"code":"unauthorized","message":"token expired; get a new one"}}"#)
        XCTAssertEqual(refused(.token, "nodots").map(text), #"{"error":{"code":"unauthorized","message":"token refused: token must have three dot-separated parts"}}"#)
        // Valid from the wall's second on (nbf), whatever the ride clock says.
        let fresh = signer.sign(TokenClaims(sub: "a", scope: .watch, exp: wall + 60, nbf: wall - 5))
        guard case .success(let claims) = HTTPRouter.authorize(.token, token: fresh, verifier: verifier, wall: wall) else {
            return XCTFail("a fresh token")
        }
        XCTAssertEqual(claims?.sub, "a")
        // A rider's token on an operators' route: 403 naming the route.
        XCTAssertEqual(refused(.ops(what: "listing rides"), fresh)?.status, 403)
        XCTAssertEqual(refused(.ops(what: "listing rides"), fresh).map(text), #"{"error":{"code":"forbidden","message":"listing rides needs an operator (ops) token"}}"#)
        let ops = signer.sign(TokenClaims(sub: "op", scope: .watch, ops: true, exp: wall + 60))
        guard case .success(let o) = HTTPRouter.authorize(.ops(what: "listing rides"), token: ops, verifier: verifier, wall: wall) else {
            return XCTFail("an ops token")
        }
        XCTAssertEqual(o?.ops, true)
        XCTAssertTrue(RideDocumentRoute.wantsJournal(asked: false, claims: o), "operators get the journal")
        XCTAssertFalse(RideDocumentRoute.wantsJournal(asked: false, claims: claims))
        XCTAssertTrue(RideDocumentRoute.wantsJournal(asked: true, claims: claims))
        // Anyone's routes and authentication off: no token looked at.
        guard case .success(nil) = HTTPRouter.authorize(.anyone, token: "garbage", verifier: verifier, wall: wall),
              case .success(nil) = HTTPRouter.authorize(.ops(what: "x"), token: nil, verifier: nil, wall: wall) else {
            return XCTFail("no token needed")
        }
    }
}
