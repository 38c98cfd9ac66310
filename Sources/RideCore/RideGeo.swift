/// One ride's place in the world, decided without I/O: which reported positions count
/// (`TraceFilter`), the distance, the last known position, the zone rules in force there, and
/// what the server owes the ride's subscribers and the store after each report (a `zone` push,
/// a `fleet_warning`, a checkpoint). Start and end are judged here too (`canStart`, `canEnd`).
///
/// Two clocks, and the server's decides: the device's `at` orders the fixes, but a fix is
/// judged against `now`, the server's clock the caller passes in (TraceFilter: none from more
/// than a few seconds ahead, none faster than real time). Freshness ("a position in the last
/// 60 s"), the position rate, warning coalescing, the checkpoint interval and zone activity
/// (`start`/`end` of a zone) read `now` only. A device whose clock is off cannot then make an
/// old position look fresh or a made-up trace look ridden, and tests drive time by hand.
public struct RideGeo: Sendable {
    public struct Config: Sendable, Equatable {
        public var limits: TraceFilter.Limits
        /// At most this long between checkpoints while the distance or position changes.
        public var checkpointInterval: UnixMillis
        /// With zones configured, `end` needs a position received at most this long ago.
        public var positionFreshness: UnixMillis
        /// Position reports of one ride judged per second of server time; the rest are dropped
        /// unread. A device reports once a second; five leaves room for bursts after a stall.
        public var maxReportsPerSecond: Int
        /// At most one `fleet_warning` per ride this often: entries in between are held, and
        /// the last one goes out when the interval is over (`dueWarning`).
        public var warningInterval: UnixMillis

        public init(limits: TraceFilter.Limits = TraceFilter.Limits(), checkpointInterval: UnixMillis = 30_000,
                    positionFreshness: UnixMillis = 60_000, maxReportsPerSecond: Int = 5, warningInterval: UnixMillis = 5_000) {
            self.limits = limits
            self.checkpointInterval = checkpointInterval
            self.positionFreshness = positionFreshness
            self.maxReportsPerSecond = maxReportsPerSecond
            self.warningInterval = warningInterval
        }
    }

    /// What one position report led to.
    public struct Outcome: Sendable, Equatable {
        public var verdict: TraceFilter.Verdict
        /// The new rules at the ride's position when what subscribers see (zone name or any of
        /// the four rules) changed: push `{"type":"zone",…}` with it. Nil: nothing to push.
        public var zoneChange: ZoneDecision?
        /// A `fleet_warning` for the ops feed: the place where riding through is not allowed that
        /// the ride entered now, or one it entered during the last `warningInterval` and held
        /// until now. `at` is when the ride entered it.
        public var fleetWarning: HeldWarning?
        /// Dropped for the ride's position rate, and the first such drop of this second: the
        /// sender is told `rate_limited` (once, not once per message).
        public var tellRateLimited: Bool = false
        /// Distance or position changed and the last checkpoint is `checkpointInterval` old:
        /// write one (then call `checkpointed(at:)`).
        public var checkpointDue: Bool

        public var accepted: Bool {
            if case .accepted = verdict { return true }
            return false
        }
    }

    public let zones: Geofencing?
    public let vehicleType: String?
    public let config: Config
    public private(set) var trace: TraceFilter
    /// The rules at the last known position (the start's, then the last accepted fix's); nil
    /// without zones or before any position.
    public private(set) var current: ZoneDecision?
    /// The last known position: the last accepted fix, else where the ride started.
    public private(set) var place: GeoPoint?
    /// Server time the last known position arrived (the start counts when it had one).
    public private(set) var placeReceivedAt: UnixMillis?
    /// Any `position` message at all, counted or dropped: a rider's `end` distance is billed
    /// only for a ride that sent none.
    public private(set) var reports: Int64 = 0
    /// The position rate's one-second window (server time) and the reports judged in it.
    private var windowStart: UnixMillis?
    private var windowReports = 0
    /// When the last `fleet_warning` went out, and an entry since then waiting for the interval.
    private var lastWarningAt: UnixMillis?
    public private(set) var heldWarning: HeldWarning?
    public private(set) var lastCheckpointAt: UnixMillis
    private var checkpointedMillimetres: Int64
    private var checkpointedLast: TracePoint?
    private var lastTickPoint: TracePoint?

    /// A ride that starts now, at `start` if the device said where. The start is a transition
    /// (written with the ride), so it counts as the first checkpoint. The server pushes
    /// `current` after the start so subscribers know the rules from the beginning.
    public init(zones: Geofencing?, vehicleType: String?, start: GeoPoint?, now: UnixMillis, config: Config = Config()) {
        self.zones = zones
        self.vehicleType = vehicleType
        self.config = config
        trace = TraceFilter(limits: config.limits)
        place = start
        placeReceivedAt = start == nil ? nil : now
        current = start.flatMap { p in zones?.decide(at: p, vehicleType: vehicleType, time: now) }
        lastCheckpointAt = now
        checkpointedMillimetres = 0
        checkpointedLast = nil
    }

    /// A ride resumed from its durable checkpoint (after a restart or on another node).
    /// `receivedAt` is when that position reached a server, if known; without it `end` waits
    /// for a fresh position when zones are configured.
    public init(zones: Geofencing?, vehicleType: String?, metres: Int64, last: TracePoint?, receivedAt: UnixMillis?,
                now: UnixMillis, config: Config = Config()) {
        self.zones = zones
        self.vehicleType = vehicleType
        self.config = config
        trace = TraceFilter(limits: config.limits, metres: metres, last: last, receivedAt: receivedAt)
        place = last?.point
        placeReceivedAt = last == nil ? nil : receivedAt
        current = last.flatMap { p in zones?.decide(at: p.point, vehicleType: vehicleType, time: now) }
        // A checkpoint with a distance or a position means the device did report.
        reports = metres > 0 || last != nil ? 1 : 0
        lastCheckpointAt = now
        checkpointedMillimetres = trace.millimetres
        checkpointedLast = last
        lastTickPoint = last
    }

    /// Whole metres along the accepted trace.
    public var metres: Int64 { trace.metres }

    /// The last accepted fix (what `state` sends as `position`).
    public var position: TracePoint? { trace.last }

    /// May a ride start at `point`? Without zones or without a point: yes (nothing to check;
    /// `end` then asks for a position).
    public static func canStart(at point: GeoPoint?, vehicleType: String?, zones: Geofencing?, now: UnixMillis) -> GeoVerdict {
        guard let zones, let point else { return .allowed }
        let d = zones.decide(at: point, vehicleType: vehicleType, time: now)
        return d.rules.rideStartAllowed ? .allowed : .refused(.startNotAllowed(zone: d.name))
    }

    /// One `position` message, received at `now`.
    public mutating func report(_ p: TracePoint, now: UnixMillis) -> Outcome {
        reports += 1
        if windowStart.map({ now - $0 >= 1000 }) ?? true {
            windowStart = now
            windowReports = 0
        }
        windowReports += 1
        guard windowReports <= config.maxReportsPerSecond else {
            var o = Outcome(verdict: .dropped(.rateLimited), zoneChange: nil, fleetWarning: dueWarning(now: now),
                            checkpointDue: checkpointDue(now: now))
            o.tellRateLimited = windowReports == config.maxReportsPerSecond + 1
            return o
        }
        let verdict = trace.offer(p, receivedAt: now)
        guard case .accepted = verdict else {
            return Outcome(verdict: verdict, zoneChange: nil, fleetWarning: dueWarning(now: now), checkpointDue: checkpointDue(now: now))
        }
        place = p.point
        placeReceivedAt = now
        var change: ZoneDecision?
        if let zones {
            let d = zones.decide(at: p.point, vehicleType: vehicleType, time: now)
            let before = current
            current = d
            if before.map({ !Self.sameForSubscribers($0, d) }) ?? true {
                change = d
                // Entering: through was allowed before (or nothing was known), or this is
                // another zone than the one already warned about.
                if !d.rules.rideThroughAllowed, before.map({ $0.rules.rideThroughAllowed || $0.zone != d.zone }) ?? true {
                    heldWarning = HeldWarning(zone: d, at: now)
                }
            }
        }
        return Outcome(verdict: verdict, zoneChange: change, fleetWarning: dueWarning(now: now), checkpointDue: checkpointDue(now: now))
    }

    /// The held `fleet_warning`, once `warningInterval` has passed since the last one went out
    /// (which it then is). Asked with every report and by the desk's sweep, so a ride that
    /// stops reporting inside a zone is still warned about.
    public mutating func dueWarning(now: UnixMillis) -> HeldWarning? {
        guard let held = heldWarning else { return nil }
        if let last = lastWarningAt, now - last < config.warningInterval { return nil }
        heldWarning = nil
        lastWarningAt = now
        return held
    }

    /// What a `zone` message shows: the name and the four rules (not the zone's index, nor
    /// `station_parking`, which the message does not carry).
    static func sameForSubscribers(_ a: ZoneDecision, _ b: ZoneDecision) -> Bool {
        a.name == b.name && a.rules.rideStartAllowed == b.rules.rideStartAllowed && a.rules.rideEndAllowed == b.rules.rideEndAllowed
            && a.rules.rideThroughAllowed == b.rules.rideThroughAllowed && a.rules.maximumSpeedKph == b.rules.maximumSpeedKph
    }

    /// Distance or position moved since the last checkpoint, and that one is old enough.
    public func checkpointDue(now: UnixMillis) -> Bool {
        let changed = trace.millimetres != checkpointedMillimetres || trace.last != checkpointedLast
        return changed && now - lastCheckpointAt >= config.checkpointInterval
    }

    /// The distance and position as of now are durable (a checkpoint or a transition wrote them).
    public mutating func checkpointed(at now: UnixMillis) {
        lastCheckpointAt = now
        checkpointedMillimetres = trace.millimetres
        checkpointedLast = trace.last
    }

    /// The last accepted fix if it changed since the previous call (a tick carries the
    /// position only then); nil otherwise.
    public mutating func positionForTick() -> TracePoint? {
        guard let last = trace.last, last != lastTickPoint else { return nil }
        lastTickPoint = last
        return last
    }

    /// May the ride end now? With zones configured it needs a position received within
    /// `positionFreshness`, and the rules there (as of `now`) must allow an end. `force`
    /// overrides either refusal for an ops token only (the answer says it was forced, for
    /// the receipt); from anyone else it changes nothing.
    public func canEnd(now: UnixMillis, force: Bool, isOps: Bool) -> GeoVerdict {
        guard let zones else { return .allowed }
        let refusal: GeoRefusal?
        if let place, let at = placeReceivedAt, now - at <= config.positionFreshness {
            let d = zones.decide(at: place, vehicleType: vehicleType, time: now)
            refusal = d.rules.rideEndAllowed ? nil : .endNotAllowed(zone: d.name)
        } else {
            refusal = .positionRequired
        }
        guard let refusal else { return .allowed }
        return force && isOps ? .forced(refusal) : .refused(refusal)
    }

    /// The distance to bill. An operator's `end` distance wins (they looked at the odometer,
    /// or settled a dispute); otherwise the trace's, and a rider's `end` distance only for a
    /// ride that sent no positions (0 when it gave none either).
    public func billedMetres(clientDistance: Int64?, byOperator: Bool = false) -> Int64 {
        if byOperator, let clientDistance { return clientDistance }
        return reports > 0 ? trace.metres : (clientDistance ?? 0)
    }
}

/// A ride's entry into a place where riding through is not allowed, for the operators: the
/// rules there and when (server time) the ride entered.
public struct HeldWarning: Sendable, Equatable {
    public var zone: ZoneDecision
    public var at: UnixMillis

    public init(zone: ZoneDecision, at: UnixMillis) {
        self.zone = zone
        self.at = at
    }
}

/// Why a start or an end is refused.
public enum GeoRefusal: Sendable, Equatable {
    /// `zone`: the deciding zone's name; nil when the global rules refuse.
    case startNotAllowed(zone: String?)
    case endNotAllowed(zone: String?)
    /// Zones are configured and no position arrived in the last `positionFreshness`.
    case positionRequired

    /// The ride.v1 error code.
    public var code: String {
        switch self {
        case .startNotAllowed: return "start_not_allowed"
        case .endNotAllowed: return "end_not_allowed"
        case .positionRequired: return "position_required"
        }
    }

    /// The error's message, as protocol/examples/zones/server/error.*.json write it.
    public func message(ride: String, freshnessSeconds: Int64 = 60) -> String {
        switch self {
        case .startNotAllowed(let zone): return zone.map { "rides may not start in zone \"\($0)\"" } ?? "rides may not start here (global rules)"
        case .endNotAllowed(let zone): return zone.map { "rides may not end in zone \"\($0)\"" } ?? "rides may not end here (global rules)"
        case .positionRequired: return "no position from ride \"\(ride)\" in the last \(freshnessSeconds) s"
        }
    }
}

public enum GeoVerdict: Sendable, Equatable {
    case allowed
    /// Allowed only because an ops token said `force`; the receipt says so.
    case forced(GeoRefusal)
    case refused(GeoRefusal)
}
