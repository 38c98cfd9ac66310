import RideCore

/// The numbers a tick, a state message and an operator's row share, derived from the ride at
/// one instant.
public struct RideFigures: Equatable, Sendable {
    public var elapsed: Int64
    public var paused: Int64
    public var fare: Int64
    /// Seconds left before the time limit, when the ride has one (ended rides too: a row of
    /// the operators' listing shows it, a state message leaves it out).
    public var remaining: Int64?

    /// `metres`: the distance from the ride's trace so far, billed live by a per-km plan
    /// (an ended ride's billed distance is its end's, `ride.metres`). Both borrowed: the tick
    /// calls this for every watched ride, and an init takes its arguments owned otherwise (a
    /// copy of the plan, retaining each of its arrays and strings).
    public init(_ ride: borrowing Ride, _ plan: borrowing FarePlan, at: UnixMillis, metres: Int64? = nil) {
        elapsed = ride.elapsedSeconds(at: at)
        paused = ride.pausedSeconds(at: at)
        fare = FareEngine.fare(plan, riding: elapsed, paused: paused, metres: ride.state == .ended ? ride.metres : (metres ?? ride.metres))
        remaining = ride.remainingSeconds(at: at)
    }
}

// The wire values of a ride as the server sees it: the server encodes these, never the ride
// (the tick alone goes field by field, ServerMessages.tick).

extension RideSnapshot {
    /// `distance` and `position`: the ride's trace as the server holds it (issue 28), if any.
    public init(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, distance: Int64? = nil, position: RidePosition? = nil) {
        let f = RideFigures(ride, plan, at: at, metres: distance)
        var receipt: Receipt?
        if ride.state == .ended {
            let q = FareEngine.quote(plan, riding: f.elapsed, paused: f.paused, metres: ride.metres)
            receipt = Receipt(elapsed: f.elapsed, paused: f.paused, fare: q.total, currency: plan.currency.code,
                              startedAt: ride.startedAt, endedAt: ride.endedAt, reason: ride.endReason ?? .rider,
                              distance: ride.metres > 0 ? ride.metres : nil, lines: q.lines)
        }
        // Nothing is left of an ended ride.
        self.init(ride: ride.id, state: ride.state, elapsed: f.elapsed, paused: f.paused, fare: f.fare,
                  currency: plan.currency.code, remaining: ride.state == .ended ? nil : f.remaining, at: at,
                  limit: ride.limit, startedAt: ride.startedAt, endedAt: ride.endedAt, pausedSince: ride.pausedSince,
                  owner: ride.owner, plan: PlanSummary(plan), receipt: receipt)
        // An ended ride with a trace: the distance billed (its receipt's).
        self.distance = ride.state == .ended ? distance.map { _ in ride.metres } : distance
        self.position = position
    }
}

extension PlanSummary {
    public init(_ plan: FarePlan) {
        self.init(id: plan.id, name: plan.displayName, currency: plan.currency.code, price: plan.price,
                  perMinute: plan.perMinute, billing: plan.billing, pauseRate: plan.pauseRate != 0 ? plan.pauseRate : nil,
                  cap: plan.cap)
    }
}

extension QuoteReply {
    public init(plan: FarePlan, quote q: Quote, seconds: Int64, paused: Int64) {
        self.init(plan: plan.id, seconds: seconds, paused: paused, fare: q.total, currency: q.currency.code,
                  lines: q.lines)
    }
}
