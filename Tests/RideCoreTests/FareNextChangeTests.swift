import RideCore
import Testing

// FareEngine.nextChange against the fare itself: the answer's second has another fare, and
// every second before it has the same fare as now.
@Suite struct FareNextChangeTests {
    static let started = FarePlan(id: "s", names: [:], currency: .krw, price: 500,
                                  perMinute: [FareSegment(start: 0, rate: 180, interval: 1)], billing: .started)
    static let gbfs = FarePlan(id: "g", names: [:], currency: Currency(code: "USD")!, price: 200,
                               perMinute: [FareSegment(start: 30, rate: 300, interval: 0, end: 60),
                                           FareSegment(start: 60, rate: 10, interval: 1)], billing: .started)
    static let capped = FarePlan(id: "c", names: [:], currency: .krw, price: 500,
                                 perMinute: [FareSegment(start: 0, rate: 100, interval: 1)], cap: FareCap(duration: 10, price: 1000),
                                 billing: .completed)

    @Test(arguments: [
        // The standard plan bills completed minutes: 500 until 0:59, 680 from 1:00.
        (FarePlan.standard, Int64(0), Int64(60), Int64(680)),
        (FarePlan.standard, 59, 60, 680),
        (FarePlan.standard, 60, 120, 860),
        // Started minutes: 680 from 0:01, 860 from 1:01.
        (started, 0, 1, 680),
        (started, 1, 61, 860),
        (started, 60, 61, 860),
        // The GBFS example: $2 to 30:00, $5 from 30:01, + $0.10 a minute from 60:01.
        (gbfs, 0, 1801, 500),
        (gbfs, 1801, 3601, 510),
        // Capped at 1,000 a 10-minute window: 500 + 5 × 100 at 5:00, then flat through the
        // rest of the window and until a minute of the next one completes at 11:00.
        (capped, 240, 300, 1000) as (FarePlan, Int64, Int64, Int64),
        (capped, 300, 660, 1100),
    ])
    func nextChange(_ plan: FarePlan, _ riding: Int64, _ at: Int64, _ fare: Int64) throws {
        let next = try #require(FareEngine.nextChange(plan, riding: riding, paused: 0))
        #expect(next.riding == at)
        #expect(next.fare == fare)
        #expect(FareEngine.fare(plan, riding: at, paused: 0) == fare)
        let now = FareEngine.fare(plan, riding: riding, paused: 0)
        for s in riding..<at { #expect(FareEngine.fare(plan, riding: s, paused: 0) == now, "at \(s)") }
    }

    @Test func aPlanWithoutTimeChargesNeverChanges() {
        let flat = FarePlan(id: "f", names: [:], currency: .krw, price: 1000)
        #expect(FareEngine.nextChange(flat, riding: 10, paused: 0) == nil)
        // Beyond the horizon is "no change" too.
        #expect(FareEngine.nextChange(.standard, riding: 0, paused: 0, within: 59) == nil)
    }
}
