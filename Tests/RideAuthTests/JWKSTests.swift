import Foundation
import XCTest
import RideCore
@testable import RideAuth

/// Keys made once per run (RSA generation is the slow part), then only read; the test that
/// verifies from several threads reads tokens made beforehand, never these.
enum Keys {
    nonisolated(unsafe) static let rsa = TestKeyPair(.rsa(bits: 2048))
    nonisolated(unsafe) static let p256 = TestKeyPair(.p256)
    nonisolated(unsafe) static let ed25519 = TestKeyPair(.ed25519)
    // Keys of the same types that the verifier does not know.
    nonisolated(unsafe) static let otherRSA = TestKeyPair(.rsa(bits: 2048))
    nonisolated(unsafe) static let otherP256 = TestKeyPair(.p256)
    nonisolated(unsafe) static let otherEd25519 = TestKeyPair(.ed25519)

    /// The provider's published set: kid "r1" RSA, "e1" P-256, "o1" Ed25519.
    static func providerSet() throws -> KeySet {
        try KeySet(KeySet.jwks(jwks([rsa.jwk(kid: "r1"), p256.jwk(kid: "e1"), ed25519.jwk(kid: "o1")]), name: "test.jwks"))
    }
}

let riderClaims = #"{"sub":"rider-1","scope":"control","exp":\#(now + 600),"iat":\#(now)}"#
let riderExpected = TokenClaims(sub: "rider-1", scope: .control, exp: now + 600, iat: now)

func refusal(_ token: String, _ verifier: TokenVerifier, at time: Int64 = now) -> TokenError? {
    do {
        _ = try verifier.verify(token, now: time)
        return nil
    } catch {
        return error
    }
}

final class JWKSVerifyTests: XCTestCase {
    /// Any issuer unless a test says otherwise: these tests are about keys and signatures.
    func verifier(secret: [UInt8]? = testSecret, policy: TokenVerifier.Policy = .anyIssuerAllowed) throws -> TokenVerifier {
        TokenVerifier(secret: secret, keys: try Keys.providerSet(), policy: policy)
    }

    func testEachAlgorithmAcceptedByKid() throws {
        let v = try verifier()
        for (key, kid) in [(Keys.rsa, "r1"), (Keys.p256, "e1"), (Keys.ed25519, "o1")] {
            XCTAssertEqual(try v.verify(key.token(kid: kid, payload: riderClaims), now: now), riderExpected, key.alg)
        }
        // HS256 with the shared secret still works beside them.
        let hs = TokenSigner(secret: testSecret).sign(riderExpected)
        XCTAssertEqual(try v.verify(hs, now: now), riderExpected)
    }

    func testForeignKeyUnderAKnownKidIsABadSignature() throws {
        let v = try verifier()
        for (key, kid) in [(Keys.otherRSA, "r1"), (Keys.otherP256, "e1"), (Keys.otherEd25519, "o1")] {
            XCTAssertEqual(refusal(key.token(kid: kid, payload: riderClaims), v)?.kind, .badSignature, key.alg)
        }
    }

    func testUnknownOrMissingKid() throws {
        let v = try verifier()
        let unknown = refusal(Keys.rsa.token(kid: "r9", payload: riderClaims), v)
        XCTAssertEqual(unknown?.kind, .unknownKey)
        XCTAssertEqual(unknown?.message, #"token kid "r9" is not a known key"#)
        // No kid and no key without one: never "try every key".
        XCTAssertEqual(refusal(Keys.rsa.token(kid: nil, payload: riderClaims), v)?.kind, .unknownKey)
        XCTAssertEqual(refusal(Keys.rsa.token(header: #"{"alg":"RS256","kid":7}"#, payload: riderClaims), v)?.kind, .malformed)
    }

    /// The classic confusion: the attacker HMACs with the public key's bytes as the secret.
    func testHS256WithThePublicKeyAsSecretIsRefused() throws {
        let pem = Keys.rsa.pem()
        let forger = TokenSigner(secret: pem)
        // Naming the RSA key's kid: the key fixes RS256, HS256 is refused before any MAC.
        let named = forger.sign(headerJSON: #"{"alg":"HS256","kid":"r1"}"#, payloadJSON: riderClaims)
        let e = refusal(named, try verifier())
        XCTAssertEqual(e?.kind, .unsupportedAlgorithm)
        XCTAssertEqual(e?.message, #"token alg HS256 does not match key "r1" (RS256)"#)
        // Without kid it is checked with the real secret, and fails there.
        let unnamed = forger.sign(headerJSON: #"{"alg":"HS256"}"#, payloadJSON: riderClaims)
        XCTAssertEqual(refusal(unnamed, try verifier())?.kind, .badSignature)
        // With no secret configured HS256 is not accepted at all.
        let noSecret = try verifier(secret: nil)
        XCTAssertEqual(refusal(unnamed, noSecret)?.kind, .unsupportedAlgorithm)
        XCTAssertEqual(refusal(unnamed, noSecret)?.message, "token alg HS256 refused (accepted: RS256, ES256, EdDSA)")
        // Even a PEM-configured key without kid is never used as an HMAC secret.
        let pemOnly = TokenVerifier(secret: testSecret, keys: try KeySet([PublicKey.pem(pem, name: "k.pem")]))
        XCTAssertEqual(refusal(unnamed, pemOnly)?.kind, .badSignature)
    }

    func testHeaderAlgMustBeTheKeysAlgorithm() throws {
        let v = try verifier()
        // RS256 header on the EC key's kid, signed with the EC key (or anything): refused by alg.
        for (key, kid, alg) in [(Keys.p256, "e1", "RS256"), (Keys.rsa, "r1", "ES256"), (Keys.p256, "e1", "EdDSA"),
                                (Keys.ed25519, "o1", "ES256")] {
            let e = refusal(key.token(kid: kid, payload: riderClaims, alg: alg), v)
            XCTAssertEqual(e?.kind, .unsupportedAlgorithm, "\(alg) on \(kid)")
            XCTAssertTrue(e?.message.contains("does not match key \"\(kid)\"") ?? false, e?.message ?? "accepted")
        }
        for alg in ["none", "RS512", "PS256", "ES384", "Ed25519", ""] {
            XCTAssertEqual(refusal(Keys.rsa.token(kid: "r1", payload: riderClaims, alg: alg), v)?.kind, .unsupportedAlgorithm, alg)
        }
        XCTAssertEqual(refusal(Keys.rsa.token(header: #"{"kid":"r1"}"#, payload: riderClaims), v)?.kind, .unsupportedAlgorithm)
    }

    func testSignatureEncodingIsJOSE() throws {
        let v = try verifier()
        // ES256 with libcrypto's DER signature instead of raw r‖s: refused.
        let input = b64(Array(#"{"alg":"ES256","kid":"e1"}"#.utf8)) + "." + b64(Array(riderClaims.utf8))
        let der = input + "." + b64(Keys.p256.signDER(Array(input.utf8)))
        XCTAssertEqual(refusal(der, v)?.kind, .badSignature)
        XCTAssertEqual(refusal(der, v)?.message.contains("looks DER-encoded"), true, "the refusal names the encoding")
        let raw = input + "." + b64(Keys.p256.sign(Array(input.utf8)))
        XCTAssertEqual(try v.verify(raw, now: now), riderExpected)
        // Truncated or padded signatures of each kind.
        for (key, kid) in [(Keys.rsa, "r1"), (Keys.p256, "e1"), (Keys.ed25519, "o1")] {
            let good = key.token(kid: kid, payload: riderClaims)
            let parts = good.split(separator: ".").map(String.init)
            let sig = Base64URL.decode(parts[2])!
            for bad in [Array(sig.dropLast()), sig + [0], [UInt8](repeating: 0, count: sig.count), []] {
                let token = parts[0] + "." + parts[1] + "." + b64(bad)
                XCTAssertEqual(refusal(token, v)?.kind, .badSignature, "\(key.alg) \(bad.count) bytes")
            }
            XCTAssertEqual(refusal(parts[0] + "." + parts[1], v)?.kind, .malformed)
        }
    }

    func testTamperedPayloadOrHeader() throws {
        let v = try verifier()
        for (key, kid) in [(Keys.rsa, "r1"), (Keys.p256, "e1"), (Keys.ed25519, "o1")] {
            let parts = key.token(kid: kid, payload: riderClaims).split(separator: ".").map(String.init)
            let opsPayload = b64(Array(#"{"sub":"rider-1","scope":"control","ops":true,"exp":\#(now + 600)}"#.utf8))
            XCTAssertEqual(refusal(parts[0] + "." + opsPayload + "." + parts[2], v)?.kind, .badSignature, key.alg)
            let otherHeader = b64(Array(#"{"alg":"\#(key.alg)","kid":"\#(kid)"}"#.utf8))
            XCTAssertEqual(refusal(otherHeader + "." + parts[1] + "." + parts[2], v)?.kind, .badSignature, key.alg)
        }
    }

    func testClaimsAndTimes() throws {
        let v = try verifier()
        let expired = Keys.p256.token(kid: "e1", payload: #"{"sub":"a","scope":"watch","exp":\#(now - 31)}"#)
        XCTAssertEqual(refusal(expired, v)?.kind, .expired)
        let inLeeway = Keys.p256.token(kid: "e1", payload: #"{"sub":"a","scope":"watch","exp":\#(now - 29)}"#)
        XCTAssertNil(refusal(inLeeway, v))
        let early = Keys.p256.token(kid: "e1", payload: #"{"sub":"a","scope":"watch","exp":\#(now + 600),"nbf":\#(now + 31)}"#)
        XCTAssertEqual(refusal(early, v)?.kind, .notYetValid)
        let forever = Keys.p256.token(kid: "e1", payload: #"{"sub":"a","scope":"watch"}"#)
        XCTAssertEqual(refusal(forever, v)?.message, "token has no exp")
        let oauthScope = Keys.p256.token(kid: "e1", payload: #"{"sub":"a","scope":"openid profile","exp":\#(now + 600)}"#)
        XCTAssertEqual(refusal(oauthScope, v)?.kind, .invalidClaims)
    }

    func testIssuerAudienceAndNamespace() throws {
        let v = try verifier(policy: .init(issuer: "https://idp.example/", audience: "ridepush",
                                           claimNamespace: "https://rides.example/"))
        func token(_ payload: String) -> String { Keys.ed25519.token(kid: "o1", payload: payload) }
        let base = #""sub":"u-1","exp":\#(now + 600),"scope":"openid","https://rides.example/scope":"watch","https://rides.example/rides":["r-1"]"#
        let good = token(#"{"iss":"https://idp.example/","aud":["other","ridepush"],\#(base)}"#)
        XCTAssertEqual(try v.verify(good, now: now), TokenClaims(sub: "u-1", scope: .watch, rides: ["r-1"], exp: now + 600))
        let single = token(#"{"iss":"https://idp.example/","aud":"ridepush",\#(base)}"#)
        XCTAssertNoThrow(try v.verify(single, now: now))
        XCTAssertEqual(refusal(token(#"{"iss":"https://evil.example/","aud":"ridepush",\#(base)}"#), v)?.message,
                       "token iss is not the configured issuer")
        XCTAssertEqual(refusal(token(#"{"aud":"ridepush",\#(base)}"#), v)?.kind, .invalidClaims)
        XCTAssertEqual(refusal(token(#"{"iss":"https://idp.example/","aud":["other"],\#(base)}"#), v)?.message,
                       "token aud does not name the configured audience")
        // The bare "ops" is not read when a namespace is set: it may be the provider's own claim.
        let bareOps = token(#"{"iss":"https://idp.example/","aud":"ridepush","ops":true,\#(base)}"#)
        XCTAssertEqual(try v.verify(bareOps, now: now).ops, false)
        // HS256 tokens are RidePush's own: no iss/aud asked of them.
        XCTAssertEqual(try v.verify(TokenSigner(secret: testSecret).sign(riderExpected), now: now), riderExpected)
    }

    /// A shared key set (Firebase's, Google's) signs for every project: a token another
    /// project minted, `ops` and all, is refused for its iss or its aud.
    func testAnotherIssuersTokenIsRefused() throws {
        let v = try verifier(policy: .init(issuer: "https://idp.example/", audience: "ridepush"))
        let ours = Keys.rsa.token(kid: "r1", payload: #"{"iss":"https://idp.example/","aud":"ridepush","sub":"ops-1","scope":"control","ops":true,"exp":\#(now + 600)}"#)
        XCTAssertEqual(try v.verify(ours, now: now).ops, true)
        let theirs = Keys.rsa.token(kid: "r1", payload: #"{"iss":"https://other-project.example/","aud":"other-app","sub":"ops-1","scope":"control","ops":true,"exp":\#(now + 600)}"#)
        XCTAssertEqual(refusal(theirs, v)?.message, "token iss is not the configured issuer")
        let otherApp = Keys.rsa.token(kid: "r1", payload: #"{"iss":"https://idp.example/","aud":"other-app","sub":"ops-1","scope":"control","ops":true,"exp":\#(now + 600)}"#)
        XCTAssertEqual(refusal(otherApp, v)?.message, "token aud does not name the configured audience")
    }

    /// Without both pins (and without saying "any issuer") no identity-provider token is
    /// accepted at all, whatever it carries; RidePush's own HS256 tokens are not affected.
    func testAPolicyWithoutIssuerAndAudienceRefusesTheProvidersTokens() throws {
        let signed = Keys.ed25519.token(kid: "o1", payload: #"{"iss":"https://idp.example/","aud":"ridepush","sub":"rider-1","scope":"control","exp":\#(now + 600)}"#)
        let unpinned = try verifier(policy: .init())
        XCTAssertEqual(refusal(signed, unpinned)?.kind, .invalidClaims)
        XCTAssertEqual(refusal(signed, unpinned)?.message,
                       "identity-provider tokens are refused: no issuer and audience configured (--jwt-issuer, --jwt-audience, or --jwt-any-issuer to accept any)")
        XCTAssertEqual(TokenVerifier.Policy(issuer: "https://idp.example/").unpinned, "audience")
        XCTAssertEqual(TokenVerifier.Policy(audience: "ridepush").unpinned, "issuer")
        XCTAssertEqual(refusal(signed, try verifier(policy: .init(issuer: "https://idp.example/")))?.kind, .invalidClaims)
        XCTAssertNil(refusal(signed, try verifier(policy: .init(issuer: "https://idp.example/", audience: "ridepush"))))
        XCTAssertNil(refusal(signed, try verifier(policy: .anyIssuerAllowed)))
        // A pin given beside "any issuer" still holds.
        XCTAssertEqual(refusal(signed, try verifier(policy: .init(audience: "elsewhere", anyIssuer: true)))?.kind, .invalidClaims)
        XCTAssertEqual(try unpinned.verify(TokenSigner(secret: testSecret).sign(riderExpected), now: now), riderExpected)
    }

    func testPEMKeyVerifiesTokensWithoutKid() throws {
        for key in [Keys.rsa, Keys.p256, Keys.ed25519] {
            let v = TokenVerifier(secret: nil, keys: try KeySet([PublicKey.pem(key.pem(), name: "k.pem")]), policy: .anyIssuerAllowed)
            XCTAssertEqual(try v.verify(key.token(kid: nil, payload: riderClaims), now: now), riderExpected, key.alg)
            XCTAssertEqual(refusal(key.token(kid: "k", payload: riderClaims), v)?.kind, .unknownKey, key.alg)
        }
    }
}

final class KeySetLoadTests: XCTestCase {
    func loadError(_ members: [String]) -> String? {
        do {
            _ = try KeySet(KeySet.jwks(jwks(members), name: "idp.jwks"))
            return nil
        } catch {
            return error.message
        }
    }

    func testKindsAndSizes() throws {
        let set = try Keys.providerSet()
        XCTAssertEqual(set.keys.map(\.algorithm), [.rs256, .es256, .edDSA])
        XCTAssertEqual(set.keys.map(\.bits), [2048, 256, 256])
        XCTAssertEqual(set.key(kid: "e1")?.algorithm, .es256)
        XCTAssertNil(set.key(kid: nil))
        XCTAssertNil(set.key(kid: "E1"))
    }

    func testSmallRSARefused() {
        let small = TestKeyPair(.rsa(bits: 1024))
        XCTAssertEqual(loadError([small.jwk(kid: "s")]), #"idp.jwks key 1 (kid "s"): RSA key of 1024 bits; RS256 needs at least 2048"#)
        XCTAssertThrowsError(try PublicKey.pem(small.pem(), name: "small.pem"))
    }

    /// A real 2048-bit modulus with e = 1: every "signature" is its own message, so anyone
    /// could sign. Refused whole, as a short key is, in a key set and as PEM; so is an even e
    /// (2, 65536), while e = 3 and 65537 load.
    func testRSAExponentMustBeOddAndAtLeastThree() throws {
        let n = Base64URL.decode(try JSON.parse("{" + Keys.rsa.jwkMembers() + "}")["n"]!.string!)!
        func member(_ e: [UInt8]) -> String { #"{"kid":"w","kty":"RSA","n":"\#(b64(n))","e":"\#(b64(e))"}"# }
        let why = #"idp.jwks key 1 (kid "w"): RSA public exponent must be odd and at least 3 (65537 in practice)"#
        XCTAssertEqual(loadError([member([1])]), why)
        XCTAssertEqual(loadError([member([2])]), why)
        XCTAssertEqual(loadError([member([1, 0, 0])]), why)  // 65536
        XCTAssertNil(loadError([member([3])]))
        XCTAssertNil(loadError([member([1, 0, 1])]))
        // The whole set is refused, not just the weak key: a reload keeps the keys in force.
        XCTAssertEqual(loadError([Keys.p256.jwk(kid: "e1"), member([1])]),
                       #"idp.jwks key 2 (kid "w"): RSA public exponent must be odd and at least 3 (65537 in practice)"#)
        XCTAssertThrowsError(try PublicKey.pem(rsaPublicPEM(n: n, e: [1]), name: "weak.pem")) { error in
            XCTAssertEqual((error as! KeyError).message, "weak.pem: RSA public exponent must be odd and at least 3 (65537 in practice)")
        }
        XCTAssertEqual(try PublicKey.pem(rsaPublicPEM(n: n, e: [1, 0, 1]), name: "good.pem").algorithm, .rs256)
    }

    func testUnsupportedCurvesAndTypes() {
        let p384 = TestKeyPair(.p384)
        XCTAssertEqual(loadError([p384.jwk(kid: "x")]), #"idp.jwks key 1 (kid "x"): EC curve P-384 is not supported (P-256 only)"#)
        XCTAssertEqual(try? PublicKey.pem(p384.pem(), name: "p384.pem").algorithm, nil)
        XCTAssertNotNil(loadError([#"{"kty":"oct","k":"c2VjcmV0"}"#]))
        XCTAssertEqual(loadError([#"{"kty":"oct"}"#]), #"idp.jwks key 1: key type "oct" is not supported (RSA, EC P-256, OKP Ed25519)"#)
        XCTAssertEqual(loadError([#"{"kty":"OKP","crv":"X25519","x":"\#(b64([UInt8](repeating: 9, count: 32)))"}"#]),
                       "idp.jwks key 1: OKP curve X25519 is not supported (Ed25519 only)")
    }

    func testPointOffTheCurveRefused() {
        let jwk = try! JSON.parse("{" + Keys.p256.jwkMembers() + "}")
        let x = jwk["x"]!.string!, y = jwk["y"]!.string!
        // The last bit of y flipped: (x, y') is not on P-256 (y' = p - y would be).
        var bytes = Base64URL.decode(y)!
        bytes[31] ^= 1
        let off = #"{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(b64(bytes))"}"#
        XCTAssertEqual(loadError([off]), "idp.jwks key 1: x, y is not a point on P-256")
        XCTAssertNil(loadError([#"{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(y)"}"#]))
        XCTAssertEqual(loadError([#"{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}"#]), "idp.jwks key 1: P-256 x and y must be 32 bytes each")
    }

    func testPrivateMaterialAlgAndUse() {
        let member = Keys.rsa.jwkMembers()
        XCTAssertEqual(loadError([#"{"kid":"p",\#(member),"d":"AQAB"}"#]),
                       #"idp.jwks key 1 (kid "p"): holds private key material ("d"); give the public key only"#)
        XCTAssertEqual(loadError([#"{"kid":"a",\#(member),"alg":"PS256"}"#]),
                       #"idp.jwks key 1 (kid "a"): "alg" "PS256" is not supported for a RSA key (only RS256)"#)
        XCTAssertEqual(loadError([#"{"kid":"u",\#(member),"use":"wrap"}"#]), #"idp.jwks key 1 (kid "u"): "use" is not "sig""#)
        // An encryption key is skipped, but not one that leaks its private half.
        XCTAssertEqual(loadError([#"{"kid":"p",\#(member),"use":"enc","d":"AQAB"}"#]),
                       #"idp.jwks key 1 (kid "p"): holds private key material ("d"); give the public key only"#)
        XCTAssertEqual(loadError([#"{"kid":"u",\#(member),"use":"enc"}"#]), #"idp.jwks: no signing keys (every key is an encryption key)"#)
        XCTAssertNil(loadError([#"{"kid":"ok",\#(member),"alg":"RS256","use":"sig"}"#]))
    }

    /// Keycloak publishes its realm's encryption key (RSA-OAEP, `"use": "enc"`) beside the
    /// signing keys: the set loads without it, says so once, and each signing key verifies.
    func testAKeycloakShapedSetSkipsItsEncryptionKeys() throws {
        let rsa = Keys.rsa.jwkMembers(), ec = Keys.p256.jwkMembers(), other = Keys.otherRSA.jwkMembers()
        let document = jwks([
            #"{"kid":"kc-rs","use":"sig","alg":"RS256",\#(rsa),"x5c":["MIIC"],"x5t":"abc","x5t#S256":"def"}"#,
            #"{"kid":"kc-enc","use":"enc","alg":"RSA-OAEP",\#(other)}"#,
            #"{"kid":"kc-es","use":"sig","alg":"ES256",\#(ec)}"#,
            #"{"kid":"kc-oaep256","alg":"RSA-OAEP-256",\#(other)}"#,
            #"{"kid":"kc-ecdh","alg":"ECDH-ES+A256KW",\#(Keys.otherP256.jwkMembers())}"#,
        ])
        let path = NSTemporaryDirectory() + "keycloak-\(UUID().uuidString).jwks"
        FileManager.default.createFile(atPath: path, contents: Data(document))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let set = try KeySet.load(jwksFile: path, publicKeyFile: nil)
        XCTAssertEqual(set.keys.map(\.kid), ["kc-rs", "kc-es"])
        XCTAssertEqual(set.skipped, [
            #"\#(path) key 2 (kid "kc-enc"): skipped, "use": "enc"; only signing keys verify tokens"#,
            #"\#(path) key 4 (kid "kc-oaep256"): skipped, "alg": "RSA-OAEP-256" is an encryption algorithm; only signing keys verify tokens"#,
            #"\#(path) key 5 (kid "kc-ecdh"): skipped, "alg": "ECDH-ES+A256KW" is an encryption algorithm; only signing keys verify tokens"#,
        ])
        let v = TokenVerifier(secret: nil, keys: set, policy: .anyIssuerAllowed)
        XCTAssertEqual(try v.verify(Keys.rsa.token(kid: "kc-rs", payload: riderClaims), now: now), riderExpected)
        XCTAssertEqual(try v.verify(Keys.p256.token(kid: "kc-es", payload: riderClaims), now: now), riderExpected)
        // A token naming the encryption key's kid is refused: that key verifies nothing.
        XCTAssertNotNil(refusal(Keys.otherRSA.token(kid: "kc-enc", payload: riderClaims), v))
    }

    func testDocumentShapeAndKids() {
        XCTAssertEqual(loadError([Keys.rsa.jwk(kid: "a"), Keys.p256.jwk(kid: "a")]), #"two keys have kid "a"; a kid must name one key"#)
        XCTAssertEqual(loadError([Keys.rsa.jwk(kid: nil), Keys.p256.jwk(kid: nil)]), "more than one key without a kid; tokens could not choose")
        XCTAssertEqual(loadError([]), #"idp.jwks: the "keys" list is empty"#)
        XCTAssertEqual(loadError(["7"]), "idp.jwks key 1: not a JSON object")
        XCTAssertThrowsError(try KeySet.jwks(Array("{\"keys\":[".utf8), name: "cut.jwks")) { error in
            XCTAssertTrue((error as! KeyError).message.hasPrefix("cut.jwks: invalid JSON at line 1"), "\(error)")
        }
        XCTAssertThrowsError(try KeySet.jwks(Array("[]".utf8), name: "list.jwks"))
        XCTAssertThrowsError(try PublicKey.pem(Array("not a key".utf8), name: "junk.pem")) { error in
            XCTAssertEqual((error as! KeyError).message, "junk.pem: not a PEM public key (expected -----BEGIN PUBLIC KEY-----)")
        }
        XCTAssertThrowsError(try KeySet.load(jwksFile: "/nonexistent/ridepush.jwks", publicKeyFile: nil)) { error in
            XCTAssertEqual((error as! KeyError).message, "cannot read /nonexistent/ridepush.jwks")
        }
    }
}

final class KeyRotationTests: XCTestCase {
    func testReloadSwapsTheWholeSet() throws {
        let before = try KeySet(KeySet.jwks(jwks([Keys.rsa.jwk(kid: "2025"), Keys.p256.jwk(kid: "e1")]), name: "a"))
        let after = try KeySet(KeySet.jwks(jwks([Keys.otherRSA.jwk(kid: "2026"), Keys.p256.jwk(kid: "e1")]), name: "b"))
        let v = TokenVerifier(secret: nil, keys: before, policy: .anyIssuerAllowed)
        let old = Keys.rsa.token(kid: "2025", payload: riderClaims)
        let new = Keys.otherRSA.token(kid: "2026", payload: riderClaims)
        let kept = Keys.p256.token(kid: "e1", payload: riderClaims)
        // A session verified before the rotation holds its claims, not a key.
        let session = try v.verify(old, now: now)
        XCTAssertEqual(refusal(new, v)?.kind, .unknownKey)

        let replaced = v.reload(after)
        XCTAssertEqual(replaced.keys.compactMap(\.kid), ["2025", "e1"])
        XCTAssertEqual(try v.verify(new, now: now), riderExpected)
        XCTAssertEqual(try v.verify(kept, now: now), riderExpected)
        XCTAssertEqual(refusal(old, v)?.kind, .unknownKey)
        XCTAssertEqual(session, riderExpected)
    }

    func testReloadFromFilesKeepsTheOldSetWhenTheNewOneFails() throws {
        let path = NSTemporaryDirectory() + "ridepush-rotate-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(jwks([Keys.rsa.jwk(kid: "old")])).write(to: URL(fileURLWithPath: path))
        let v = TokenVerifier(secret: nil, keys: try KeySet.load(jwksFile: path, publicKeyFile: nil), policy: .anyIssuerAllowed)
        let old = Keys.rsa.token(kid: "old", payload: riderClaims)
        let new = Keys.ed25519.token(kid: "new", payload: riderClaims)
        // A half-written file: refused, and the old key still verifies.
        try Data(#"{"keys":[{"kid":"new","kty":"OKP""#.utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try v.reload(jwksFile: path, publicKeyFile: nil))
        XCTAssertEqual(try v.verify(old, now: now), riderExpected)
        // The provider's rotation: new key published beside the old, then the old dropped.
        try Data(jwks([Keys.rsa.jwk(kid: "old"), Keys.ed25519.jwk(kid: "new")])).write(to: URL(fileURLWithPath: path))
        try v.reload(jwksFile: path, publicKeyFile: nil)
        XCTAssertNil(refusal(old, v))
        XCTAssertNil(refusal(new, v))
        try Data(jwks([Keys.ed25519.jwk(kid: "new")])).write(to: URL(fileURLWithPath: path))
        try v.reload(jwksFile: path, publicKeyFile: nil)
        XCTAssertEqual(refusal(old, v)?.kind, .unknownKey)
        XCTAssertNil(refusal(new, v))
    }

    /// Verifies on several threads while another thread rotates: every answer is one of the two
    /// sets' answers (accepted, or unknown kid), never a bad signature or a crash.
    func testReloadUnderConcurrentVerifies() throws {
        let a = try KeySet(KeySet.jwks(jwks([Keys.ed25519.jwk(kid: "a")]), name: "a"))
        let b = try KeySet(KeySet.jwks(jwks([Keys.otherEd25519.jwk(kid: "b")]), name: "b"))
        let v = TokenVerifier(secret: nil, keys: a, policy: .anyIssuerAllowed)
        let tokens = [Keys.ed25519.token(kid: "a", payload: riderClaims), Keys.otherEd25519.token(kid: "b", payload: riderClaims)]
        let outcomes = Locked([String: Int]())
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<400 {
                if worker == 0 {
                    v.reload(i % 2 == 0 ? b : a)
                    continue
                }
                let result: String
                do throws(TokenError) {
                    _ = try v.verify(tokens[i % 2], now: now)
                    result = "accepted"
                } catch {
                    result = error.kind.rawValue
                }
                outcomes.withLock { $0[result, default: 0] += 1 }
            }
        }
        let seen = outcomes.withLock { $0 }
        XCTAssertEqual(Set(seen.keys).subtracting(["accepted", "unknownKey"]), [], "\(seen)")
        XCTAssertEqual(seen.values.reduce(0, +), 1200)
    }
}

final class VerifyCommandTests: XCTestCase {
    func testVerifyPrintsClaimsOrTheRefusal() throws {
        let path = NSTemporaryDirectory() + "ridepush-jwks-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(jwks([Keys.p256.jwk(kid: "e1")])).write(to: URL(fileURLWithPath: path))
        let token = Keys.p256.token(kid: "e1", payload: riderClaims)

        // As the server: the provider's tokens need issuer and audience, or "any" said outright.
        let unpinned = tokenCommand(arguments: ["--verify", token, "--jwks", path], environment: [:], now: now)
        XCTAssertEqual(unpinned.status, 1, unpinned.output)
        XCTAssertTrue(unpinned.output.contains("no issuer and audience configured"), unpinned.output)

        let ok = tokenCommand(arguments: ["--verify", token, "--jwks", path, "--jwt-any-issuer"], environment: [:], now: now)
        XCTAssertEqual(ok.status, 0, ok.output)
        XCTAssertEqual(ok.output, #"{"exp":\#(now + 600),"iat":\#(now),"scope":"control","sub":"rider-1"}"# + "\n")

        let foreign = tokenCommand(arguments: ["--verify", Keys.otherP256.token(kid: "e1", payload: riderClaims), "--jwks-file", path,
                                                           "--jwt-any-issuer"], environment: [:], now: now)
        XCTAssertEqual(foreign.status, 1)
        XCTAssertEqual(foreign.output, "ridepush token: refused (badSignature): token signature does not match\n")

        let late = tokenCommand(arguments: ["--verify", token, "--jwks", path, "--jwt-any-issuer"], environment: [:], now: now + 700)
        XCTAssertEqual(late.output, "ridepush token: refused (expired): token expired\n")

        let nothing = tokenCommand(arguments: ["--verify", token], environment: [:], now: now)
        XCTAssertEqual(nothing.status, 2)
        XCTAssertTrue(nothing.output.hasPrefix("ridepush token: nothing to verify with"), nothing.output)
        let missing = tokenCommand(arguments: ["--verify", token, "--jwks", path + ".gone"], environment: [:], now: now)
        XCTAssertEqual(missing.output, "ridepush token: cannot read \(path).gone\n")
        let mixed = tokenCommand(arguments: ["--verify", token, "--control", "--jwks", path], environment: [:], now: now)
        XCTAssertEqual(mixed.status, 2)
        let keysWithoutVerify = tokenCommand(arguments: ["--control", "--sub", "a", "--jwks", path],
                                             environment: ["RIDEPUSH_JWT_SECRET": String(decoding: testSecret, as: UTF8.self)], now: now)
        XCTAssertEqual(keysWithoutVerify.status, 2)
        XCTAssertTrue(keysWithoutVerify.output.contains("--jwks-file goes with --verify"), keysWithoutVerify.output)
    }
}
