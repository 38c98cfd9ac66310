import XCTest
import RideCore
@testable import RideAuth

/// `--jwks-url`'s schedule on a manual clock (milliseconds passed in): Cache-Control parsed and
/// clamped, unknown kids fetching at once but once a minute at most, failures retried sooner.
final class KeyRefreshTests: XCTestCase {
    let minute: Int64 = 60_000

    func testMaxAgeParsing() {
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "max-age=3600"), 3600)
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "public, MAX-AGE=86400, must-revalidate"), 86400)
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: #"max-age="120""#), 120)
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: " max-age = 15 ,stale-while-revalidate=15"), 15)
        // The first max-age counts; s-maxage is a shared cache's, not ours.
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "s-maxage=10, max-age=700, max-age=5"), 700)
        // no-cache / no-store: ask as often as allowed.
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "max-age=600, no-cache"), 0)
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "no-store"), 0)
        // Not numbers, or nothing said.
        XCTAssertNil(KeyRefresh.maxAge(cacheControl: "max-age=-5"))
        XCTAssertNil(KeyRefresh.maxAge(cacheControl: "max-age=1h"))
        XCTAssertNil(KeyRefresh.maxAge(cacheControl: "max-age="))
        XCTAssertNil(KeyRefresh.maxAge(cacheControl: "public"))
        XCTAssertNil(KeyRefresh.maxAge(cacheControl: ""))
        XCTAssertEqual(KeyRefresh.maxAge(cacheControl: "max-age=99999999999999999999999"), Int64.max)
    }

    func testIntervalClampedToFiveMinutesAndADay() {
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=15"), 5 * minute)  // Auth0's
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "no-cache"), 5 * minute)    // Keycloak's
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=300"), 5 * minute)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=3601"), 3_601_000)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=86400"), 24 * 60 * minute)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=604800"), 24 * 60 * minute)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "max-age=99999999999999999999999"), 24 * 60 * minute)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: "public"), 60 * minute)
        XCTAssertEqual(KeyRefresh.interval(cacheControl: nil), 60 * minute)
    }

    func testFirstFetchAtOnceThenOnTheMaxAge() {
        var r = KeyRefresh(now: 1_000)
        XCTAssertTrue(r.isDue(now: 1_000))
        r.fetchStarted(now: 1_000)
        r.succeeded(now: 1_200, cacheControl: "max-age=3600")
        XCTAssertEqual(r.nextFetch, 1_200 + 3_600_000)
        XCTAssertFalse(r.isDue(now: 1_200 + 3_599_999))
        XCTAssertTrue(r.isDue(now: 1_200 + 3_600_000))
    }

    func testAnUnknownKidFetchesAtOnceThenOnceAMinuteAtMost() {
        var r = KeyRefresh(now: 0)
        r.fetchStarted(now: 0)
        r.succeeded(now: 0, cacheControl: "max-age=86400")
        // The first unknown kid: due now, not at the max-age.
        r.unknownKid()
        XCTAssertTrue(r.isDue(now: 10_000))
        r.fetchStarted(now: 10_000)
        XCTAssertEqual(r.lastUnknownKidFetch, 10_000)
        XCTAssertFalse(r.unknownKidWaiting)
        r.succeeded(now: 10_100, cacheControl: "max-age=86400")
        XCTAssertFalse(r.isDue(now: 10_200))
        // Another within the minute waits for the minute's end, and is remembered until then.
        r.unknownKid()
        XCTAssertEqual(r.nextFetch, 70_000)
        XCTAssertFalse(r.isDue(now: 69_999))
        r.unknownKid()  // more of them change nothing
        XCTAssertEqual(r.nextFetch, 70_000)
        XCTAssertTrue(r.isDue(now: 70_000))
        r.fetchStarted(now: 70_000)
        r.succeeded(now: 70_050, cacheControl: nil)
        XCTAssertEqual(r.nextFetch, 70_050 + 60 * minute)
        XCTAssertEqual(r.lastUnknownKidFetch, 70_000)
    }

    func testAScheduledFetchAnswersAWaitingKidWithoutSpendingTheRate() {
        var r = KeyRefresh(now: 0)
        r.fetchStarted(now: 0)
        r.succeeded(now: 0, cacheControl: "max-age=300")
        r.unknownKid()
        r.fetchStarted(now: 0)  // at once, the kid's
        r.succeeded(now: 0, cacheControl: "max-age=300")
        r.unknownKid()  // within the minute: waits until 60 s
        XCTAssertEqual(r.nextFetch, minute)
        // The schedule comes due anyway (here: the operator's SIGHUP) and takes the kid along.
        r.refreshNow(now: 30_000)
        XCTAssertTrue(r.isDue(now: 30_000))
        r.fetchStarted(now: 30_000)
        XCTAssertFalse(r.unknownKidWaiting)
        XCTAssertEqual(r.lastUnknownKidFetch, 0)
    }

    func testFailuresRetryWithDoublingWaitsUpToFiveMinutesThenTheMaxAgeAgain() {
        var r = KeyRefresh(now: 0)
        var now: Int64 = 0
        var waits: [Int64] = []
        for _ in 0..<10 {
            XCTAssertTrue(r.isDue(now: now))
            r.fetchStarted(now: now)
            r.failed(now: now)
            waits.append(r.nextFetch - now)
            now = r.nextFetch
        }
        XCTAssertEqual(waits, [2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000])
        XCTAssertEqual(r.failures, 10)
        r.fetchStarted(now: now)
        r.succeeded(now: now, cacheControl: "max-age=7200")
        XCTAssertEqual(r.failures, 0)
        XCTAssertEqual(r.nextFetch - now, 7_200_000)
        r.failed(now: now + 7_200_000)
        XCTAssertEqual(r.nextFetch - now - 7_200_000, 2_000)
    }

    func testAnUnknownKidWhileFailingIsNotHeldBackByTheBackoff() {
        var r = KeyRefresh(now: 0)
        for _ in 0..<9 { r.fetchStarted(now: 0); r.failed(now: 0) }
        XCTAssertEqual(r.nextFetch, 300_000)
        r.unknownKid()
        XCTAssertTrue(r.isDue(now: 1))
    }
}

/// The verifier's side of `--jwks-url`: it tells of unknown kids, and of tokens while no set is there yet.
final class UnknownKidObserverTests: XCTestCase {
    func testTheObserverHearsOfUnknownKidsAndOfAnEmptySetOnly() throws {
        let heard = Locked(0)
        let v = TokenVerifier(secret: testSecret, keys: try Keys.providerSet(), policy: .anyIssuerAllowed)
        v.onUnknownKid { heard.withLock { $0 += 1 } }
        XCTAssertNoThrow(try v.verify(Keys.rsa.token(kid: "r1", payload: riderClaims), now: now))
        XCTAssertEqual(refusal(Keys.otherRSA.token(kid: "r1", payload: riderClaims), v)?.kind, .badSignature)
        XCTAssertEqual(heard.withLock { $0 }, 0)
        XCTAssertEqual(refusal(Keys.rsa.token(kid: "r2", payload: riderClaims), v)?.kind, .unknownKey)
        XCTAssertEqual(heard.withLock { $0 }, 1)
        // A token without kid names no rotated key: nothing to fetch for.
        XCTAssertEqual(refusal(Keys.rsa.token(kid: nil, payload: riderClaims), v)?.kind, .unknownKey)
        XCTAssertEqual(heard.withLock { $0 }, 1)

        // Before the first set: refused as not fetched yet (not "alg refused"), and heard.
        let empty = TokenVerifier(secret: nil, keys: .empty, policy: .anyIssuerAllowed)
        XCTAssertEqual(refusal(Keys.p256.token(kid: "e1", payload: riderClaims), empty)?.kind, .unsupportedAlgorithm)
        empty.onUnknownKid { heard.withLock { $0 += 10 } }
        let e = refusal(Keys.p256.token(kid: "e1", payload: riderClaims), empty)
        XCTAssertEqual(e?.kind, .unknownKey)
        XCTAssertEqual(e?.message, "the identity provider's keys have not been fetched yet (--jwks-url); try again shortly")
        XCTAssertEqual(heard.withLock { $0 }, 11)
        // The set swapped in (as the fetch thread does): the same token passes.
        empty.reload(try Keys.providerSet())
        XCTAssertNoThrow(try empty.verify(Keys.p256.token(kid: "e1", payload: riderClaims), now: now))
    }

    func testAKeycloakShapedSetLoadsWithItsEncryptionKeySkipped() throws {
        let rsa = #"{"kid":"kc-rsa","use":"sig","alg":"RS256","#
        let ec = #"{"kid":"kc-ec","use":"sig","alg":"ES256","#
        let enc = #"{"kid":"kc-enc","use":"enc","alg":"RSA-OAEP","#
        let body = jwks([rsa + Keys.rsa.jwkMembers() + "}", ec + Keys.p256.jwkMembers() + "}", enc + Keys.otherRSA.jwkMembers() + "}"])
        let set = try KeySet.jwksSet(body, name: "JWKS")
        XCTAssertEqual(set.keys.map(\.kid), ["kc-rsa", "kc-ec"])
        XCTAssertEqual(set.skipped.count, 1)
        XCTAssertTrue(set.skipped[0].hasPrefix(#"JWKS key 3 (kid "kc-enc"): skipped"#), set.skipped[0])
        XCTAssertThrowsError(try KeySet.jwksSet(Array("<html>".utf8), name: "JWKS"))
    }
}
