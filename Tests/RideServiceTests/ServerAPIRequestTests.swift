import XCTest
import RideAuth
import RideCore
import RideProtocol
import RideStore
@testable import RideService

/// The server API's admission and idempotency as request in, decision out, without a socket:
/// route and method before the token, the token before the key, the key before the body, and
/// what a token may start; keys scoped by account (one for ops tokens, a rider's own);
/// fingerprints by method, path and body.
final class ServerAPIRequestTests: XCTestCase {
    let signer = TokenSigner(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let verifier = TokenVerifier(secret: Array("0123456789abcdef0123456789abcdef".utf8))
    let wall: Int64 = 1_764_430_000

    func token(_ sub: String, _ scope: RideAuth.Scope = .control, ops: Bool = false) -> String {
        signer.sign(TokenClaims(sub: sub, scope: scope, ops: ops, exp: wall + 600))
    }

    func admit(_ path: String, _ body: String = "", method: String = "POST", key: String? = "k-1", token: String? = nil,
               auth: Bool = true) -> Result<ServerAPICall, HTTPRefusalAnswer> {
        ServerAPIRequest.admit(method: method, path: path, idempotencyKey: key, token: token, body: Array(body.utf8),
                               verifier: auth ? verifier : nil, wall: wall)
    }

    func refusal(_ r: Result<ServerAPICall, HTTPRefusalAnswer>, file: StaticString = #filePath, line: UInt = #line) -> (UInt32, String)? {
        guard case .failure(let f) = r else { XCTFail("admitted", file: file, line: line); return nil }
        let code = (try? JSON.parse(f.answer.body))?["error"]?["code"]?.string ?? "?"
        return (f.answer.status, code)
    }

    func call(_ r: Result<ServerAPICall, HTTPRefusalAnswer>, file: StaticString = #filePath, line: UInt = #line) throws -> ServerAPICall {
        switch r {
        case .success(let c): return c
        case .failure(let f): XCTFail(String(decoding: f.answer.body, as: UTF8.self), file: file, line: line); throw f
        }
    }

    /// A refusal's message, decoded.
    func said(_ f: HTTPRefusalAnswer) -> String { (try? JSON.parse(f.answer.body))?["error"]?["message"]?.string ?? "?" }

    func testRoutesAreKnownByPathSoAWrongMethodIs405() {
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides"), .create)
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides/r-1/end"), .transition(.end, ride: "r-1"))
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides/r-1/pause"), .transition(.pause, ride: "r-1"))
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides/r-1"), .read(ride: "r-1"))
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides/"), .unknown)
        XCTAssertEqual(refusal(admit("/v1/rides/r-1", "", auth: false))?.0, 405, "a POST to the read route")
        XCTAssertEqual(ServerAPIRoute(path: "/v1/rides/r-1/fly"), .unknown)
        XCTAssertNil(ServerAPIRoute(path: "/v1/ridesx"))
        XCTAssertNil(ServerAPIRoute(path: "/rides/r-1"))
        // Method before token: a GET without any token is told the method, not 401.
        XCTAssertEqual(refusal(admit("/v1/rides", method: "GET", key: nil))?.0, 405)
        XCTAssertEqual(refusal(admit("/v1/rides/r/fly", key: nil))?.0, 404)
    }

    func testTokenThenKeyThenBodyEachRefusedWithItsOwnAnswer() {
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: nil, token: nil))?.1, "unauthorized")
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: nil, token: "x.y.z"))?.1, "unauthorized")
        let alice = token("alice")
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: nil, token: alice)).map { "\($0.0) \($0.1)" }, "400 bad_request")
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: "", token: alice))?.0, 400)
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: String(repeating: "k", count: 65), token: alice))?.0, 400)
        // 64 bytes is a key; the body is then what is wrong.
        XCTAssertEqual(refusal(admit("/v1/rides", "{", key: String(repeating: "k", count: 64), token: alice))?.1, "bad_request")
        XCTAssertEqual(refusal(admit("/v1/rides", String(repeating: " ", count: 4097), token: alice))?.0, 413)
    }

    /// Issue 36, finding 7: a key is its bytes. Two keys that differ only in bytes that are
    /// not UTF-8 were both decoded to U+FFFD and collided; now each is refused, and the
    /// 64-byte limit counts the bytes sent (64 bytes of `é` halves is 32 characters).
    func testAnIdempotencyKeyThatIsNotUTF8IsRefusedAndMeasuredInBytes() throws {
        let t = token("alice")
        func admitRaw(_ key: [UInt8]) -> Result<ServerAPICall, HTTPRefusalAnswer> {
            ServerAPIRequest.admit(method: "POST", path: "/v1/rides", idempotencyKeyBytes: key, token: t,
                                   body: Array(#"{"rider":"alice","ride":"r-1"}"#.utf8), verifier: verifier, wall: wall)
        }
        for bad: [UInt8] in [[0x6B, 0xFF], [0x6B, 0xFE], [0xC3], [0xED, 0xA0, 0x80]] {
            XCTAssertEqual(refusal(admitRaw(bad))?.0, 400, "\(bad)")
        }
        let e = Array("é".utf8)  // two bytes
        _ = try call(admitRaw(Array((0..<32).flatMap { _ in e })))  // 64 bytes: a key
        XCTAssertEqual(refusal(admitRaw(Array((0..<33).flatMap { _ in e })))?.0, 400)  // 66 bytes, 33 characters
        // Without a token check first nothing is revealed: a bad token is still 401 whatever the key.
        XCTAssertEqual(refusal(ServerAPIRequest.admit(method: "POST", path: "/v1/rides", idempotencyKeyBytes: [0xFF], token: "x",
                                                      body: [], verifier: verifier, wall: wall))?.0, 401)
    }

    func testBodiesAreStrictSoAMisspeltFieldIsNotIgnored() throws {
        let cases: [(String, String)] = [
            ("/v1/rides", #"{"rider":"alice","limt":60}"#), ("/v1/rides", #"{"ride":"r-1"}"#), ("/v1/rides", #"{"rider":""}"#),
            ("/v1/rides", #"{"rider":"alice","ride":"a b"}"#), ("/v1/rides", #"{"rider":"alice","limit":0}"#),
            ("/v1/rides", #"{"rider":"alice","limit":1.5}"#), ("/v1/rides", "[]"), ("/v1/rides", "not json"),
            ("/v1/rides/r-1/end", #"{"distance":-1}"#), ("/v1/rides/r-1/pause", #"{"distance":5}"#),
            ("/v1/rides/bad%20id/end", ""),
        ]
        for (path, body) in cases {
            XCTAssertEqual(refusal(admit(path, body, auth: false)).map { "\($0.0) \($0.1)" }, "400 bad_request", "\(path) \(body)")
        }
        XCTAssertEqual(try call(admit("/v1/rides", #"{"rider":"alice","ride":"r-9","plan":"p","limit":60}"#, auth: false)).request,
                       .start(ride: "r-9", plan: "p", limit: 60, owner: "alice"))
        XCTAssertEqual(try call(admit("/v1/rides/r-9/end", #"{"distance":1200}"#, auth: false)).request,
                       .command(.end, ride: "r-9", metres: 1200))
        XCTAssertEqual(try call(admit("/v1/rides/r-9/pause", " {} ", auth: false)).request, .command(.pause, ride: "r-9", metres: nil))
        XCTAssertEqual(try call(admit("/v1/rides/r-9/resume", "", auth: false)).successStatus, 200)
        XCTAssertEqual(try call(admit("/v1/rides", #"{"rider":"a"}"#, auth: false)).successStatus, 201)
        // Integer-valued numbers in any spelling, as JSON Schema's `integer` takes them.
        XCTAssertEqual(try call(admit("/v1/rides", #"{"rider":"alice","limit":60.0}"#, auth: false)).request,
                       .start(ride: nil, plan: nil, limit: 60, owner: "alice"))
        XCTAssertEqual(try call(admit("/v1/rides/r-9/end", #"{"distance":1.2e3}"#, auth: false)).request,
                       .command(.end, ride: "r-9", metres: 1200))
    }

    func testARiderStartsItsOwnRidesOnlyOpsAnyAndWatchTokensNone() throws {
        let body = #"{"rider":"bob"}"#
        XCTAssertEqual(refusal(admit("/v1/rides", body, token: token("alice")))?.1, "forbidden")
        XCTAssertEqual(refusal(admit("/v1/rides", body, token: token("bob", .watch)))?.1, "forbidden")
        XCTAssertEqual(refusal(admit("/v1/rides/r-1/end", "", token: token("bob", .watch)))?.1, "forbidden")
        XCTAssertEqual(try call(admit("/v1/rides", body, token: token("bob"))).access?.rider, "bob")
        let ops = try call(admit("/v1/rides", body, token: token("backend", ops: true)))
        XCTAssertEqual(ops.request, .start(ride: nil, plan: nil, limit: nil, owner: "bob"), "the ride is the rider's, not the backend's")
        XCTAssertEqual(ops.key.scope, ServerAPIIdempotency.operatorScope, "the key is the operator's account's")
    }

    func testKeysAreScopedByAccountAndFingerprintsSeeMethodPathAndBody() throws {
        let a = try call(admit("/v1/rides", #"{"rider":"alice"}"#, token: token("alice")))
        let a2 = try call(admit("/v1/rides", #"{"rider":"alice"}"#, token: token("alice")))
        XCTAssertEqual(a.key, a2.key)
        XCTAssertEqual(a.fingerprint, a2.fingerprint)
        XCTAssertTrue(a.key.id.hasPrefix("http:") && a.key.id.count == 69, a.key.id)
        XCTAssertEqual(a.key.scope, "alice", "a rider's token: the rider's own account")
        XCTAssertNil(a.legacyKey, "riders' keys are where they always were")
        // Every ops token is the operator's backend: one scope whatever its sub, and not a rider's.
        let ops1 = try call(admit("/v1/rides", #"{"rider":"alice"}"#, token: token("backend-1", ops: true)))
        let ops2 = try call(admit("/v1/rides", #"{"rider":"alice"}"#, token: token("backend-2", ops: true)))
        XCTAssertEqual(ops1.key, ops2.key)
        XCTAssertEqual(ops1.key.scope, ServerAPIIdempotency.operatorScope)
        let opsAlice = try call(admit("/v1/rides", #"{"rider":"alice"}"#, token: token("alice", ops: true)))
        XCTAssertEqual(opsAlice.key, ops1.key)
        XCTAssertNotEqual(opsAlice.key, a.key, "an ops token whose sub is a rider's is still the operator")
        XCTAssertEqual(ops1.legacyKey, ServerAPIIdempotency.replyKey(subject: "backend-1", key: "k-1"))
        XCTAssertEqual(try call(admit("/v1/rides", #"{"rider":"alice"}"#, auth: false)).key, ops1.key, "authentication off: the operator")
        let b = try call(admit("/v1/rides", #"{"rider":"bob"}"#, token: token("bob")))
        XCTAssertNotEqual(b.key.id, a.key.id)
        XCTAssertNotEqual(ServerAPIIdempotency.replyKey(subject: "ab", key: "c").id, ServerAPIIdempotency.replyKey(subject: "a", key: "bc").id)
        XCTAssertNotEqual(try call(admit("/v1/rides", #"{"rider":"alice", "limit":5}"#, token: token("alice"))).fingerprint, a.fingerprint)
        XCTAssertNotEqual(ServerAPIIdempotency.fingerprint(method: "POST", path: "/v1/rides/r/end", body: []),
                          ServerAPIIdempotency.fingerprint(method: "POST", path: "/v1/rides/r/pause", body: []))
        // Known answer: SHA-256 of "POST /v1/rides\n{}".
        XCTAssertEqual(ServerAPIIdempotency.fingerprint(method: "POST", path: "/v1/rides", body: Array("{}".utf8)),
                       "http " + Digest.sha256Hex(Array("POST /v1/rides\n{}".utf8)))
        XCTAssertEqual(Digest.sha256Hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testAStoredAnswerReplaysItsStatusAndBytesAndAnotherRequestIs422() {
        let answer = HTTPAnswer(status: 201, body: Array(#"{"ride":"r-1"}"#.utf8))
        let packed = ServerAPIIdempotency.packed(answer)
        XCTAssertEqual(String(decoding: packed, as: UTF8.self), #"201 {"ride":"r-1"}"#)
        XCTAssertEqual(ServerAPIIdempotency.unpacked(packed), answer)
        let earlier = RideBook.Earlier(request: "http abc", bytes: packed)
        let replayed = ServerAPIIdempotency.again(earlier, fingerprint: "http abc")
        XCTAssertEqual(replayed, HTTPAnswer(status: 201, body: answer.body, replayed: true))
        XCTAssertEqual(replayed.extraHeaders.map { "\($0.name) \($0.value)" }, ["idempotent-replayed: true"])
        XCTAssertTrue(answer.extraHeaders.isEmpty)
        // Handed from the store worker to the service thread, the mark survives.
        XCTAssertEqual(ServerAPIIdempotency.unpacked(ServerAPIIdempotency.packed(replayed)), replayed)
        let reused = ServerAPIIdempotency.again(earlier, fingerprint: "http abd")
        XCTAssertEqual(reused.status, 422)
        XCTAssertEqual((try? JSON.parse(reused.body))?["error"]?["code"]?.string, "idempotency_key_reused")
        // A ride.v1 reply (no fingerprint kept, or words) is never replayed as an HTTP answer.
        XCTAssertEqual(ServerAPIIdempotency.again(RideBook.Earlier(request: nil, bytes: packed), fingerprint: "http abc").status, 422)
    }

    /// ride.v1's `start` zone fields and `end`'s `force`, read by ride.v1's own rules (issue 40, item 5).
    func testCreateTakesAPositionAndVehicleTypeAndEndTakesForceForOpsOnly() throws {
        let create = try call(admit("/v1/rides", #"{"rider":"alice","lat":37.5615,"lon":126.9725,"vehicle_type":"scooter"}"#, auth: false))
        XCTAssertEqual(create.request, .start(ride: nil, plan: nil, limit: nil, owner: "alice"))
        XCTAssertEqual(create.geo, ZoneFields(position: GeoPoint(lat: 37.5615, lon: 126.9725), vehicleType: "scooter"))
        XCTAssertNil(try call(admit("/v1/rides", #"{"rider":"alice"}"#, auth: false)).geo)
        let bad: [(String, String)] = [
            (#"{"rider":"a","lat":1}"#, #""lat" and "lon" go together"#),
            (#"{"rider":"a","lon":1}"#, #""lat" and "lon" go together"#),
            (#"{"rider":"a","lat":91,"lon":0}"#, #""lat" must be a number of degrees from -90 to 90"#),
            (#"{"rider":"a","lat":0,"lon":-180.5}"#, #""lon" must be a number of degrees from -180 to 180"#),
            (#"{"rider":"a","lat":"1","lon":0}"#, #""lat" must be a number"#),
            (#"{"rider":"a","vehicle_type":"a b"}"#, #""vehicle_type" must be a GBFS vehicle type id"#),
            (#"{"rider":"a","vehicle_type":""}"#, #""vehicle_type" must be"#),
        ]
        for (body, message) in bad {
            guard case .failure(let f) = admit("/v1/rides", body, auth: false) else { XCTFail(body); continue }
            XCTAssertEqual(f.answer.status, 400, body)
            XCTAssertTrue(said(f).contains(message), said(f))
        }
        // force: an ops token's; a rider's is refused, not silently ignored as ride.v1 does.
        let forced = try call(admit("/v1/rides/r-1/end", #"{"force":true,"distance":10}"#, token: token("backend", ops: true)))
        XCTAssertEqual(forced.request, .command(.end, ride: "r-1", metres: 10))
        XCTAssertEqual(forced.geo, ZoneFields(force: true))
        XCTAssertNil(try call(admit("/v1/rides/r-1/end", #"{"force":false}"#, token: token("alice"))).geo)
        guard case .failure(let f) = admit("/v1/rides/r-1/end", #"{"force":true}"#, token: token("alice")) else { return XCTFail("admitted") }
        XCTAssertEqual(f.answer.status, 403)
        XCTAssertTrue(said(f).contains(#""force" is for operator (ops) tokens"#), said(f))
        XCTAssertEqual(try call(admit("/v1/rides/r-1/end", #"{"force":true}"#, auth: false)).geo?.force, true, "authentication off: no roles")
        XCTAssertEqual(refusal(admit("/v1/rides/r-1/end", #"{"force":1}"#, auth: false))?.0, 400)
        XCTAssertEqual(refusal(admit("/v1/rides/r-1/pause", #"{"force":true}"#, auth: false))?.0, 400, "force is end's only")
        XCTAssertEqual(refusal(admit("/v1/rides/r-1/end", #"{"lat":1,"lon":2}"#, auth: false))?.0, 400, "a position is the create's only")
    }

    /// A refusal names the field and says why (issue 40): a control character in `rider` is
    /// not "rider is required".
    func testRefusalsNameTheFieldAndWhy() {
        let cases: [(String, String)] = [
            (#"{}"#, #""rider" is required"#),
            (#"{"rider":null}"#, #""rider" is required"#),
            (#"{"rider":5}"#, #""rider" must be a string"#),
            (#"{"rider":""}"#, #""rider" is empty"#),
            (#"{"rider":"a\u0001b"}"#, #""rider" holds a control character"#),
            ("{\"rider\":\"\(String(repeating: "x", count: 129))\"}", #""rider" is 129 bytes; a rider's id is at most 128"#),
            (#"{"rider":"a","ride":"a b"}"#, #""ride" must be a ride id"#),
            (#"{"rider":"a","plan":""}"#, #""plan" must be a plan id"#),
            (#"{"rider":"a","limit":1.5}"#, #""limit" must be a whole number of seconds, 1 or more (got 1.5)"#),
            (#"{"rider":"a","limit":"60"}"#, #"(got a string)"#),
        ]
        for (body, message) in cases {
            guard case .failure(let f) = admit("/v1/rides", body, auth: false) else { XCTFail(body); continue }
            XCTAssertTrue(f.answer.status == 400 && said(f).contains(message), "\(body): \(said(f))")
        }
        guard case .failure(let f) = admit("/v1/rides/r/end", #"{"distance":-3}"#, auth: false) else { return XCTFail("admitted") }
        XCTAssertTrue(said(f).contains(#""distance" must be a whole number of metres, 0 or more (got -3)"#), said(f))
    }

    func testRefusalsMapToStatuses() {
        // The zones refuse a well-formed request: 422 with ride.v1's code, not 400.
        for code in [ErrorCode.startNotAllowed, .endNotAllowed, .positionRequired] {
            XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(code, "x")).status, 422, code.rawValue)
        }
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.invalidTransition, "x")).status, 409)
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.rideNotFound, "x")).status, 404)
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.forbidden, "x")).status, 403)
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.tooManyRides, "x")).status, 429)
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.planNotFound, "x")).status, 400)
        XCTAssertEqual(ServerAPIAnswer.error(ProtocolError(.unavailable, "x")).status, 503)
        let inFlight = ServerAPIAnswer.notRecorded(StoreError(.replyAlreadyRecorded, "dup"), type: "end")
        XCTAssertEqual(inFlight.status, 409)
        XCTAssertEqual((try? JSON.parse(inFlight.body))?["error"]?["code"]?.string, "idempotency_key_in_flight")
        XCTAssertEqual(ServerAPIAnswer.notRecorded(StoreError(.notNext, "seq"), type: "end").status, 409)
        XCTAssertEqual(ServerAPIAnswer.notRecorded(StoreError(.unavailable, "disk"), type: "end").status, 503)
    }
}
