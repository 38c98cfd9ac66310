import RideCore
import Foundation
import XCTest
@testable import RideAuth

let testSecret = Array("ridepush-test-secret-0123456789abcdef".utf8)
let now: Int64 = 1_700_000_000

/// The error `verify` throws, or nil if it accepted the token.
func refusal(_ token: String, signer: TokenSigner = TokenSigner(secret: testSecret), at time: Int64 = now) -> TokenError? {
    do {
        _ = try signer.verify(token, now: time)
        return nil
    } catch {
        return error
    }
}

func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

final class TokenTests: XCTestCase {
    let signer = TokenSigner(secret: testSecret)
    let hs256Header = #"{"alg":"HS256","typ":"JWT"}"#
    let basicClaims = #"{"sub":"rider-1","scope":"control"}"#

    // MARK: round trip and pinned vectors

    func testSignVerifyRoundTrip() throws {
        let claims = TokenClaims(sub: "rider-\"7\"\\é\n\u{1}", scope: .control, rides: ["r-1", "r/2", "ü"],
                                 ops: true, exp: now + 60, nbf: now - 5, iat: now)
        let token = signer.sign(claims)
        XCTAssertEqual(try signer.verify(token, now: now), claims)
        let minimal = TokenClaims(sub: "rider-1", scope: .watch)
        XCTAssertEqual(try signer.verify(signer.sign(minimal), now: now), minimal)
    }

    /// Pinned from python3: hmac.new(secret, h + "." + p, sha256) with compact sorted-key JSON.
    func testPinnedVectorFromPython() throws {
        let share = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE3MDAwMDcyMDAsImlhdCI6MTcwMDAwMDAwMCwicmlkZXMiOlsici00MiJdLCJzY29wZSI6IndhdGNoIiwic3ViIjoic2hhcmU6ci00MiJ9.m6xgblNfAIxQRSh-yVl-OVXyXEKjpYkAaJdpAKo2EaM"
        let shareClaims = TokenClaims.share(ride: "r-42", now: now, ttl: 7200)
        XCTAssertEqual(shareClaims, TokenClaims(sub: "share:r-42", scope: .watch, rides: ["r-42"],
                                                exp: 1_700_007_200, iat: 1_700_000_000))
        XCTAssertEqual(signer.sign(shareClaims), share)
        XCTAssertEqual(try signer.verify(share, now: now), shareClaims)

        let ops = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3MDAwMDAwMDAsIm9wcyI6dHJ1ZSwic2NvcGUiOiJjb250cm9sIiwic3ViIjoicmlkZXItNyJ9.X7Y8Fni4dcwaeAMD7AF-culp04XWRlg01i4C4bqKtIA"
        let opsClaims = TokenClaims(sub: "rider-7", scope: .control, ops: true, iat: now)
        XCTAssertEqual(signer.sign(opsClaims), ops)
        XCTAssertEqual(try signer.verify(ops, now: now), opsClaims)
    }

    /// RFC 7515 Appendix A.1: the MAC is over the exact received bytes (CRLFs, other key
    /// order), not a re-encoding. Its claims lack sub/scope, so the signature passes and the
    /// claims check refuses.
    func testRFC7515AppendixA1() {
        let key = Base64URL.decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow")!
        let rfcSigner = TokenSigner(secret: key)
        let token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        XCTAssertEqual(refusal(token, signer: rfcSigner, at: 1_300_819_000),
                       TokenError(.invalidClaims, "token sub must be a non-empty string"))
        let tampered = token.replacingOccurrences(of: ".dBjf", with: ".dBje")
        XCTAssertEqual(refusal(tampered, signer: rfcSigner, at: 1_300_819_000)?.kind, .badSignature)
    }

    // MARK: forged signatures

    func testWrongSignature() {
        let other = TokenSigner(secret: Array("another-secret-of-enough-length-0123456789".utf8))
        let forged = other.sign(TokenClaims(sub: "rider-1", scope: .control, ops: true))
        XCTAssertEqual(refusal(forged), TokenError(.badSignature, "token signature does not match"))

        // Claims swapped under a genuine signature.
        let genuine = signer.sign(TokenClaims(sub: "rider-1", scope: .watch)).split(separator: ".")
        let elevated = signer.sign(TokenClaims(sub: "rider-1", scope: .control, ops: true)).split(separator: ".")
        XCTAssertEqual(refusal("\(elevated[0]).\(elevated[1]).\(genuine[2])")?.kind, .badSignature)

        // Truncated and empty signatures.
        XCTAssertEqual(refusal("\(genuine[0]).\(genuine[1]).\(genuine[2].dropLast(3))")?.kind, .badSignature)
        XCTAssertEqual(refusal("\(genuine[0]).\(genuine[1]).")?.kind, .badSignature)
    }

    // MARK: algorithms

    func testAlgNoneWithAndWithoutSignaturePart() {
        let header = b64(#"{"alg":"none","typ":"JWT"}"#)
        let payload = b64(#"{"sub":"rider-1","scope":"control","ops":true}"#)
        let expected = TokenError(.unsupportedAlgorithm, #"token alg "none" refused (only HS256 is accepted)"#)
        XCTAssertEqual(refusal("\(header).\(payload)."), expected)
        XCTAssertEqual(refusal("\(header).\(payload)"), expected)
        // Even carrying a valid HMAC, "none" is refused.
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":"none"}"#, payloadJSON: basicClaims)),
                       TokenError(.unsupportedAlgorithm, #"token alg "none" refused (only HS256 is accepted)"#))
    }

    func testAlgHS512AndOthers() {
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":"HS512","typ":"JWT"}"#, payloadJSON: basicClaims)),
                       TokenError(.unsupportedAlgorithm, #"token alg "HS512" refused (only HS256 is accepted)"#))
        for alg in ["hs256", "RS256", "HS256 ", ""] {
            let token = signer.sign(headerJSON: #"{"alg":"\#(alg)"}"#, payloadJSON: basicClaims)
            XCTAssertEqual(refusal(token)?.kind, .unsupportedAlgorithm, alg)
        }
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":256}"#, payloadJSON: basicClaims)),
                       TokenError(.unsupportedAlgorithm, "token alg is not a string (only HS256 is accepted)"))
        // A long hostile alg is cut short in the message that goes back to the client.
        let long = signer.sign(headerJSON: #"{"alg":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"}"#, payloadJSON: basicClaims)
        XCTAssertEqual(refusal(long)?.message, #"token alg "AAAAAAAAAAAAAAAA…" refused (only HS256 is accepted)"#)
    }

    func testMissingAlg() {
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"typ":"JWT"}"#, payloadJSON: basicClaims)),
                       TokenError(.unsupportedAlgorithm, "token header has no alg (only HS256 is accepted)"))
    }

    func testHeaderWithoutTypAndWithCrit() throws {
        XCTAssertEqual(try signer.verify(signer.sign(headerJSON: #"{"alg":"HS256"}"#, payloadJSON: basicClaims), now: now),
                       TokenClaims(sub: "rider-1", scope: .control))
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":"HS256","typ":7}"#, payloadJSON: basicClaims))?.kind, .malformed)
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":"HS256","crit":["exp"]}"#, payloadJSON: basicClaims))?.kind, .malformed)
    }

    // MARK: time

    func testExpiryWithLeeway() throws {
        func token(exp: Int64) -> String { signer.sign(TokenClaims(sub: "r", scope: .watch, exp: exp)) }
        XCTAssertEqual(refusal(token(exp: now - 31)), TokenError(.expired, "token expired"))
        XCTAssertEqual(refusal(token(exp: now - 30))?.kind, .expired)
        XCTAssertNil(refusal(token(exp: now - 29)))
        XCTAssertNil(refusal(token(exp: now + 3600)))
        XCTAssertNil(refusal(token(exp: .max)))
        XCTAssertEqual(refusal(token(exp: .min))?.kind, .expired)
    }

    func testNotBeforeWithLeeway() {
        func token(nbf: Int64) -> String { signer.sign(TokenClaims(sub: "r", scope: .watch, nbf: nbf)) }
        XCTAssertEqual(refusal(token(nbf: now + 31)), TokenError(.notYetValid, "token not yet valid"))
        XCTAssertNil(refusal(token(nbf: now + 30)))
        XCTAssertNil(refusal(token(nbf: now + 29)))
        XCTAssertNil(refusal(token(nbf: now - 3600)))
        XCTAssertEqual(refusal(token(nbf: .max))?.kind, .notYetValid)
    }

    // MARK: claim types

    func testClaimTypesAreStrict() throws {
        func claims(_ json: String) -> TokenError? { refusal(signer.sign(headerJSON: hs256Header, payloadJSON: json)) }
        let invalid: [String] = [
            #"{"sub":"a","scope":"control","ops":1}"#,
            #"{"sub":"a","scope":"control","ops":"true"}"#,
            #"{"sub":"a","scope":"control","ops":null}"#,
            #"{"sub":"a","scope":"watch","exp":true}"#,
            #"{"sub":"a","scope":"watch","exp":1700000100.5}"#,
            #"{"sub":"a","scope":"watch","exp":"1700000100"}"#,
            #"{"sub":"a","scope":"watch","exp":1e30}"#,
            #"{"sub":"a","scope":"watch","nbf":false}"#,
            #"{"sub":"a","scope":"watch","iat":[1]}"#,
            #"{"scope":"watch"}"#,
            #"{"sub":"","scope":"watch"}"#,
            #"{"sub":5,"scope":"watch"}"#,
            #"{"sub":"a"}"#,
            #"{"sub":"a","scope":"admin"}"#,
            #"{"sub":"a","scope":"WATCH"}"#,
            #"{"sub":"a","scope":"watch","rides":"r-1"}"#,
            #"{"sub":"a","scope":"watch","rides":["r-1",2]}"#,
        ]
        for json in invalid {
            XCTAssertEqual(claims(json)?.kind, .invalidClaims, json)
        }
        XCTAssertEqual(claims(#"{"sub":"a","scope":"control","ops":1}"#),
                       TokenError(.invalidClaims, "token ops must be true or false"))
        XCTAssertEqual(claims(#"{"sub":"a","scope":"watch","exp":true}"#),
                       TokenError(.invalidClaims, "token exp must be whole seconds since the epoch"))

        // Accepted: booleans, integers, empty rides list, unknown claims ignored, last duplicate wins.
        XCTAssertEqual(try signer.verify(signer.sign(headerJSON: hs256Header, payloadJSON:
            #"{"sub":"a","scope":"watch","ops":false,"rides":[],"exp":1700000100,"iss":"x","extra":{"k":[1]}}"#), now: now),
            TokenClaims(sub: "a", scope: .watch, rides: [], ops: false, exp: 1_700_000_100))
        XCTAssertEqual(try signer.verify(signer.sign(headerJSON: hs256Header, payloadJSON:
            #"{"sub":"a","scope":"watch","ops":true,"sub":"b"}"#), now: now),
            TokenClaims(sub: "b", scope: .watch, ops: true))
    }

    /// Header and payload go through RideCore's parser (no JSONSerialization): its depth
    /// bound and its number rules apply to tokens too.
    func testTokenJSONIsRideCoresParser() {
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        let nested = #"{"sub":"a","scope":"watch","x":\#(deep)}"#
        XCTAssertEqual(refusal(signer.sign(headerJSON: hs256Header, payloadJSON: nested)),
                       TokenError(.malformed, "token payload is not a JSON object"))
        XCTAssertEqual(refusal(signer.sign(headerJSON: #"{"alg":"HS256","x":\#(deep)}"#, payloadJSON: #"{"sub":"a","scope":"watch"}"#)),
                       TokenError(.malformed, "token header is not a JSON object"))
        // A number JSONSerialization would have rounded into an Int64 (1.0) is not whole seconds.
        XCTAssertEqual(refusal(signer.sign(headerJSON: hs256Header, payloadJSON: #"{"sub":"a","scope":"watch","exp":1700000100.0}"#))?.kind,
                       .invalidClaims)
    }

    // MARK: malformed input

    func testMalformedSegmentCount() {
        let good = signer.sign(TokenClaims(sub: "a", scope: .watch))
        XCTAssertEqual(refusal(""), TokenError(.malformed, "token must have three dot-separated parts"))
        XCTAssertEqual(refusal("abc")?.kind, .malformed)
        XCTAssertEqual(refusal(good + ".")?.kind, .malformed)
        XCTAssertEqual(refusal(good + ".x")?.kind, .malformed)
        XCTAssertEqual(refusal("..")?.kind, .malformed)
        let parts = good.split(separator: ".")
        XCTAssertEqual(refusal("\(parts[0]).\(parts[1])"), TokenError(.malformed, "token has no signature"))
        XCTAssertEqual(refusal(String(repeating: "A", count: TokenSigner.maxTokenLength + 1)),
                       TokenError(.malformed, "token too long"))
    }

    func testMalformedBase64() {
        let good = signer.sign(TokenClaims(sub: "a", scope: .watch))
        let parts = good.split(separator: ".").map(String.init)
        // Standard-alphabet characters, padding, whitespace and junk in each segment.
        for bad in ["+", "/", "=", " ", "*", "\n", "é"] {
            XCTAssertEqual(refusal("\(parts[0])\(bad).\(parts[1]).\(parts[2])")?.kind, .malformed, "header \(bad)")
            XCTAssertEqual(refusal("\(parts[0]).\(parts[1]).\(parts[2])\(bad)")?.kind, .malformed, "signature \(bad)")
            // The signature covers the payload's raw bytes and is checked first, so a corrupted
            // payload fails there; signed as-is, it fails base64 decoding.
            XCTAssertEqual(refusal("\(parts[0]).\(parts[1])\(bad).\(parts[2])")?.kind, .badSignature, "payload \(bad)")
            let input = "\(parts[0]).\(parts[1])\(bad)"
            XCTAssertEqual(refusal(input + "." + signer.signature(input)),
                           TokenError(.malformed, "token payload is not base64url"), "payload \(bad)")
        }
        XCTAssertEqual(refusal("\(parts[0])==.\(parts[1]).\(parts[2])"),
                       TokenError(.malformed, "token header is not base64url"))
        XCTAssertEqual(refusal("\(parts[0]).\(parts[1]).\(parts[2])="),
                       TokenError(.malformed, "token signature is not base64url"))
    }

    func testMalformedJSON() {
        XCTAssertEqual(refusal("\(b64("{not json")).\(b64(basicClaims)).AAAA"),
                       TokenError(.malformed, "token header is not a JSON object"))
        XCTAssertEqual(refusal("\(b64(#"["HS256"]"#)).\(b64(basicClaims)).AAAA")?.kind, .malformed)
        XCTAssertEqual(refusal("\(b64(#""HS256""#)).\(b64(basicClaims)).AAAA")?.kind, .malformed)
        XCTAssertEqual(refusal(".\(b64(basicClaims)).AAAA")?.kind, .malformed)
        for payload in ["{not json", #"["sub"]"#, #""x""#, "", "null", #"{"sub":"a","scope":"watch""#] {
            XCTAssertEqual(refusal(signer.sign(headerJSON: hs256Header, payloadJSON: payload)),
                           TokenError(.malformed, "token payload is not a JSON object"), payload)
        }
    }

    func testRandomSecret() {
        let a = TokenSigner.randomSecret()
        let b = TokenSigner.randomSecret()
        XCTAssertEqual(a.count, 32)
        XCTAssertEqual(b.count, 32)
        XCTAssertNotEqual(a, b)
        let claims = TokenClaims(sub: "a", scope: .control)
        XCTAssertEqual(try TokenSigner(secret: a).verify(TokenSigner(secret: a).sign(claims), now: now), claims)
        XCTAssertEqual(refusal(TokenSigner(secret: a).sign(claims), signer: TokenSigner(secret: b))?.kind, .badSignature)
    }
}
