import Testing
@testable import RideCore
import RideProtocol

// Fare tables: every figure is an exact integer of minor units, worked out by hand from the
// plan and the decided rules (an interval is billed once riding time is strictly past its
// start; started = ceil, completed = floor; `end` exclusive; `interval: 0` charges once;
// fare_capping per window of `duration` minutes, the first window including the unlock).

/// m:ss → seconds, so the tables read like a ride clock.
fileprivate func t(_ minutes: Int64, _ seconds: Int64 = 0) -> Int64 { minutes * 60 + seconds }

fileprivate let usd = Currency(code: "USD")!
fileprivate let cad = Currency(code: "CAD")!
fileprivate let eur = Currency(code: "EUR")!

/// GBFS v3.1-RC3 system_pricing_plans Example 1 ("plan2"): first half-hour $2 (the unlock),
/// second half-hour $3 more, beyond one hour $0.10 per minute. No billing field: started.
fileprivate let usdHalfHour = FarePlan(
    id: "plan2", names: ["en": "One-Way"], currency: usd, price: 200,
    perMinute: [FareSegment(start: 30, rate: 300, interval: 0, end: 60),
                FareSegment(start: 60, rate: 10, interval: 1)])

/// GBFS v3.1-RC3 Example 2 ("plan3"): CAD 3.00 + 0.50/min + 0.25/km, capped at 15.00 per 720 min.
fileprivate let cadCapped = FarePlan(
    id: "plan3", names: ["en": "Simple Rate"], currency: cad, price: 300, isTaxable: true,
    perMinute: [FareSegment(start: 0, rate: 50, interval: 1)],
    perKm: [FareSegment(start: 0, rate: 25, interval: 1)],
    cap: FareCap(duration: 720, price: 1500))

/// The default plan billed per started minute instead (GBFS's reading of the same rates).
fileprivate let krwStarted = FarePlan(
    id: "krw-started", names: ["en": "Started minutes"], currency: .krw, price: 500,
    perMinute: [FareSegment(start: 0, rate: 180, interval: 1)], billing: .started)

/// A completed-minute plan in a currency with decimals: EUR 1.00 + 0.25 per completed minute.
fileprivate let eurCompleted = FarePlan(
    id: "eur-completed", names: ["en": "Completed minutes"], currency: eur, price: 100,
    perMinute: [FareSegment(start: 0, rate: 25, interval: 1)], billing: .completed)

/// A discount segment: 0.30/min, but the first 10 minutes are refunded by a -0.30 segment.
fileprivate let eurFirstTenFree = FarePlan(
    id: "first-ten-free", names: ["en": "First 10 min free"], currency: eur, price: 100,
    perMinute: [FareSegment(start: 0, rate: 30, interval: 1),
                FareSegment(start: 0, rate: -30, interval: 1, end: 10)])

/// A discount larger than everything else: the total stops at 0, never below.
fileprivate let eurOverDiscounted = FarePlan(
    id: "over-discounted", names: ["en": "Voucher"], currency: eur, price: 50,
    perMinute: [FareSegment(start: 0, rate: -200, interval: 0)])

/// One row of a fare table.
struct FareCase: CustomTestStringConvertible, Sendable {
    var plan: String
    var riding: Int64
    var paused: Int64 = 0
    var metres: Int64 = 0
    var fare: Int64

    var testDescription: String {
        var s = "\(plan) at \(riding / 60):\(String(riding % 60).count == 1 ? "0" : "")\(riding % 60)"
        if paused > 0 { s += " paused \(paused)s" }
        if metres > 0 { s += " \(metres) m" }
        return s + " → \(fare)"
    }
}

fileprivate let plansByName: [String: FarePlan] = [
    "default": .standard, "plan2": usdHalfHour, "plan3": cadCapped, "krw-started": krwStarted,
    "eur-completed": eurCompleted, "first-ten-free": eurFirstTenFree, "over-discounted": eurOverDiscounted,
]

struct FareTableTests {
    static let standardInstants: [Int64] = [t(0), t(0, 59), t(1), t(1, 1), t(59, 59), t(60)]

    /// The built-in plan: 500 KRW + 180 KRW per completed minute (the original app's
    /// `500 + (seconds / 60) * 180`).
    @Test("default KRW plan, completed minutes", arguments: [
        FareCase(plan: "default", riding: t(0), fare: 500),
        FareCase(plan: "default", riding: t(0, 59), fare: 500),
        FareCase(plan: "default", riding: t(1), fare: 680),
        FareCase(plan: "default", riding: t(1, 1), fare: 680),
        FareCase(plan: "default", riding: t(59, 59), fare: 500 + 59 * 180),  // 11,120
        FareCase(plan: "default", riding: t(60), fare: 500 + 60 * 180),      // 11,300
    ])
    func standard(_ c: FareCase) { check(c) }

    @Test("KRW per started minute", arguments: [
        FareCase(plan: "krw-started", riding: t(0), fare: 500),
        FareCase(plan: "krw-started", riding: t(0, 59), fare: 680),
        FareCase(plan: "krw-started", riding: t(1), fare: 680),
        FareCase(plan: "krw-started", riding: t(1, 1), fare: 860),
        FareCase(plan: "krw-started", riding: t(59, 59), fare: 500 + 60 * 180),  // 11,300
        FareCase(plan: "krw-started", riding: t(60), fare: 500 + 60 * 180),      // 11,300
        FareCase(plan: "krw-started", riding: t(60, 1), fare: 500 + 61 * 180),   // 11,480
    ])
    func started(_ c: FareCase) { check(c) }

    @Test("EUR per completed minute", arguments: [
        FareCase(plan: "eur-completed", riding: t(0), fare: 100),
        FareCase(plan: "eur-completed", riding: t(0, 59), fare: 100),
        FareCase(plan: "eur-completed", riding: t(1), fare: 125),
        FareCase(plan: "eur-completed", riding: t(1, 1), fare: 125),
        FareCase(plan: "eur-completed", riding: t(59, 59), fare: 100 + 59 * 25),  // 15.75
        FareCase(plan: "eur-completed", riding: t(60), fare: 100 + 60 * 25),      // 16.00
    ])
    func completed(_ c: FareCase) { check(c) }

    /// GBFS Example 1. The $3 segment (`interval: 0`) is charged once riding passes 30:00 and
    /// stays charged after its `end`; the $0.10 segment bills started minutes after 60:00.
    @Test("GBFS example 1: USD half-hour plan", arguments: [
        FareCase(plan: "plan2", riding: t(0), fare: 200),
        FareCase(plan: "plan2", riding: t(0, 59), fare: 200),
        FareCase(plan: "plan2", riding: t(1), fare: 200),
        FareCase(plan: "plan2", riding: t(1, 1), fare: 200),
        FareCase(plan: "plan2", riding: t(30), fare: 200),
        FareCase(plan: "plan2", riding: t(30, 1), fare: 500),
        FareCase(plan: "plan2", riding: t(59, 59), fare: 500),
        FareCase(plan: "plan2", riding: t(60), fare: 500),
        FareCase(plan: "plan2", riding: t(60, 1), fare: 510),
        FareCase(plan: "plan2", riding: t(61), fare: 510),
        FareCase(plan: "plan2", riding: t(61, 1), fare: 520),
        FareCase(plan: "plan2", riding: t(90), fare: 200 + 300 + 30 * 10),  // 8.00
    ])
    func usdExample(_ c: FareCase) { check(c) }

    /// GBFS Example 2. 3.00 + 0.50/started min reaches the 15.00 cap after 24 minutes; the
    /// second 12-hour window bills again from 0 up to another 15.00; kilometres are started
    /// kilometres and the whole fare (distance included) stays within 15.00 per window begun.
    @Test("GBFS example 2: CAD plan with 12-hour cap", arguments: [
        FareCase(plan: "plan3", riding: t(0), fare: 300),
        FareCase(plan: "plan3", riding: t(0, 59), fare: 350),
        FareCase(plan: "plan3", riding: t(1), fare: 350),
        FareCase(plan: "plan3", riding: t(1, 1), fare: 400),
        FareCase(plan: "plan3", riding: t(23), fare: 1450),
        FareCase(plan: "plan3", riding: t(23, 1), fare: 1500),
        FareCase(plan: "plan3", riding: t(59, 59), fare: 1500),
        FareCase(plan: "plan3", riding: t(60), fare: 1500),
        FareCase(plan: "plan3", riding: t(600), fare: 1500),         // 10 hours
        FareCase(plan: "plan3", riding: t(720), fare: 1500),         // exactly 12 hours: one window
        FareCase(plan: "plan3", riding: t(720, 1), fare: 1550),      // second window, 1 started minute
        FareCase(plan: "plan3", riding: t(743), fare: 1500 + 1150),  // 23 minutes into window 2
        FareCase(plan: "plan3", riding: t(780), fare: 3000),         // 13 hours: two capped windows
        FareCase(plan: "plan3", riding: t(0), metres: 999, fare: 325),
        FareCase(plan: "plan3", riding: t(10), metres: 5000, fare: 300 + 500 + 125),
        FareCase(plan: "plan3", riding: t(10), metres: 5001, fare: 300 + 500 + 150),
        FareCase(plan: "plan3", riding: t(10), metres: 40000, fare: 1500),  // 18.00 → cap
        FareCase(plan: "plan3", riding: t(780), metres: 100_000, fare: 3000),
    ])
    func cadExample(_ c: FareCase) { check(c) }

    @Test("negative rate segments", arguments: [
        FareCase(plan: "first-ten-free", riding: t(0), fare: 100),
        FareCase(plan: "first-ten-free", riding: t(0, 59), fare: 100),  // 0.30 - 0.30
        FareCase(plan: "first-ten-free", riding: t(1), fare: 100),
        FareCase(plan: "first-ten-free", riding: t(1, 1), fare: 100),
        FareCase(plan: "first-ten-free", riding: t(5), fare: 100),
        FareCase(plan: "first-ten-free", riding: t(10), fare: 100),
        FareCase(plan: "first-ten-free", riding: t(10, 1), fare: 130),
        FareCase(plan: "first-ten-free", riding: t(15), fare: 100 + 15 * 30 - 10 * 30),
        FareCase(plan: "first-ten-free", riding: t(59, 59), fare: 100 + 60 * 30 - 10 * 30),  // 16.00
        FareCase(plan: "first-ten-free", riding: t(60), fare: 100 + 60 * 30 - 10 * 30),
        FareCase(plan: "over-discounted", riding: t(0), fare: 50),
        FareCase(plan: "over-discounted", riding: t(0, 1), fare: 0),  // 0.50 - 2.00 → 0, not -1.50
        FareCase(plan: "over-discounted", riding: t(0, 59), fare: 0),
        FareCase(plan: "over-discounted", riding: t(1), fare: 0),
        FareCase(plan: "over-discounted", riding: t(1, 1), fare: 0),
        FareCase(plan: "over-discounted", riding: t(59, 59), fare: 0),
        FareCase(plan: "over-discounted", riding: t(60), fare: 0),
    ])
    func negative(_ c: FareCase) { check(c) }

    func check(_ c: FareCase) {
        let plan = plansByName[c.plan]!
        let fare = FareEngine.fare(plan, riding: c.riding, paused: c.paused, metres: c.metres)
        #expect(fare == c.fare)
        // The tick path and the quote/receipt path must never disagree.
        let q = FareEngine.quote(plan, riding: c.riding, paused: c.paused, metres: c.metres)
        #expect(q.total == fare)
        #expect(q.currency == plan.currency)
        // Receipt lines add up to the total.
        #expect(q.lines.reduce(0) { $0 + $1.amount } == q.total, "lines: \(q.lines)")
    }
}

struct PauseFareTests {
    /// Pauses billed at the plan's own rate with the plan's rule; riding minutes unaffected.
    static let krwPaused: FarePlan = {
        var p = FarePlan.standard
        p.pauseRate = 50
        return p
    }()
    static let krwPausedStarted: FarePlan = {
        var p = krwStarted
        p.pauseRate = 50
        return p
    }()

    @Test("pause billing", arguments: [
        // (plan, riding, paused, fare)
        ("completed, free pause", FarePlan.standard, t(10), t(30), Int64(500 + 10 * 180)),
        ("completed, 0:59 paused", krwPaused, t(10), t(0, 59), Int64(2300)),
        ("completed, 1:30 paused", krwPaused, t(10), t(1, 30), Int64(2300 + 50)),
        ("completed, 10:00 paused", krwPaused, t(10), t(10), Int64(2300 + 500)),
        ("started, 0:01 paused", krwPausedStarted, t(10), t(0, 1), Int64(2300 + 50)),
        ("started, 1:01 paused", krwPausedStarted, t(10), t(1, 1), Int64(2300 + 100)),
    ] as [(String, FarePlan, Int64, Int64, Int64)])
    func pause(_ label: String, _ plan: FarePlan, _ riding: Int64, _ paused: Int64, _ fare: Int64) {
        #expect(FareEngine.fare(plan, riding: riding, paused: paused) == fare, "\(label)")
        #expect(FareEngine.quote(plan, riding: riding, paused: paused).total == fare, "\(label)")
    }

    /// A capped plan with paid pauses: the pause charge counts toward the window cap.
    @Test func pauseUnderCap() {
        var p = cadCapped
        p.pauseRate = 10
        // 10 min riding (8.00) + 30 paused started minutes (3.00) = 11.00, under the cap.
        #expect(FareEngine.fare(p, riding: t(10), paused: t(30)) == 1100)
        // 20 min riding (13.00) + 30 paused minutes (3.00) = 16.00 → 15.00.
        #expect(FareEngine.fare(p, riding: t(20), paused: t(30)) == 1500)
    }
}

struct ReceiptLineTests {
    typealias L = ReceiptLine

    @Test func defaultPlanOneMinute() {
        let q = FareEngine.quote(.standard, riding: t(1, 1), paused: 0)
        #expect(q.total == 680)
        #expect(q.lines == [L(label: .unlock, amount: 500), L(label: .riding, minutes: 1, amount: 180)])
    }

    @Test func usdSegmentsAreNumbered() {
        let q = FareEngine.quote(usdHalfHour, riding: t(61, 1), paused: 0)
        #expect(q.total == 520)
        #expect(q.lines == [
            L(label: .unlock, amount: 200),
            L(label: .riding, segment: 0, amount: 300),            // interval 0: no minute count
            L(label: .riding, segment: 1, minutes: 2, amount: 20),
        ])
    }

    @Test func usdBeforeSecondHalfHour() {
        let q = FareEngine.quote(usdHalfHour, riding: t(30), paused: 0)
        #expect(q.lines == [
            L(label: .unlock, amount: 200),
            L(label: .riding, segment: 0, amount: 0),
            L(label: .riding, segment: 1, minutes: 0, amount: 0),
        ])
    }

    @Test func cadThirteenHoursWithDistance() {
        let q = FareEngine.quote(cadCapped, riding: t(780), paused: 0, metres: 5000)
        #expect(q.total == 3000)
        #expect(q.lines == [
            L(label: .unlock, amount: 300),
            L(label: .riding, minutes: 780, amount: 39000),
            L(label: .distance, km: 5, amount: 125),
            L(label: .cap, amount: 3000 - (300 + 39000 + 125)),  // -36,425
        ])
    }

    @Test func pauseLine() {
        let q = FareEngine.quote(PauseFareTests.krwPaused, riding: t(10), paused: t(1, 30))
        #expect(q.total == 2350)
        #expect(q.lines == [
            L(label: .unlock, amount: 500),
            L(label: .riding, minutes: 10, amount: 1800),
            L(label: .pause, minutes: 1, amount: 50),
        ])
    }

    /// A discount bigger than the fare: the total is 0 and a `floor` line says why, so the
    /// lines still add up (before the fix the lines summed to -1.50 on a 0.00 receipt).
    @Test func floorLine() {
        let q = FareEngine.quote(eurOverDiscounted, riding: t(5), paused: 0)
        #expect(q.total == 0)
        #expect(q.lines == [
            L(label: .unlock, amount: 50),
            L(label: .riding, amount: -200),
            L(label: .floor, amount: 150),
        ])
    }

    /// Cap and floor together: the cap line is what the cap took, the floor line what the zero
    /// floor gave back (before the fix both were lumped into one "cap" line of -23.00).
    @Test func capThenFloor() {
        var p = cadCapped
        p.perKm = [FareSegment(start: 0, rate: -100, interval: 1)]
        let q = FareEngine.quote(p, riding: t(100), paused: 0, metres: 30_000)
        #expect(q.total == 0)
        #expect(FareEngine.fare(p, riding: t(100), paused: 0, metres: 30_000) == 0)
        #expect(q.lines == [
            L(label: .unlock, amount: 300),
            L(label: .riding, minutes: 100, amount: 5000),
            L(label: .distance, km: 30, amount: -3000),
            L(label: .cap, amount: -1500 - 2300),  // time capped at 15.00; subtotal -15.00
            L(label: .floor, amount: 1500),
        ])
    }

    @Test func noCapLineUnderTheCap() {
        let q = FareEngine.quote(cadCapped, riding: t(10), paused: 0)
        #expect(q.total == 800)
        #expect(!q.lines.contains { $0.label == .cap })
    }
}

/// Figures past Int64: saturate, never trap (a trap in a tick or a quote takes the server down).
struct FareOverflowTests {
    /// Six per-minute segments and three per-km segments at the largest rate a plans file may
    /// carry (1e11 minor units). One segment at the codec's largest `seconds` (1e9) bills
    /// 16,666,667 × 1e11 ≈ 1.7e18; six of them pass Int64.max (9.2e18).
    static let maxedText = """
        {"data":{"plans":[{"plan_id":"maxed","currency":"KRW","price":100000000000,
          "per_min_pricing":[
            {"start":0,"rate":100000000000,"interval":1},{"start":0,"rate":100000000000,"interval":1},
            {"start":0,"rate":100000000000,"interval":1},{"start":0,"rate":100000000000,"interval":1},
            {"start":0,"rate":100000000000,"interval":1},{"start":0,"rate":100000000000,"interval":1}],
          "per_km_pricing":[
            {"start":0,"rate":100000000000,"interval":1},{"start":0,"rate":100000000000,"interval":1},
            {"start":0,"rate":100000000000,"interval":1}]}]}}
        """

    @Test func planWithinTheFileCapsSaturatesAtTheCodecMaximum() throws {
        let plan = try #require(try GBFSPlans.parse(Array(Self.maxedText.utf8)).first)
        let most = ClientCodec.maxIntValue
        #expect(FareEngine.fare(plan, riding: most, paused: most, metres: most) == Int64.max)
        let q = FareEngine.quote(plan, riding: most, paused: most, metres: most)
        #expect(q.total == Int64.max)
        #expect(q.lines.filter { $0.label == .riding }.allSatisfy { $0.amount == 16_666_667 * 100_000_000_000 })
        // A ride left running for a century: still no trap.
        let century: Int64 = 100 * 366 * 86_400
        #expect(FareEngine.fare(plan, riding: century, paused: 0) == Int64.max)
    }

    @Test func discountsSaturateDownAndTheFloorStillHolds() throws {
        let text = Self.maxedText.replacing("\"rate\":100000000000", with: "\"rate\":-100000000000")
        let plan = try #require(try GBFSPlans.parse(Array(text.utf8)).first)
        let most = ClientCodec.maxIntValue
        #expect(FareEngine.fare(plan, riding: most, paused: 0, metres: most) == 0)
        #expect(FareEngine.quote(plan, riding: most, paused: 0, metres: most).total == 0)
    }

    /// `GET /quote?seconds=` reads any Int64: the default plan at Int64.max used to trap in
    /// `covered + size - 1` (started) and `n × rate`.
    @Test(arguments: [Int64.max, Int64.max - 1, Int64.max / 60 * 60, 1_000_000_000_000_000])
    func absurdSecondsOnUncappedPlans(_ seconds: Int64) {
        for plan in [FarePlan.standard, krwStarted, usdHalfHour, eurFirstTenFree] {
            let fare = FareEngine.fare(plan, riding: seconds, paused: seconds)
            #expect(fare >= 0)
            #expect(FareEngine.quote(plan, riding: seconds, paused: seconds).total == fare)
        }
        #expect(FareEngine.fare(.standard, riding: Int64.max, paused: 0) == Int64.max)
        #expect(FareEngine.fare(krwStarted, riding: 1_000_000_000_000_000, paused: 0)
                == 500 + 16_666_666_666_667 * 180)
    }

    /// A capped plan at the codec maximum: one window per 12 hours, each at most the cap.
    @Test func cappedPlanAtTheCodecMaximum() {
        let most = ClientCodec.maxIntValue
        let windows = (most + 43_199) / 43_200
        #expect(FareEngine.fare(cadCapped, riding: most, paused: 0, metres: most) == windows * 1500)
    }
}
