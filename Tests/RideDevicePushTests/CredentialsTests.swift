import Foundation
import RideAuth
import RideCore
import Testing
@testable import RideDevicePush

// The tokens RidePush shows Apple and Google, checked with RideAuth's verifier against the
// public half of keys made for this run, and the caches that decide when to sign again,
// driven by a manual clock.

fileprivate func parts(_ jwt: String) -> (header: [String: JSON], claims: [String: JSON], input: [UInt8], signature: [UInt8])? {
    let p = jwt.split(separator: ".", omittingEmptySubsequences: false)
    guard p.count == 3, let h = Base64URL.decode(p[0]), let c = Base64URL.decode(p[1]), let s = Base64URL.decode(p[2]),
          let header = (try? JSON.parse(h))?.object, let claims = (try? JSON.parse(c))?.object else { return nil }
    return (header, claims, Array("\(p[0]).\(p[1])".utf8), s)
}

@Suite struct APNsProviderTokenTests {
    static let credentials = try! APNsCredentials(keyID: "ABC123DEFG", teamID: "DEF123GHIJ",
                                                  key: SigningKey.pem(Array(TestKey.p256.privatePEM.utf8), name: "AuthKey.p8"))

    @Test func anES256TokenWithKidIssAndIatThatThePublicKeyVerifies() throws {
        let jwt = try #require(Self.credentials.token(issuedAt: 1_764_430_000))
        let p = try #require(parts(jwt))
        #expect(p.header == ["alg": .string("ES256"), "kid": .string("ABC123DEFG")])
        #expect(p.claims["iss"] == .string("DEF123GHIJ"))
        #expect(p.claims["iat"]?.int == 1_764_430_000)
        #expect(p.claims.count == 2)
        // Raw r‖s, not DER: exactly 64 bytes, as JWS and Apple want.
        #expect(p.signature.count == 64)
        let pub = try PublicKey.pem(Array(TestKey.p256.publicPEM.utf8), name: "pub")
        #expect(pub.verify(signature: p.signature, message: p.input))
        var forged = p.signature
        forged[10] ^= 1
        #expect(!pub.verify(signature: forged, message: p.input))
    }

    @Test func keysThatAreNotAnAPNsKeyAreRefused() throws {
        let rsa = try SigningKey.pem(Array(TestKey.rsa.privatePEM.utf8), name: "rsa.pem")
        #expect(throws: KeyError("the APNs key must be an EC P-256 key (ES256), the .p8 file Apple gives")) {
            try APNsCredentials(keyID: "K", teamID: "T", key: rsa)
        }
        #expect(throws: KeyError("p384.p8: EC key not on P-256 (ES256 needs P-256)")) {
            try SigningKey.pem(Array(TestKey.p384.privatePEM.utf8), name: "p384.p8")
        }
        #expect(throws: KeyError("x.p8: not a PEM private key (expected -----BEGIN PRIVATE KEY-----)")) {
            try SigningKey.pem(Array(TestKey.p256.publicPEM.utf8), name: "x.p8")
        }
    }

    @Test func theCacheReusesATokenForTwentyMinutesAndMoreAndRenewsItBeforeTheHour() throws {
        let clock = ManualClock(1_764_430_000_250)
        let cache = ProviderTokenCache(Self.credentials, clock: clock)
        let first = try #require(cache.token())
        #expect(parts(first)?.claims["iat"]?.int == 1_764_430_000)
        for minutes: Int64 in [1, 19, 20, 49] {
            clock.set(1_764_430_000_000 + minutes * 60_000)
            #expect(cache.token() == first, "after \(minutes) min")
        }
        clock.set(1_764_430_000_000 + 50 * 60_000)
        let second = try #require(cache.token())
        #expect(second != first)
        #expect(parts(second)?.claims["iat"]?.int == Int64(1_764_433_000))
        clock.advance(seconds: 60)
        #expect(cache.token() == second)
    }

    @Test func anExpiredProviderTokenIsReplacedOnceForEveryTransferThatSawIt() throws {
        let clock = ManualClock(1_764_430_000_000)
        let cache = ProviderTokenCache(Self.credentials, clock: clock)
        let old = try #require(cache.token())
        clock.advance(seconds: 2)
        let renewed = try #require(cache.renew(replacing: old))
        #expect(renewed != old)
        // A second transfer's 403 for the same old token gets the new one, not a third.
        #expect(cache.renew(replacing: old) == renewed)
        #expect(cache.token() == renewed)
    }
}

@Suite struct FCMCredentialsTests {
    static func accountJSON(_ fields: [String: String]) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { w.key(k); w.string(v) }
        w.endObject()
        return w.bytes
    }

    static let fields = [
        "type": "service_account", "project_id": "ridepush-demo", "private_key_id": "k1",
        "private_key": TestKey.rsa.privatePEM, "client_email": "push@ridepush-demo.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.example.test/token",
    ]

    @Test func theAssertionIsRS256ForFCMsScopeAndAtMostAnHour() throws {
        let account = try FCMServiceAccount(json: Self.accountJSON(Self.fields), name: "sa.json")
        #expect(account.projectID == "ridepush-demo")
        let jwt = try #require(account.assertion(issuedAt: 1_764_430_000))
        let p = try #require(parts(jwt))
        #expect(p.header == ["alg": .string("RS256"), "typ": .string("JWT"), "kid": .string("k1")])
        #expect(p.claims["iss"] == .string("push@ridepush-demo.iam.gserviceaccount.com"))
        #expect(p.claims["scope"] == .string("https://www.googleapis.com/auth/firebase.messaging"))
        #expect(p.claims["aud"] == .string("https://oauth2.example.test/token"))
        let iat = try #require(p.claims["iat"]?.int)
        let exp = try #require(p.claims["exp"]?.int)
        #expect(iat == 1_764_430_000 && exp > iat && exp - iat <= 3600)
        #expect(try PublicKey.pem(Array(TestKey.rsa.publicPEM.utf8), name: "pub").verify(signature: p.signature, message: p.input))
        #expect(String(decoding: FCMServiceAccount.tokenRequestBody(assertion: jwt), as: UTF8.self)
            == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + jwt)
    }

    @Test func aFileThatIsNotAServiceAccountKeySaysWhy() {
        var missing = Self.fields
        missing["token_uri"] = nil
        #expect(throws: KeyError("sa.json: missing \"token_uri\" (a Google service account key has it)")) {
            try FCMServiceAccount(json: Self.accountJSON(missing), name: "sa.json")
        }
        var user = Self.fields
        user["type"] = "authorized_user"
        #expect(throws: KeyError("sa.json: \"type\" is \"authorized_user\", not \"service_account\"")) {
            try FCMServiceAccount(json: Self.accountJSON(user), name: "sa.json")
        }
        var ec = Self.fields
        ec["private_key"] = TestKey.p256.privatePEM
        #expect(throws: KeyError("sa.json: private_key is not an RSA key (RS256)")) {
            try FCMServiceAccount(json: Self.accountJSON(ec), name: "sa.json")
        }
        #expect(throws: KeyError.self) { try FCMServiceAccount(json: Array("{".utf8), name: "sa.json") }
    }

    @Test func theAccessTokenIsKeptUntilAMinuteBeforeItExpires() throws {
        let clock = ManualClock(1_764_430_000_000)
        let cache = FCMAccessTokenCache(clock: clock)
        #expect(cache.token() == nil)
        try cache.store(response: Array(#"{"access_token":"ya29.a","expires_in":3599,"token_type":"Bearer"}"#.utf8))
        #expect(cache.token() == "ya29.a")
        clock.advance(seconds: 3599 - 61)
        #expect(cache.token() == "ya29.a")
        clock.advance(seconds: 1)
        #expect(cache.token() == nil, "60 s before expiry: fetch another")
        #expect(throws: FCMAccessTokenCache.ResponseError.self) { try cache.store(response: Array(#"{"error":"invalid_grant"}"#.utf8)) }
    }

    @Test func a401ForgetsTheRejectedTokenOnly() throws {
        let cache = FCMAccessTokenCache(clock: ManualClock())
        try cache.store(response: Array(#"{"access_token":"new","expires_in":3600}"#.utf8))
        cache.invalidate("old")
        #expect(cache.token() == "new")
        cache.invalidate("new")
        #expect(cache.token() == nil)
    }
}
