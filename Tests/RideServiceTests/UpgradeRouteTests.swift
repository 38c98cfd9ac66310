import XCTest
import RideAuth
@testable import RideService

/// WebSocket upgrades decided without a socket: the path, the Origin, the address limit's
/// wording, /echo's token (issue 25: behind the same tokens as /ws) and the subprotocol.
final class UpgradeRouteTests: XCTestCase {
    let signer = TokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let verifier = TokenVerifier(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let wall: Int64 = 1_764_430_000

    func refusal(_ r: Result<UpgradeRoute.Endpoint, UpgradeRoute.Refusal>) -> UpgradeRoute.Refusal? {
        if case .failure(let f) = r { return f }
        return nil
    }

    func testPathsAndOrigins() {
        XCTAssertEqual(try UpgradeRoute.endpoint(path: "/ws", echoEnabled: false, origin: nil, allowedOrigins: []).get(), .ws)
        XCTAssertEqual(try UpgradeRoute.endpoint(path: "/echo", echoEnabled: true, origin: nil, allowedOrigins: []).get(), .echo)
        XCTAssertEqual(refusal(UpgradeRoute.endpoint(path: "/echo", echoEnabled: false, origin: nil, allowedOrigins: [])),
                       UpgradeRoute.Refusal(404, "not_found", "no WebSocket at /echo; the WebSocket is at /ws"))
        let allowed = ["https://ride.example"]
        XCTAssertEqual(try UpgradeRoute.endpoint(path: "/ws", echoEnabled: false, origin: "https://ride.example", allowedOrigins: allowed).get(), .ws)
        XCTAssertEqual(try UpgradeRoute.endpoint(path: "/ws", echoEnabled: false, origin: nil, allowedOrigins: allowed).get(), .ws,
                       "no Origin: not a browser")
        XCTAssertEqual(refusal(UpgradeRoute.endpoint(path: "/ws", echoEnabled: false, origin: "https://evil.example", allowedOrigins: allowed)),
                       UpgradeRoute.Refusal(403, "forbidden_origin", "origin https://evil.example is not allowed (--allow-origin)"))
        XCTAssertEqual(UpgradeRoute.tooManyConnections(from: "10.0.0.1", limit: 4),
                       UpgradeRoute.Refusal(429, "too_many_connections", "more than 4 WebSocket connections from 10.0.0.1"))
    }

    func testEchoTakesAValidTokenAtTheUpgradeWhenTokensAreRequired() {
        let valid = signer.sign(TokenClaims(sub: "e", scope: .control, exp: wall + 60))
        let expired = signer.sign(TokenClaims(sub: "e", scope: .control, exp: wall - 120))
        XCTAssertEqual(UpgradeRoute.tokenRefusal(.echo, token: nil, verifier: verifier, wall: wall),
                       UpgradeRoute.Refusal(401, "unauthorized", "a valid token is required (?token= or Authorization: Bearer)"))
        XCTAssertEqual(UpgradeRoute.tokenRefusal(.echo, token: expired, verifier: verifier, wall: wall),
                       UpgradeRoute.Refusal(401, "unauthorized", "token refused: token expired"))
        XCTAssertNil(UpgradeRoute.tokenRefusal(.echo, token: valid, verifier: verifier, wall: wall))
        XCTAssertNil(UpgradeRoute.tokenRefusal(.echo, token: nil, verifier: nil, wall: wall), "auth off")
        XCTAssertNil(UpgradeRoute.tokenRefusal(.ws, token: nil, verifier: verifier, wall: wall), "/ws: checked after the upgrade (4401)")
    }

    func testSubprotocols() {
        XCTAssertNil(UpgradeRoute.subprotocolRefusal(offered: nil))
        XCTAssertNil(UpgradeRoute.subprotocolRefusal(offered: "ride.v1"))
        XCTAssertNil(UpgradeRoute.subprotocolRefusal(offered: "chat, ride.v1"))
        XCTAssertNil(UpgradeRoute.subprotocolRefusal(offered: " "))
        XCTAssertEqual(UpgradeRoute.subprotocolRefusal(offered: "chat, superchat"),
                       UpgradeRoute.Refusal(400, "unsupported_subprotocol", "this server speaks the WebSocket subprotocol ride.v1; offered: chat, superchat"))
        XCTAssertEqual(UpgradeRoute.subprotocolRefusal(offered: "ride.v2")?.status, 400)
    }
}
