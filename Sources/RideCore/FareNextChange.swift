/// When the fare of a ride that keeps riding next changes: what a lock-screen push says ahead
/// of time (`fare_next`, `fare_next_at`) so that the device needs no push until then.
///
/// The fare only moves where a per-minute segment bills another interval or a cap window
/// begins, so only those seconds (and the second after each, for the started-interval rule)
/// are tried, against `FareEngine.fare` itself: nothing of the fare rules is restated here.
extension FareEngine {
    /// The first whole second of riding after `riding` whose fare differs from the fare at
    /// `riding` (pause and distance held where they are), with that fare; nil when the fare
    /// stays the same for `horizon` more seconds (or the plan has no time charge).
    public static func nextChange(_ plan: FarePlan, riding: Int64, paused: Int64, metres: Int64 = 0,
                                  within horizon: Int64 = 86_400) -> (riding: Int64, fare: Int64)? {
        let now = fare(plan, riding: riding, paused: paused, metres: metres)
        let last = add(riding, max(0, horizon))
        var t = riding
        while let c = nextCandidate(plan, after: t), c <= last {
            let f = fare(plan, riding: c, paused: paused, metres: metres)
            if f != now { return (c, f) }
            t = c
        }
        return nil
    }

    /// The smallest second after `t` at which some step of the plan's time fare may happen.
    static func nextCandidate(_ plan: FarePlan, after t: Int64) -> Int64? {
        var best: Int64?
        func consider(origin: Int64, step: Int64, until end: Int64) {
            // Grid points origin + k·step (k ≥ 0, below `end`) and the second after each.
            var c: Int64
            if t < origin {
                c = origin
            } else {
                let g = add(origin, mul((t - origin) / step, step))
                c = g + 1 > t && g + 1 <= end ? g + 1 : add(g, step)
            }
            guard c <= end, c > t else { return }
            best = min(best ?? c, c)
        }
        for seg in plan.perMinute where seg.rate != 0 {
            let start = mul(seg.start, 60)
            let end = seg.end.map { mul($0, 60) } ?? Int64.max
            guard start < end else { continue }
            // `interval: 0` bills once, as soon as the segment has begun.
            let step = seg.interval > 0 ? mul(seg.interval, 60) : Int64.max
            consider(origin: start, step: step, until: add(end, 1))
        }
        if let cap = plan.cap, cap.duration > 0 {
            consider(origin: 0, step: mul(cap.duration, 60), until: Int64.max)
        }
        return best
    }
}
