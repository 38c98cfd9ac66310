import RideCore
import RideProtocol
import RideStore
import Synchronization

/// Where every ride is (issue 28), kept by the store worker: each ride's `RideGeo` (trace,
/// distance, zone rules), which position reports count, when a trace checkpoint is owed, and
/// what start and end are allowed. Owned by the store worker thread: zone lookups and the
/// trace filter run there, never on the tick, and the checkpoints it hands out go into that
/// worker's group commit. Only `counters` is read elsewhere (by `/metrics`).
///
/// Time comes from the injected clock (the server's; a `ManualClock` advanced by hand in tests).
package final class GeoDesk {
    package let zones: Geofencing?
    package let config: RideGeo.Config
    package let counters = GeoCounters()
    package let clock: RideClock
    private var rides: [String: RideGeo] = [:]
    /// Rides whose distance or position changed since their last checkpoint.
    private var dirty: Set<String> = []
    /// Rides holding a `fleet_warning` until their warning interval is over.
    private var warnings: Set<String> = []

    package init(zones: Geofencing?, config: RideGeo.Config = RideGeo.Config(), clock: RideClock) {
        self.zones = zones
        self.clock = clock
        self.config = config
    }

    /// Rides the desk holds a trace for (tests, and the benchmark's memory figure).
    package var count: Int { rides.count }

    /// The zone rules where `ride` last was, if it reported a position here (the device pushes'
    /// content-state).
    package func zone(_ ride: String) -> ZoneDecision? { rides[ride]?.current }

    /// Whether `ride`'s trace is in memory here (else the store's checkpoint is read first).
    package func holds(_ ride: String) -> Bool { rides[ride] != nil }

    // MARK: start and end

    /// May a ride start with these fields (`start`'s `lat`/`lon`/`vehicle_type`)?
    package func canStart(_ fields: ZoneFields?) -> GeoVerdict {
        let now = clock.now()
        if zones != nil, fields?.position != nil { counters.add(counters.zoneLookups) }
        return RideGeo.canStart(at: fields?.position, vehicleType: fields?.vehicleType, zones: zones, now: now)
    }

    /// A start that was decided: the ride's trace begins. Returns the rules where it started
    /// (pushed after the start, so subscribers know them from the beginning) and the
    /// checkpoint to write with the start when it has anything to keep (its vehicle type).
    package func started(ride: String, fields: ZoneFields?) -> (rules: ZoneDecision?, checkpoint: TraceCheckpoint?) {
        let now = clock.now()
        if zones != nil, fields?.position != nil { counters.add(counters.zoneLookups) }
        let geo = RideGeo(zones: zones, vehicleType: fields?.vehicleType, start: fields?.position, now: now, config: config)
        // A ride that said nothing of where it is costs nothing here until it reports.
        if fields != nil { rides[ride] = geo }
        let keep = fields?.vehicleType != nil
        return (geo.current, keep ? Self.checkpoint(ride, geo) : nil)
    }

    /// May `ride` end now? Reads the ride's trace (from `load`, the store's checkpoint, if not
    /// held). `force` counts only for an ops token.
    package func canEnd(_ ride: String, force: Bool, isOps: Bool,
                        load: () throws(StoreError) -> TraceCheckpoint?) throws(StoreError) -> GeoVerdict {
        let geo = try self.geo(ride, load: load)
        if zones != nil, geo.place != nil { counters.add(counters.zoneLookups) }
        return geo.canEnd(now: clock.now(), force: force, isOps: isOps)
    }

    /// The distance to bill at the end: an operator's `clientDistance` when given, else the
    /// trace's, or a rider's `clientDistance` for a ride that sent no positions.
    package func billedMetres(_ ride: String, clientDistance: Int64?, byOperator: Bool = false,
                              load: () throws(StoreError) -> TraceCheckpoint?) throws(StoreError) -> Int64 {
        try geo(ride, load: load).billedMetres(clientDistance: clientDistance, byOperator: byOperator)
    }

    /// The checkpoint written with a transition of `ride` (its distance and position as of
    /// now), or nil when the desk holds nothing for it (nothing changed since the store's).
    /// Counts as the ride's checkpoint.
    package func transition(_ ride: String) -> TraceCheckpoint? {
        let now = clock.now()
        guard var geo = rides[ride], geo.position != nil || geo.metres > 0 || geo.vehicleType != nil else { return nil }
        geo.checkpointed(at: now)
        rides[ride] = geo
        dirty.remove(ride)
        counters.add(counters.checkpoints)
        return Self.checkpoint(ride, geo)
    }

    /// The ride ended (its final checkpoint went with the end) or another node changed it:
    /// forget the trace here; the store's checkpoint is read again if it is needed.
    package func forget(_ ride: String) {
        rides[ride] = nil
        dirty.remove(ride)
        warnings.remove(ride)
    }

    // MARK: positions

    /// What one position report led to, for the worker to act on.
    package struct Report: Equatable {
        package var outcome: RideGeo.Outcome
        /// The checkpoint to write in this group (it was due).
        package var checkpoint: TraceCheckpoint?
        package var metres: Int64
        package var position: TracePoint?
    }

    /// One `position` of `ride`, received at `now`.
    package func report(_ ride: String, _ p: TracePoint,
                        load: () throws(StoreError) -> TraceCheckpoint?) throws(StoreError) -> Report {
        let now = clock.now()
        var geo = try self.geo(ride, load: load)
        let outcome = geo.report(p, now: now)
        switch outcome.verdict {
        case .accepted:
            counters.add(counters.accepted)
            if zones != nil { counters.add(counters.zoneLookups) }
            dirty.insert(ride)
        case .dropped(let why):
            counters.drop(why)
        }
        if geo.heldWarning != nil { warnings.insert(ride) } else { warnings.remove(ride) }
        var checkpoint: TraceCheckpoint?
        if outcome.checkpointDue {
            geo.checkpointed(at: now)
            dirty.remove(ride)
            counters.add(counters.checkpoints)
            checkpoint = Self.checkpoint(ride, geo)
        }
        rides[ride] = geo
        return Report(outcome: outcome, checkpoint: checkpoint, metres: geo.metres, position: geo.position)
    }

    /// Checkpoints now owed by rides whose trace changed and whose last checkpoint is
    /// `checkpointInterval` old, though no report arrived since to notice it (the worker
    /// asks at every group). Each counts as written.
    package func dueCheckpoints() -> [TraceCheckpoint] {
        let now = clock.now()
        guard !dirty.isEmpty else { return [] }
        var out: [TraceCheckpoint] = []
        for ride in dirty {
            guard var geo = rides[ride], geo.checkpointDue(now: now) else { continue }
            geo.checkpointed(at: now)
            rides[ride] = geo
            out.append(Self.checkpoint(ride, geo))
        }
        for c in out { dirty.remove(c.ride) }
        counters.add(counters.checkpoints, out.count)
        return out
    }

    /// Held `fleet_warning`s whose ride's interval is over though no report arrived since to
    /// send them (the worker asks at every group, as for checkpoints).
    package func dueWarnings() -> [(ride: String, warning: HeldWarning)] {
        guard !warnings.isEmpty else { return [] }
        let now = clock.now()
        var out: [(ride: String, warning: HeldWarning)] = []
        for ride in warnings {
            guard var geo = rides[ride], let w = geo.dueWarning(now: now) else { continue }
            rides[ride] = geo
            out.append((ride, w))
        }
        for w in out { warnings.remove(w.ride) }
        return out
    }

    /// The ride's distance and last fix, for a `state` or a tick (nil: no trace held).
    package func trace(_ ride: String) -> (metres: Int64, position: TracePoint?)? {
        // A ride that reported nothing has no trace to show (its distance is the client's).
        rides[ride].flatMap { $0.reports > 0 || $0.position != nil ? ($0.metres, $0.position) : nil }
    }

    // MARK: -

    private func geo(_ ride: String, load: () throws(StoreError) -> TraceCheckpoint?) throws(StoreError) -> RideGeo {
        let now = clock.now()
        if let g = rides[ride] { return g }
        let c = try load()
        if zones != nil, c?.last != nil { counters.add(counters.zoneLookups) }
        let g = RideGeo(zones: zones, vehicleType: c?.vehicleType, metres: c?.metres ?? 0, last: c?.last,
                        receivedAt: c?.receivedAt, now: now, config: config)
        rides[ride] = g
        return g
    }

    private static func checkpoint(_ ride: String, _ g: RideGeo) -> TraceCheckpoint {
        TraceCheckpoint(ride: ride, metres: g.metres, last: g.position, receivedAt: g.position == nil ? nil : g.placeReceivedAt,
                        vehicleType: g.vehicleType)
    }
}

/// What `/metrics` shows of positions: accepted, dropped by reason, zone lookups, checkpoints.
/// Atomics: bumped by the store worker, read by a scrape on any thread.
package final class GeoCounters: Sendable {
    package let accepted = Atomic<Int>(0)
    package let zoneLookups = Atomic<Int>(0)
    package let checkpoints = Atomic<Int>(0)
    private let future = Atomic<Int>(0)
    private let stale = Atomic<Int>(0)
    private let tooSoon = Atomic<Int>(0)
    private let inaccurate = Atomic<Int>(0)
    private let tooFast = Atomic<Int>(0)
    private let rateLimited = Atomic<Int>(0)

    package init() {}

    package func add(_ a: borrowing Atomic<Int>, _ n: Int = 1) { a.wrappingAdd(n, ordering: .relaxed) }

    func drop(_ why: TraceDrop) {
        switch why {
        case .future: add(future)
        case .stale: add(stale)
        case .tooSoon: add(tooSoon)
        case .inaccurate: add(inaccurate)
        case .tooFast: add(tooFast)
        case .rateLimited: add(rateLimited)
        }
    }

    /// Drops by reason, every reason present (in `TraceDrop.allCases` order).
    package func drops() -> [(reason: TraceDrop, count: Int)] {
        TraceDrop.allCases.map { why in
            let n: Int
            switch why {
            case .future: n = future.load(ordering: .relaxed)
            case .stale: n = stale.load(ordering: .relaxed)
            case .tooSoon: n = tooSoon.load(ordering: .relaxed)
            case .inaccurate: n = inaccurate.load(ordering: .relaxed)
            case .tooFast: n = tooFast.load(ordering: .relaxed)
            case .rateLimited: n = rateLimited.load(ordering: .relaxed)
            }
            return (why, n)
        }
    }

    package func value(_ a: borrowing Atomic<Int>) -> Int { a.load(ordering: .relaxed) }
}
