@testable import RideService
import XCTest
import RideCore
import RideStore

/// The ticker's chores, decided by the service at instants chosen by hand.
final class HousekeepingTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000

    func kinds(_ jobs: [StoreJob]) -> [String] {
        jobs.map { job in
            switch job {
            case .prune(let before): return "prune \(before)"
            case .purge(_, let before): return "purge \(before)"
            default: return "other"
            }
        }
    }

    func testTheHourlyPruneForgetsRepliesOlderThanADay() {
        var h = Housekeeping(retention: nil)
        XCTAssertEqual(kinds(h.due(at: t0, now: t0)), ["prune \(t0 - Housekeeping.replyLife)"], "the first tick prunes")
        XCTAssertEqual(kinds(h.due(at: t0 + 1_000, now: t0 + 1_000)), [])
        XCTAssertEqual(kinds(h.due(at: t0 + 3_600_000, now: t0 + 3_600_000)), [], "an hour is not past an hour")
        XCTAssertEqual(kinds(h.due(at: t0 + 3_601_000, now: t0 + 3_601_000)), ["prune \(t0 + 3_601_000 - Housekeeping.replyLife)"])
    }

    func testRetentionPurgesWithThePruneAndAgainWhileBatchesAreFull() {
        let retention = Retention(days: 90, batch: 500)
        var h = Housekeeping(retention: retention)
        let cutoff = t0 - 90 * 86_400_000
        XCTAssertEqual(kinds(h.due(at: t0, now: t0)), ["prune \(t0 - Housekeeping.replyLife)", "purge \(cutoff)"])
        XCTAssertEqual(kinds(h.due(at: t0 + 1_000, now: t0 + 1_000)), [], "the last batch was not full")
    }
}
