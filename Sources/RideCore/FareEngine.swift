/// One line of a receipt or quote: what billed how much.
public struct ReceiptLine: Sendable, Equatable {
    /// `floor` gives back what discounts took below zero: a fare is never negative.
    public enum Label: String, Sendable { case unlock, riding, distance, pause, cap, floor }
    public var label: Label
    /// Index of the GBFS segment that billed this line, when the plan has several.
    public var segment: Int?
    /// Billed minutes (riding, pause) or kilometres (distance).
    public var minutes: Int64?
    public var km: Int64?
    public var amount: Int64

    public init(label: Label, segment: Int? = nil, minutes: Int64? = nil, km: Int64? = nil, amount: Int64) {
        self.label = label
        self.segment = segment
        self.minutes = minutes
        self.km = km
        self.amount = amount
    }
}

public struct Quote: Sendable, Equatable {
    public var total: Int64
    public var currency: Currency
    public var lines: [ReceiptLine]
}

/// The fare rules, all in one place. Pure integer arithmetic over whole seconds of riding and
/// pause: the same numbers for a tick, a receipt and a quote.
///
/// Every product and sum saturates at Int64.min/max instead of trapping: the plan caps
/// (amounts ≤ 1e11, counts ≤ 1e9) bound one segment's charge, but not a sum over many
/// segments, and `GET /quote?seconds=` or a ride left running for decades can reach figures
/// where `intervals × rate` passes Int64.max. A trap would take the whole server down.
public enum FareEngine {
    /// The fare alone: the per-tick hot path, which must not allocate.
    public static func fare(_ plan: FarePlan, riding: Int64, paused: Int64, metres: Int64 = 0) -> Int64 {
        let time = cappedTimeFare(plan, riding: riding)
        return finish(plan, riding: riding, subtotal: add(add(time.capped, pauseCharge(plan, paused).amount),
                                                          distanceCharge(plan, metres)))
    }

    /// The fare with its receipt lines.
    public static func quote(_ plan: FarePlan, riding: Int64, paused: Int64, metres: Int64 = 0) -> Quote {
        var lines = [ReceiptLine(label: .unlock, amount: plan.price)]
        let many = plan.perMinute.count > 1
        for (i, seg) in plan.perMinute.enumerated() {
            let n = intervals(seg, at: riding, unit: 60, rule: plan.billing)
            lines.append(ReceiptLine(label: .riding, segment: many ? i : nil,
                                     minutes: seg.interval > 0 ? mul(n, seg.interval) : nil, amount: mul(n, seg.rate)))
        }
        if plan.perMinute.isEmpty {
            lines.append(ReceiptLine(label: .riding, minutes: riding / 60, amount: 0))
        }
        let manyKm = plan.perKm.count > 1
        for (i, seg) in plan.perKm.enumerated() {
            let n = intervals(seg, at: metres, unit: 1000, rule: .started)
            lines.append(ReceiptLine(label: .distance, segment: manyKm ? i : nil,
                                     km: seg.interval > 0 ? mul(n, seg.interval) : nil, amount: mul(n, seg.rate)))
        }
        let pause = pauseCharge(plan, paused)
        if paused > 0 || plan.pauseRate != 0 {
            lines.append(ReceiptLine(label: .pause, minutes: pause.minutes, amount: pause.amount))
        }
        let time = cappedTimeFare(plan, riding: riding)
        let subtotal = add(add(time.capped, pause.amount), distanceCharge(plan, metres))
        let total = finish(plan, riding: riding, subtotal: subtotal)
        // The lines above add up to `uncapped`; what the cap took off and what the zero floor
        // gave back get a line each, so the lines always add up to the total.
        let uncapped = add(add(time.uncapped, pause.amount), distanceCharge(plan, metres))
        let capped = overallCap(plan, riding: riding, subtotal: subtotal)
        if capped != uncapped {
            lines.append(ReceiptLine(label: .cap, amount: sub(capped, uncapped)))
        }
        if total != capped {
            lines.append(ReceiptLine(label: .floor, amount: sub(total, capped)))
        }
        return Quote(total: total, currency: plan.currency, lines: lines)
    }

    /// How many intervals of a segment are billed after `at` units (seconds or metres);
    /// `unit` converts the segment's minutes or km into the same unit.
    static func intervals(_ seg: FareSegment, at: Int64, unit: Int64, rule: BillingRule) -> Int64 {
        let start = mul(seg.start, unit)
        guard at > start else { return 0 }
        let end = seg.end.map { mul($0, unit) } ?? Int64.max
        if start >= end { return 0 }
        let covered = sub(min(at, end), start)
        guard seg.interval > 0 else { return 1 }
        let size = mul(seg.interval, unit)
        switch rule {
        case .started: return covered / size + (covered % size == 0 ? 0 : 1)  // ceil without `+ size - 1`
        case .completed: return covered / size
        }
    }

    /// Unlock plus every per-minute segment, at `riding` seconds.
    static func timeFare(_ plan: FarePlan, riding: Int64) -> Int64 {
        var total = plan.price
        for seg in plan.perMinute {
            total = add(total, mul(intervals(seg, at: riding, unit: 60, rule: plan.billing), seg.rate))
        }
        return total
    }

    /// The time fare with `fare_capping` applied per window of `duration` minutes: each window
    /// bills what accrued in it (the first includes the unlock), at most the cap price.
    ///
    /// Never a loop over windows: a ride of Int64.max seconds has 10^14 of them. Only the
    /// windows next to a segment's start or end, the first and the last are billed one by one;
    /// between them every window is full and sees the same segments, so a run of them is
    /// billed in closed form (see `run`). Cost: O(segments²), whatever `riding` is.
    static func cappedTimeFare(_ plan: FarePlan, riding: Int64) -> (capped: Int64, uncapped: Int64) {
        let uncapped = timeFare(plan, riding: riding)
        guard let cap = plan.cap, cap.duration > 0 else { return (uncapped, uncapped) }
        let window = mul(cap.duration, 60)
        let windows = max(1, riding / window + (riding % window == 0 ? 0 : 1))
        // Windows where some segment begins or stops billing (and their neighbours, so that
        // a run never touches a boundary under either billing rule).
        var special: [Int64] = [0, windows - 1]
        for seg in plan.perMinute {
            for edge in [seg.start, seg.end].compactMap({ $0 }) {
                let k = mul(edge, 60) / window
                special.append(contentsOf: [k - 1, k, k + 1])
            }
        }
        special = Array(Set(special.filter { $0 >= 0 && $0 < windows })).sorted()
        var capped: Int64 = 0
        var next: Int64 = 0  // first window not billed yet
        for k in special {
            if k > next { capped = add(capped, run(plan, cap: cap, window: window, from: next, to: k)) }
            capped = add(capped, min(cap.price, accrued(plan, window: window, k, riding: riding)))
            next = k + 1
        }
        return (capped, uncapped)
    }

    /// What window `k` accrued (the first window includes the unlock).
    static func accrued(_ plan: FarePlan, window: Int64, _ k: Int64, riding: Int64) -> Int64 {
        let from = mul(k, window)
        let upTo = timeFare(plan, riding: min(riding, add(from, window)))
        return k == 0 ? upTo : sub(upTo, timeFare(plan, riding: from))
    }

    /// Windows `from..<to`, all full, none next to a segment boundary: each segment is either
    /// silent in all of them or bills its interval all through them. A segment whose interval
    /// divides the window bills the same in every window; one that does not bills q or q+1
    /// intervals (q = window / interval), and the number of windows with q+1 follows from the
    /// run's total. With one such segment the sum is exact in closed form. With several, a run
    /// that stays under the cap (or over it) in every combination is exact too; otherwise the
    /// pattern repeats every lcm of the segments' periods, which `checkCap` bounds for every
    /// plan the GBFS parser accepts.
    static func run(_ plan: FarePlan, cap: FareCap, window: Int64, from: Int64, to: Int64) -> Int64 {
        let count = to - from
        let a = mul(from, window), b = mul(to, window)
        var constant: Int64 = 0
        var varying: [(seg: FareSegment, q: Int64)] = []
        for seg in plan.perMinute where seg.interval > 0 && mul(seg.start, 60) <= a && (seg.end.map { mul($0, 60) >= b } ?? true) {
            let size = mul(seg.interval, 60)
            if window % size == 0 {
                constant = add(constant, mul(window / size, seg.rate))
            } else {
                varying.append((seg, window / size))
            }
        }
        if varying.isEmpty { return mul(count, min(cap.price, constant)) }
        func points(_ seg: FareSegment) -> Int64 {
            sub(intervals(seg, at: b, unit: 60, rule: plan.billing), intervals(seg, at: a, unit: 60, rule: plan.billing))
        }
        if varying.count == 1 {
            let (seg, q) = varying[0]
            let high = sub(points(seg), mul(count, q))  // windows that billed q + 1 intervals
            return add(mul(high, min(cap.price, add(constant, mul(q + 1, seg.rate)))),
                       mul(count - high, min(cap.price, add(constant, mul(q, seg.rate)))))
        }
        var low = constant, high = constant
        for (seg, q) in varying {
            let x = mul(q, seg.rate), y = mul(q + 1, seg.rate)
            low = add(low, min(x, y))
            high = add(high, max(x, y))
        }
        if high <= cap.price { return sub(timeFare(plan, riding: b), timeFare(plan, riding: a)) }
        if low >= cap.price { return mul(count, cap.price) }
        let period = min(count, capPeriod(varying.map(\.seg), window: window) ?? maxCapPeriod)
        var once: Int64 = 0
        for k in from..<(from + period) { once = add(once, min(cap.price, accrued(plan, window: window, k, riding: b))) }
        var total = mul(count / period, once)
        for k in (to - count % period)..<to { total = add(total, min(cap.price, accrued(plan, window: window, k, riding: b))) }
        return total
    }

    /// Most windows one pattern of overlapping segments may take to repeat under a cap.
    public static let maxCapPeriod: Int64 = 10_080

    /// Windows after which overlapping segments bill the same pattern again (the lcm of each
    /// one's interval / gcd(interval, window)), or nil when over `maxCapPeriod`.
    static func capPeriod(_ segs: [FareSegment], window: Int64) -> Int64? {
        func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }
        var l: Int64 = 1
        for seg in segs where seg.interval > 0 {
            let size = mul(seg.interval, 60)
            let p = size / gcd(size, window)
            l = mul(l / gcd(l, p), p)
            if l > maxCapPeriod { return nil }
        }
        return l
    }

    /// Nil when every fare of the plan is exact in bounded time; otherwise why not. A plan
    /// with a cap and several segments billing at once, whose intervals neither divide the
    /// cap window nor repeat within `maxCapPeriod` windows, cannot be billed exactly without
    /// walking its windows one by one: the GBFS parser refuses it.
    public static func checkCap(_ plan: FarePlan) -> String? {
        guard let cap = plan.cap, cap.duration > 0 else { return nil }
        let window = mul(cap.duration, 60)
        let uneven = plan.perMinute.filter { $0.interval > 0 && window % mul($0.interval, 60) != 0 }
        guard uneven.count > 1, capPeriod(uneven, window: window) == nil else { return nil }
        return "segments with intervals of \(uneven.map { String($0.interval) }.joined(separator: ", ")) minutes do not divide the \(cap.duration)-minute cap window and repeat only after more than \(maxCapPeriod) windows"
    }

    static func pauseCharge(_ plan: FarePlan, _ paused: Int64) -> (minutes: Int64, amount: Int64) {
        let n = intervals(FareSegment(start: 0, rate: plan.pauseRate, interval: 1), at: paused, unit: 60, rule: plan.billing)
        return (n, mul(n, plan.pauseRate))
    }

    static func distanceCharge(_ plan: FarePlan, _ metres: Int64) -> Int64 {
        var total: Int64 = 0
        for seg in plan.perKm { total = add(total, mul(intervals(seg, at: metres, unit: 1000, rule: .started), seg.rate)) }
        return total
    }

    /// At most the cap for every window begun, then never below zero (discount segments).
    /// The floor comes last so that even a (refused-by-the-parser) negative cap price cannot
    /// make a fare negative.
    static func finish(_ plan: FarePlan, riding: Int64, subtotal: Int64) -> Int64 {
        max(0, overallCap(plan, riding: riding, subtotal: subtotal))
    }

    /// The subtotal clamped to `cap.price` per `duration` window begun (covers distance and
    /// pause charges, which are not split into windows).
    static func overallCap(_ plan: FarePlan, riding: Int64, subtotal: Int64) -> Int64 {
        guard let cap = plan.cap, cap.duration > 0 else { return subtotal }
        let window = mul(cap.duration, 60)
        let windows = max(1, riding / window + (riding % window == 0 ? 0 : 1))
        return min(subtotal, mul(windows, cap.price))
    }

    // Saturating arithmetic: an absurd figure bills Int64.max (or min), never traps.

    @inline(__always) static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, o) = a.addingReportingOverflow(b)
        return o ? (b > 0 ? .max : .min) : r
    }

    @inline(__always) static func sub(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, o) = a.subtractingReportingOverflow(b)
        return o ? (b < 0 ? .max : .min) : r
    }

    @inline(__always) static func mul(_ a: Int64, _ b: Int64) -> Int64 {
        let (r, o) = a.multipliedReportingOverflow(by: b)
        return o ? ((a < 0) != (b < 0) ? .min : .max) : r
    }
}
