/// One position a device reported: where, when (Unix milliseconds, the device's own fix time)
/// and how sure it is (metres, the radius of 68 % confidence, as Core Location and Android give it).
public struct TracePoint: Sendable, Equatable {
    public var point: GeoPoint
    public var at: UnixMillis
    public var accuracy: Double

    public init(lat: Double, lon: Double, at: UnixMillis, accuracy: Double) {
        self.point = GeoPoint(lat: lat, lon: lon)
        self.at = at
        self.accuracy = accuracy
    }
}

/// Why a reported position did not count.
public enum TraceDrop: String, Sendable, CaseIterable {
    /// Older than (or as old as) the last accepted point: a late or replayed report.
    case stale
    /// Less than `minInterval` after the last accepted point: at most one point per second counts.
    case tooSoon = "too_soon"
    /// `accuracy` above `maxAccuracyMetres`.
    case inaccurate
    /// Reaching it from the last accepted point would take more than `maxSpeedKph`.
    case tooFast = "too_fast"
}

/// A ride's accepted positions and the distance along them: the one place that decides which
/// reports count. Pure and clock-free: every decision reads only the points' own `at`, so a
/// replay of the same reports gives the same distance.
///
/// A dropped point leaves the last accepted one in place, so one wild fix (a 5 km jump) costs
/// nothing, and the next good fix is measured from where the ride really was. The price: after
/// a genuine gap in reports, points are dropped as too fast until the elapsed time makes the
/// straight line plausible again (5 km at 60 km/h: 5 minutes).
public struct TraceFilter: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        public var maxAccuracyMetres: Double
        public var maxSpeedKph: Double
        public var minInterval: UnixMillis

        public init(maxAccuracyMetres: Double = 50, maxSpeedKph: Double = 60, minInterval: UnixMillis = 1000) {
            self.maxAccuracyMetres = maxAccuracyMetres
            self.maxSpeedKph = maxSpeedKph
            self.minInterval = minInterval
        }
    }

    public enum Verdict: Sendable, Equatable {
        /// Counted; `metres` is the distance it added (0 for the first point).
        case accepted(metres: Double)
        case dropped(TraceDrop)
    }

    public var limits: Limits
    /// The last accepted point: the ride's position.
    public private(set) var last: TracePoint?
    public private(set) var accepted: Int64 = 0
    /// Drops so far, by reason (every reason present, 0 until it happens).
    public private(set) var drops: [TraceDrop: Int64] = Dictionary(uniqueKeysWithValues: TraceDrop.allCases.map { ($0, 0) })
    /// Millimetres, summed exactly in integers: per-step rounding to metres would lose up to half
    /// a metre a second (10 % at walking pace), and a Double sum would depend on step order.
    public private(set) var millimetres: Int64 = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// A filter resumed from a durable checkpoint (distance and last position), so the first
    /// report after a restart is checked against where the ride was.
    public init(limits: Limits = Limits(), metres: Int64, last: TracePoint?) {
        self.limits = limits
        self.millimetres = metres * 1000
        self.last = last
    }

    /// The distance so far in whole metres (nearest).
    public var metres: Int64 { (millimetres + 500) / 1000 }

    /// Counts `p` or says why not.
    @discardableResult
    public mutating func offer(_ p: TracePoint) -> Verdict {
        let verdict = judge(p)
        switch verdict {
        case .accepted(let m):
            millimetres += Int64((m * 1000).rounded())
            last = p
            accepted += 1
        case .dropped(let why):
            drops[why, default: 0] += 1
        }
        return verdict
    }

    /// What `offer` would decide, without changing anything.
    public func judge(_ p: TracePoint) -> Verdict {
        // Order matters for the counters only: a replayed point is stale before it is anything else.
        if let last {
            if p.at <= last.at { return .dropped(.stale) }
            if p.at - last.at < limits.minInterval { return .dropped(.tooSoon) }
        }
        if !(p.accuracy <= limits.maxAccuracyMetres) { return .dropped(.inaccurate) }  // NaN is inaccurate too
        guard let last else { return .accepted(metres: 0) }
        let metres = Geo.haversineMetres(last.point, p.point)
        let seconds = Double(p.at - last.at) / 1000
        // km/h = m/s × 3.6
        if metres / seconds * 3.6 > limits.maxSpeedKph { return .dropped(.tooFast) }
        return .accepted(metres: metres)
    }
}
