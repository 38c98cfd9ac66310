import RideCore

/// The operator feed of ride.v1 as values (`watch_all`; docs/protocol.md, "The operator feed"): what an
/// operator's client decodes, what the golden examples (protocol/examples/ops) round-trip
/// through, and what the server encodes (`OpsCodec`). Riders never receive these.
public enum OpsMessage: Sendable, Equatable {
    /// The answer to `watch_all`, in frames of at most 2,000 rides (`more` on all but the last).
    case snapshot(FleetSnapshot)
    /// Once a tick: every ticking ride as a positional row.
    case fleet(FleetFrame)
    case fleetEvent(FleetEvent)
    case fleetWarning(FleetWarning)
    case unwatchedAll(id: String?)
    /// An operator's `get`: the state with the ride's journal and watchers.
    case state(WatchedRide, id: String?)

    public var type: String {
        switch self {
        case .snapshot: return "snapshot"
        case .fleet: return "fleet"
        case .fleetEvent: return "fleet_event"
        case .fleetWarning: return "fleet_warning"
        case .unwatchedAll: return "unwatched_all"
        case .state: return "state"
        }
    }

    public var id: String? {
        switch self {
        case .snapshot(let s): return s.id
        case .unwatchedAll(let id), .state(_, let id): return id
        case .fleet, .fleetEvent, .fleetWarning: return nil
        }
    }
}

/// `watch_all` / `unwatch_all`: an operator's requests (an ops token is needed).
public struct OpsRequest: Sendable, Equatable {
    public enum Kind: String, Sendable { case watchAll = "watch_all", unwatchAll = "unwatch_all" }
    public var kind: Kind
    public var id: String?

    public init(kind: Kind, id: String?) {
        self.kind = kind
        self.id = id
    }
}

/// Rides by state, the numbers `/healthz` reports at that instant.
public struct RideCounts: Sendable, Equatable {
    public var riding: Int
    public var paused: Int
    public var ended: Int

    public init(riding: Int = 0, paused: Int = 0, ended: Int = 0) {
        self.riding = riding
        self.paused = paused
        self.ended = ended
    }
}

/// One ride of a `fleet` frame, sent as the array `[ride, state, elapsed, paused, fare,
/// remaining|null, watchers]` (~45 bytes a ride instead of a ~130-byte tick each).
public struct FleetRow: Sendable, Equatable {
    /// The positions of a row's values: protocol/examples/ops/fleet-row.json, and the
    /// operator console (public/ops/ops.js) reads them in this order.
    public static let columns = ["ride", "state", "elapsed", "paused", "fare", "remaining", "watchers"]

    public var ride: String
    public var state: RideState
    public var elapsed: Int64
    public var paused: Int64
    public var fare: Int64
    public var remaining: Int64?
    public var watchers: Int64
    /// The ride's last position, `[lat, lon]` after the columns when the server has one (issue 28).
    public var position: GeoPoint?

    public init(ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64, remaining: Int64?, watchers: Int64,
                position: GeoPoint? = nil) {
        self.position = position
        self.ride = ride
        self.state = state
        self.elapsed = elapsed
        self.paused = paused
        self.fare = fare
        self.remaining = remaining
        self.watchers = watchers
    }
}

/// `{"type":"fleet",…}`: every ticking ride of one tick, encoded once for every operator.
public struct FleetFrame: Sendable, Equatable {
    public var seq: Int64
    public var at: Int64
    public var counts: RideCounts
    public var rows: [FleetRow]

    public init(seq: Int64, at: Int64, counts: RideCounts, rows: [FleetRow]) {
        self.seq = seq
        self.at = at
        self.counts = counts
        self.rows = rows
    }
}

/// One ride of a snapshot (`watch_all`) or of the listing (`GET /rides`): the state fields
/// with the plan's id instead of the plan. Only the listing carries `ended_at` and, once
/// ended, `reason`.
public struct RideRow: Sendable, Equatable {
    public var ride: String
    public var state: RideState
    public var elapsed: Int64
    public var paused: Int64
    public var fare: Int64
    public var currency: String
    public var remaining: Int64?
    public var limit: Int64?
    public var owner: String?
    /// The plan's id.
    public var plan: String
    public var startedAt: Int64
    public var endedAt: Int64?
    public var pausedSince: Int64?
    public var reason: EndReason?
    public var watchers: Int64

    public init(ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64, currency: String,
                remaining: Int64? = nil, limit: Int64? = nil, owner: String? = nil, plan: String, startedAt: Int64,
                endedAt: Int64? = nil, pausedSince: Int64? = nil, reason: EndReason? = nil, watchers: Int64) {
        self.ride = ride
        self.state = state
        self.elapsed = elapsed
        self.paused = paused
        self.fare = fare
        self.currency = currency
        self.remaining = remaining
        self.limit = limit
        self.owner = owner
        self.plan = plan
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.pausedSince = pausedSince
        self.reason = reason
        self.watchers = watchers
    }

    public init(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int) {
        let f = RideFigures(ride, plan, at: at)
        self.init(ride: ride.id, state: ride.state, elapsed: f.elapsed, paused: f.paused, fare: f.fare,
                  currency: plan.currency.code, remaining: f.remaining, limit: ride.limit, owner: ride.owner,
                  plan: ride.planID, startedAt: ride.startedAt, endedAt: ride.endedAt, pausedSince: ride.pausedSince,
                  reason: ride.endReason, watchers: Int64(watchers))
    }
}

/// `{"type":"snapshot",…}`: one frame of the answer to `watch_all`.
public struct FleetSnapshot: Sendable, Equatable {
    public var id: String?
    /// The tick the snapshot stands for.
    public var seq: Int64
    public var at: Int64
    /// True on every frame but the last.
    public var more: Bool
    public var counts: RideCounts
    public var rides: [RideRow]

    public init(id: String?, seq: Int64, at: Int64, more: Bool, counts: RideCounts, rides: [RideRow]) {
        self.id = id
        self.seq = seq
        self.at = at
        self.more = more
        self.counts = counts
        self.rides = rides
    }
}

/// A transition as the journal and the feed name it.
public enum TransitionKind: String, Sendable, Equatable {
    case start, pause, resume, end

    public init(_ t: RideTransition) {
        switch t {
        case .start: self = .start
        case .pause: self = .pause
        case .resume: self = .resume
        case .end: self = .end
        }
    }
}

/// One transition of a ride's journal, as an operator reads it.
public struct JournalEntry: Sendable, Equatable {
    public var event: TransitionKind
    public var at: Int64
    /// Ends only.
    public var reason: EndReason?
    /// Metres, on an end that carried a distance.
    public var distance: Int64?

    public init(event: TransitionKind, at: Int64, reason: EndReason? = nil, distance: Int64? = nil) {
        self.event = event
        self.at = at
        self.reason = reason
        self.distance = distance
    }

    public init(_ t: RideTransition) {
        if case .end(let at, let reason, let metres) = t {
            self.init(event: .end, at: at, reason: reason, distance: metres > 0 ? metres : nil)
        } else {
            self.init(event: TransitionKind(t), at: t.at)
        }
    }
}

/// A ride as an operator sees it: its state fields, its journal when it was read (an
/// operator's `get`, `GET /rides/{id}?journal=1`) and the rider pages watching it.
public struct WatchedRide: Sendable, Equatable {
    public var ride: RideSnapshot
    public var journal: [JournalEntry]?
    public var watchers: Int64
    /// The ride's push targets (issue 38): in `GET /rides/{id}` for an operator (or with auth
    /// off) only; nil elsewhere (the fleet events), where the field is left out.
    public var pushTargets: Int64?

    public init(ride: RideSnapshot, journal: [JournalEntry]? = nil, watchers: Int64, pushTargets: Int64? = nil) {
        self.ride = ride
        self.journal = journal
        self.watchers = watchers
        self.pushTargets = pushTargets
    }
}

/// `{"type":"fleet_event",…}`: a transition of any ride, to every operator, in commit order.
public struct FleetEvent: Sendable, Equatable {
    public var event: TransitionKind
    public var at: Int64
    /// As `GET /rides/{id}` shows it (the receipt once ended), with its watchers.
    public var ride: WatchedRide

    public init(event: TransitionKind, at: Int64, ride: WatchedRide) {
        self.event = event
        self.at = at
        self.ride = ride
    }
}

/// `{"type":"fleet_warning",…}`: a ride has 5 minutes or 1 minute left.
public struct FleetWarning: Sendable, Equatable {
    public var ride: String
    /// A time-limit warning: seconds of riding left.
    public var remaining: Int64?
    /// A zone warning (issue 28): the ride entered a zone where riding through is not
    /// allowed; `zone` and `rules` as its `zone` push says them.
    public var zone: ZoneUpdate?
    public var at: Int64

    public init(ride: String, remaining: Int64, at: Int64) {
        self.ride = ride
        self.remaining = remaining
        self.at = at
    }

    public init(ride: String, zone: ZoneUpdate, at: Int64) {
        self.ride = ride
        self.zone = zone
        self.at = at
    }
}

/// `GET /rides`: one page of the listing, newest first; `next` is the cursor of the page after.
public struct RideListing: Sendable, Equatable {
    public var rides: [RideRow]
    public var next: String?

    public init(rides: [RideRow], next: String?) {
        self.rides = rides
        self.next = next
    }
}
