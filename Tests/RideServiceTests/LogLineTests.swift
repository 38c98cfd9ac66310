@testable import RideService
import XCTest

/// The JSON log line: a pure function, exact strings.
final class LogLineTests: XCTestCase {
    func testJSONLineHasTimeLevelMessageThenFieldsInOrder() {
        let line = Log.line(.warn, "closing connection from 127.0.0.1 with 4008: slow consumer",
                            ["peer": "127.0.0.1", "rider": "alice", "close_code": 4008], at: 1_764_430_000_250)
        XCTAssertEqual(line, #"{"time":"2025-11-29T15:26:40.250Z","level":"warn","message":"closing connection from 127.0.0.1 with 4008: slow consumer","peer":"127.0.0.1","rider":"alice","close_code":4008}"#)
    }

    func testStringsAreEscaped() {
        XCTAssertEqual(Log.line(.error, "a \"b\"\\\n\u{1}é", [:], at: 0),
                       #"{"time":"1970-01-01T00:00:00.000Z","level":"error","message":"a \"b\"\\\n\u0001é"}"#)
    }

    func testTimeBeforeTheEpochAndMilliseconds() {
        XCTAssertEqual(Log.rfc3339(-1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Log.rfc3339(951_782_400_007), "2000-02-29T00:00:00.007Z")
    }
}
