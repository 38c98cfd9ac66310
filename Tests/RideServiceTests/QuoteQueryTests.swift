import XCTest
@testable import RideService

/// The /quote query's error wording: a pure function, exact strings.
final class QuoteQueryTests: XCTestCase {
    func problem(_ args: [(String, String)]) -> String? { QuoteQuery.problem(args.map { (name: $0.0, value: $0.1) }) }

    func testEachBadValueSaysWhatWasWrong() {
        XCTAssertNil(problem([("seconds", "192")]))
        XCTAssertNil(problem([("plan", "default"), ("seconds", "0"), ("paused", "1000000000")]))
        XCTAssertEqual(problem([("seconds", "-1")]), "seconds=-1 is negative: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "abc")]), "seconds=abc is not a number: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "1.5")]), "seconds=1.5 has a fraction: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "1000000001")]), "seconds=1000000001 is too large: at most 1000000000 (about 31 years)")
        XCTAssertEqual(problem([("seconds", "99999999999999999999")]),
                       "seconds=99999999999999999999 is too large: at most 1000000000 (about 31 years)")
        XCTAssertNil(problem([("seconds", "0000000060")]), "leading zeros are still 60")
        XCTAssertEqual(problem([("seconds", "00000000060")]), "seconds=00000000060 has more than 10 digits: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "1e3")]), "seconds=1e3 is not a number: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "")]), "seconds= is empty: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", "60"), ("paused", "-5")]), "paused=-5 is negative: whole seconds from 0 to 1000000000")
        XCTAssertEqual(problem([("seconds", String(repeating: "x", count: 30))]),
                       "seconds=xxxxxxxxxxxxxxxxxxxxxxxx… is not a number: whole seconds from 0 to 1000000000")
    }

    func testMissingUnknownAndRepeatedParametersAreNamed() {
        XCTAssertEqual(problem([]), "seconds= is required: whole seconds of riding, e.g. /quote?seconds=192")
        XCTAssertEqual(problem([("seconds", "60"), ("secs", "1")]), #"unknown parameter "secs" (known: plan, seconds, paused)"#)
        XCTAssertEqual(problem([("seconds", "60"), ("seconds", "61")]), "seconds= is given more than once")
        XCTAssertEqual(problem([("seconds", "60"), ("plan", "")]), "plan= is empty: give a plan id (GET /plans lists them)")
    }
}
