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
    /// Stamped more than `maxAhead` after the server received it: a device clock that is
    /// wrong, or fixes made up in advance.
    case future
    /// Older than (or as old as) the last accepted point: a late or replayed report.
    case stale
    /// Less than `minInterval` after the last accepted point: at most one point per second counts.
    case tooSoon = "too_soon"
    /// `accuracy` above `maxAccuracyMetres`.
    case inaccurate
    /// Reaching it from the last accepted point would take more than `maxSpeedKph`.
    case tooFast = "too_fast"
    /// Over the ride's position rate (RideGeo.Config.maxReportsPerSecond): never judged.
    case rateLimited = "rate_limited"
}

/// A ride's accepted positions and the distance along them: the one place that decides which
/// reports count. Pure and clock-free: it reads the points' own `at` and the server's receipt
/// time handed in with each, so a replay of the same reports at the same times gives the same
/// distance.
///
/// The device's clock orders the fixes (stale, too soon) but the server's clock bounds them: a
/// fix more than `maxAhead` after its receipt is dropped, and the speed is measured between the
/// later of each fix's own time and its receipt. A fix is thus never earlier than it arrived
/// and never more than `maxAhead` later, so a run of fixes cannot claim more time than passed
/// at the server plus `maxAhead`: fixes sent faster than real time (stamped ahead, or back-
/// dated and sent in a burst) are too fast, not a ride.
///
/// A dropped point leaves the last accepted one in place, so one wild fix (a 5 km jump) costs
/// nothing, and the next good fix is measured from where the ride really was. The price: after
/// a genuine gap in reports, points are dropped as too fast until the elapsed time makes the
/// straight line plausible again (5 km at 60 km/h: 5 minutes); fixes a device held back while
/// offline and sends at once mostly do not count, and the distance is measured straight from
/// the last one that did.
public struct TraceFilter: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        public var maxAccuracyMetres: Double
        public var maxSpeedKph: Double
        public var minInterval: UnixMillis
        /// How far a fix's `at` may be after the server received it: phone clocks run a little
        /// fast; more than this is a wrong clock or a forgery.
        public var maxAhead: UnixMillis

        public init(maxAccuracyMetres: Double = 50, maxSpeedKph: Double = 60, minInterval: UnixMillis = 1000,
                    maxAhead: UnixMillis = 5000) {
            self.maxAccuracyMetres = maxAccuracyMetres
            self.maxSpeedKph = maxSpeedKph
            self.minInterval = minInterval
            self.maxAhead = maxAhead
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
    /// The later of `last.at` and when the server received it: where the next speed is measured from.
    public private(set) var lastTime: UnixMillis?
    public private(set) var accepted: Int64 = 0
    /// Drops so far, by reason (every reason present, 0 until it happens).
    public private(set) var drops: [TraceDrop: Int64] = Dictionary(uniqueKeysWithValues: TraceDrop.allCases.map { ($0, 0) })
    /// Millimetres, summed exactly in integers: per-step rounding to metres would lose up to half
    /// a metre a second (10 % at walking pace), and a Double sum would depend on step order.
    public private(set) var millimetres: Int64 = 0

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// A filter resumed from a durable checkpoint (distance, last position and when a server
    /// received it), so the first report after a restart is checked against where the ride was.
    public init(limits: Limits = Limits(), metres: Int64, last: TracePoint?, receivedAt: UnixMillis? = nil) {
        self.limits = limits
        self.millimetres = metres * 1000
        var last = last
        // A fix accepted before the future was checked (a device's year 2100) would make every
        // honest fix after it stale: it counts as made when it arrived.
        if let r = receivedAt, let at = last?.at, at > r + limits.maxAhead { last?.at = r }
        self.last = last
        lastTime = last.map { max($0.at, receivedAt ?? $0.at) }
    }

    /// The distance so far in whole metres (nearest).
    public var metres: Int64 { (millimetres + 500) / 1000 }

    /// Counts `p`, received by the server at `receivedAt` (its clock), or says why not.
    @discardableResult
    public mutating func offer(_ p: TracePoint, receivedAt: UnixMillis) -> Verdict {
        let verdict = judge(p, receivedAt: receivedAt)
        switch verdict {
        case .accepted(let m):
            millimetres += Int64((m * 1000).rounded())
            last = p
            lastTime = max(p.at, receivedAt)
            accepted += 1
        case .dropped(let why):
            drops[why, default: 0] += 1
        }
        return verdict
    }

    /// What `offer` would decide, without changing anything.
    public func judge(_ p: TracePoint, receivedAt: UnixMillis) -> Verdict {
        // Order matters for the counters only: a made-up future is that before it is anything
        // else, and a replayed point is stale before it is too soon.
        if p.at > receivedAt &+ limits.maxAhead { return .dropped(.future) }
        if let last {
            if p.at <= last.at { return .dropped(.stale) }
            if p.at - last.at < limits.minInterval { return .dropped(.tooSoon) }
        }
        if !(p.accuracy <= limits.maxAccuracyMetres) { return .dropped(.inaccurate) }  // NaN is inaccurate too
        guard let last, let lastTime else { return .accepted(metres: 0) }
        let metres = Geo.haversineMetres(last.point, p.point)
        // Not the device's interval alone: never more time than passed at the server (plus
        // maxAhead once), so fixes cannot arrive faster than real time.
        let seconds = Double(max(p.at, receivedAt) - lastTime) / 1000
        guard seconds > 0 else { return metres > 0 ? .dropped(.tooFast) : .accepted(metres: 0) }
        // km/h = m/s × 3.6
        if metres / seconds * 3.6 > limits.maxSpeedKph { return .dropped(.tooFast) }
        return .accepted(metres: metres)
    }
}
