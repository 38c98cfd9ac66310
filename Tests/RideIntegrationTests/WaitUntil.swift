import Foundation
import XCTest

/// Waits for `condition` to hold, checking it again and again (every 1 ms at first, every 50 ms
/// at most) for at most `timeout` seconds. The one polling wait of the Swift tests: what it waits
/// for happens in another process (PostgreSQL, a local HTTP server) or on another thread that
/// offers no signal to wait on. A timeout fails the test, naming `what` did not happen.
@discardableResult
func waitUntil(timeout: Double, _ what: @autoclosure () -> String, file: StaticString = #filePath, line: UInt = #line,
               _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    var pause: useconds_t = 1_000
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { break }
        usleep(pause)
        pause = min(pause * 2, 50_000)
    }
    XCTFail("waited \(timeout) s for \(what()), in vain", file: file, line: line)
    return false
}
