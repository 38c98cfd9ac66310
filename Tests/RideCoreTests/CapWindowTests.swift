import Foundation
import Testing
@testable import RideCore
import RideProtocol

/// fare_capping billed without walking the windows (issue 15, defect 1): `GET /quote` with a
/// capped plan and seconds=Int64.max looped once per 12-hour window, ~2×10^14 times, on a
/// service thread. These tests would not finish before the fix.
struct CapWindowTests {
    /// The old definition, one window at a time: the reference the closed form must match.
    static func walked(_ plan: FarePlan, riding: Int64) -> Int64 {
        guard let cap = plan.cap else { return FareEngine.timeFare(plan, riding: riding) }
        let window = cap.duration * 60
        var capped: Int64 = 0, start: Int64 = 0, before: Int64 = 0
        repeat {
            let upTo = FareEngine.timeFare(plan, riding: min(riding, start + window))
            capped += min(cap.price, upTo - before)
            before = upTo
            start += window
        } while start < riding
        return capped
    }

    @Test func examplePlanAtInt64MaxIsExact() throws {
        let plan = try #require(try ExamplePlansFileTests.load().first { $0.id == "plan3" })
        let windows = Int64.max / 43_200 + 1  // Int64.max is not a multiple of 12 hours
        #expect(windows == 213_503_982_334_602)
        // Every full window bills 720 × 0.50 = 360.00 before its cap of 15.00.
        #expect(FareEngine.fare(plan, riding: .max, paused: 0) == windows * 1500)
        let q = FareEngine.quote(plan, riding: .max, paused: 0)
        #expect(q.total == 320_255_973_501_903_000)
        #expect(q.lines.reduce(0) { $0 + $1.amount } == q.total)
        #expect(q.lines.map(\.label) == [.unlock, .riding, .distance, .cap])
        let tokyo = try #require(try ExamplePlansFileTests.load().first { $0.id == "tokyo-15" })
        #expect(FareEngine.fare(tokyo, riding: .max, paused: 0) == windows * 1800)
    }

    /// The last, partial window bills only what accrued in it: one second past a window, 0.50.
    @Test func lastPartialWindow() throws {
        let plan = try #require(try ExamplePlansFileTests.load().first { $0.id == "plan3" })
        #expect(FareEngine.fare(plan, riding: 43_200 * 5 + 1, paused: 0) == 5 * 1500 + 50)
        #expect(FareEngine.fare(plan, riding: 43_200 * 5 + 60 * 29, paused: 0) == 5 * 1500 + 1450)
        #expect(FareEngine.fare(plan, riding: 43_200 * 5 + 60 * 30 + 1, paused: 0) == 6 * 1500)
    }

    static let cap = FareCap(duration: 60, price: 1000)
    /// Plans whose windows differ: intervals that do not divide the window (one and several
    /// at once), segments starting and ending mid-window, discounts, one-off charges, both rules.
    static let plans: [FarePlan] = {
        let shapes: [[FareSegment]] = [
            [FareSegment(start: 0, rate: 130, interval: 7)],
            [FareSegment(start: 0, rate: 40, interval: 1), FareSegment(start: 0, rate: 290, interval: 9)],
            [FareSegment(start: 0, rate: 25, interval: 1), FareSegment(start: 95, rate: 480, interval: 13, end: 500)],
            [FareSegment(start: 0, rate: 30, interval: 1), FareSegment(start: 0, rate: -30, interval: 1, end: 10),
             FareSegment(start: 30, rate: 700, interval: 0, end: 60)],
            [FareSegment(start: 5, rate: 90, interval: 7), FareSegment(start: 3, rate: 60, interval: 11),
             FareSegment(start: 0, rate: -20, interval: 2)],
            [FareSegment(start: 0, rate: 400, interval: 45), FareSegment(start: 200, rate: 5, interval: 1)],
            [FareSegment(start: 17, rate: 1_200, interval: 90)],
        ]
        var out: [FarePlan] = []
        for (i, segs) in shapes.enumerated() {
            for billing in [BillingRule.started, .completed] {
                for cap in [cap, FareCap(duration: 41, price: 650)] {
                    out.append(FarePlan(id: "p\(i)", names: [:], currency: .krw, price: 150,
                                        perMinute: segs, cap: cap, billing: billing))
                }
            }
        }
        return out
    }()

    @Test func closedFormMatchesTheWindowWalk() {
        var checked = 0
        for plan in Self.plans {
            #expect(FareEngine.checkCap(plan) == nil)
            let days: [Int64] = [259_200, 259_259, 5_184_000, 5_185_234, 10_000_001]
            let durations: [Int64] = Array(stride(from: Int64(0), through: 108_000, by: 37)) + days
            for riding in durations {
                let want = FareEngine.finish(plan, riding: riding, subtotal: Self.walked(plan, riding: riding))
                let got = FareEngine.fare(plan, riding: riding, paused: 0)
                if got != want {
                    Issue.record("\(plan.id) \(plan.billing) cap \(plan.cap!.duration) at \(riding): \(got), walked \(want)")
                    return
                }
                checked += 1
            }
        }
        #expect(checked == Self.plans.count * 2924)
    }

    /// Overlapping segments whose pattern only repeats after 10^4+ windows cannot be billed
    /// exactly without the walk: the parser refuses them, naming the field.
    @Test func unboundedPatternIsRefused() throws {
        let doc = """
        {"data":{"plans":[{"plan_id":"odd","name":"Odd","currency":"KRW","price":0,
         "per_min_pricing":[{"start":0,"rate":10,"interval":997},{"start":0,"rate":10,"interval":991}],
         "fare_capping":{"duration":60,"price":5}}]}}
        """
        #expect(throws: PlanError.self) { try GBFSPlans.parse(Array(doc.utf8)) }
        do {
            _ = try GBFSPlans.parse(Array(doc.utf8))
        } catch {
            #expect(error.field == "fare_capping")
        }
    }

    @Test func tooManySegmentsAreRefused() {
        let segs = (0...GBFSPlans.maxSegments).map { _ in #"{"start":0,"rate":1,"interval":1}"# }.joined(separator: ",")
        let doc = #"{"data":{"plans":[{"plan_id":"many","name":"Many","currency":"KRW","price":0,"per_min_pricing":[\#(segs)]}]}}"#
        #expect(throws: PlanError.self) { try GBFSPlans.parse(Array(doc.utf8)) }
    }

    @Test func boundsAreOnePlainRange() {
        #expect(InputBounds.quantity("0") == 0)
        #expect(InputBounds.quantity("1000000000") == 1_000_000_000)
        #expect(InputBounds.quantity("1000000001") == nil)
        #expect(InputBounds.quantity("9223372036854775807") == nil)
        #expect(InputBounds.quantity("+5") == nil)
        #expect(InputBounds.quantity("-1") == nil)
        #expect(InputBounds.quantity("") == nil)
        #expect(InputBounds.quantity("1e3") == nil)
        #expect(ClientCodec.maxIntValue == InputBounds.maxQuantity)
    }
}
