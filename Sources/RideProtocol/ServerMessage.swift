import RideCore

/// The server → client messages of ride.v1 as values: what a client decodes, and what the
/// golden examples (protocol/examples/server) round-trip through, and what the server encodes
/// (`ServerCodec.encode`; the server builds these values from its rides with `RideValues`).
public enum ServerMessage: Sendable, Equatable {
    case state(RideSnapshot, id: String?)
    case tick(RideTick)
    case warning(ride: String, remaining: Int64)
    case unsubscribed(ride: String, id: String?)
    case quote(QuoteReply, id: String?)
    case share(ShareLink, id: String?)
    case authenticated(sub: String?, scope: String?, id: String?)
    case error(ProtocolError)
    case zone(ZoneUpdate)
    /// The answer to `register_push` / `unregister_push` (PushMessages.swift).
    case push(PushAck, id: String?)

    /// The id of the request this message answers, if it is a reply.
    public var id: String? {
        switch self {
        case .state(_, let id), .unsubscribed(_, let id), .quote(_, let id), .share(_, let id), .authenticated(_, _, let id),
             .push(_, let id):
            return id
        case .error(let e): return e.id
        case .tick, .warning, .zone: return nil
        }
    }

    /// The `type` field: one of the types in protocol/examples/server.
    public var type: String {
        switch self {
        case .state: return "state"
        case .tick: return "tick"
        case .warning: return "warning"
        case .unsubscribed: return "unsubscribed"
        case .quote: return "quote"
        case .share: return "share"
        case .authenticated: return "authenticated"
        case .error: return "error"
        case .zone: return "zone"
        case .push(let a, _): return a.type
        }
    }
}

/// The ride as a `state` message shows it: the reply to every ride request and the push on
/// every transition. A feed keeps its latest one, with each tick's figures folded in.
public struct RideSnapshot: Sendable, Equatable {
    public var ride: String
    public var state: RideState
    /// Whole seconds of riding and of pause, as billed.
    public var elapsed: Int64
    public var paused: Int64
    /// Minor units of `currency` (KRW: won).
    public var fare: Int64
    public var currency: String
    /// Seconds left before the time limit, when the ride has one.
    public var remaining: Int64?
    /// Unix milliseconds the figures stand for.
    public var at: Int64
    public var limit: Int64?
    public var startedAt: Int64
    public var endedAt: Int64?
    /// Unix milliseconds the pause in progress began; nil while riding or ended (and from
    /// servers before the operator feed, which did not send it).
    public var pausedSince: Int64?
    public var owner: String?
    public var plan: PlanSummary
    /// Set once the ride has ended.
    public var receipt: Receipt?
    /// Metres from the trace and the last accepted position (TraceFields.swift); nil from
    /// servers that do not take positions.
    public var distance: Int64?
    public var position: RidePosition?

    public init(ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64, currency: String,
                remaining: Int64? = nil, at: Int64, limit: Int64? = nil, startedAt: Int64, endedAt: Int64? = nil,
                pausedSince: Int64? = nil, owner: String? = nil, plan: PlanSummary, receipt: Receipt? = nil,
                distance: Int64? = nil, position: RidePosition? = nil) {
        self.ride = ride
        self.state = state
        self.elapsed = elapsed
        self.paused = paused
        self.fare = fare
        self.currency = currency
        self.remaining = remaining
        self.at = at
        self.limit = limit
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.pausedSince = pausedSince
        self.owner = owner
        self.plan = plan
        self.receipt = receipt
        self.distance = distance
        self.position = position
    }

    /// This snapshot with a tick's figures, the tick being of this ride.
    public func applying(_ t: RideTick) -> RideSnapshot {
        var s = self
        s.state = t.state
        s.elapsed = t.elapsed
        s.paused = t.paused
        s.fare = t.fare
        s.currency = t.currency
        s.remaining = t.remaining
        s.at = t.at
        // A tick does not say when a pause began: keep the known start while still paused.
        if t.state != .paused { s.pausedSince = nil }
        // A tick leaves them out when unchanged (or from servers without positions).
        if let d = t.distance { s.distance = d }
        if let p = t.position { s.position = p }
        return s
    }
}

/// `{"type":"tick",…}`: once a second per ride, the same `seq` and `at` for every ride of one tick.
public struct RideTick: Sendable, Equatable {
    public var ride: String
    public var state: RideState
    public var elapsed: Int64
    public var paused: Int64
    public var fare: Int64
    public var currency: String
    public var remaining: Int64?
    public var seq: Int64
    public var at: Int64
    /// Metres from the trace; the last position only when it changed since the previous tick.
    public var distance: Int64?
    public var position: RidePosition?

    public init(ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64, currency: String,
                remaining: Int64? = nil, seq: Int64, at: Int64, distance: Int64? = nil, position: RidePosition? = nil) {
        self.ride = ride
        self.state = state
        self.elapsed = elapsed
        self.paused = paused
        self.fare = fare
        self.currency = currency
        self.remaining = remaining
        self.seq = seq
        self.at = at
        self.distance = distance
        self.position = position
    }
}

/// The rate line of a plan ("기본 500원 + 분당 180원"), amounts in minor units.
public struct PlanSummary: Sendable, Equatable {
    public var id: String
    public var name: String
    public var currency: String
    /// The unlock price.
    public var price: Int64
    public var perMinute: [FareSegment]
    /// Completed or started minutes.
    public var billing: BillingRule
    public var pauseRate: Int64?
    public var cap: FareCap?

    public init(id: String, name: String, currency: String, price: Int64, perMinute: [FareSegment], billing: BillingRule,
                pauseRate: Int64? = nil, cap: FareCap? = nil) {
        self.id = id
        self.name = name
        self.currency = currency
        self.price = price
        self.perMinute = perMinute
        self.billing = billing
        self.pauseRate = pauseRate
        self.cap = cap
    }
}

/// What an ended ride cost; the lines add up to `fare`.
public struct Receipt: Sendable, Equatable {
    public var elapsed: Int64
    public var paused: Int64
    public var fare: Int64
    public var currency: String
    public var startedAt: Int64
    public var endedAt: Int64?
    /// Who or what ended the ride: the rider, an operator, the time limit or the pause limit.
    public var reason: EndReason
    /// Metres, when the end carried a distance.
    public var distance: Int64?
    public var lines: [FareLine]

    public init(elapsed: Int64, paused: Int64, fare: Int64, currency: String, startedAt: Int64, endedAt: Int64?,
                reason: EndReason, distance: Int64? = nil, lines: [FareLine]) {
        self.elapsed = elapsed
        self.paused = paused
        self.fare = fare
        self.currency = currency
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.reason = reason
        self.distance = distance
        self.lines = lines
    }
}

/// One line of a receipt or quote as sent: the fare engine's own line (label, the GBFS
/// segment, minutes or kilometres, amount), so a receipt needs no conversion.
public typealias FareLine = ReceiptLine

public struct QuoteReply: Sendable, Equatable {
    public var plan: String
    public var seconds: Int64
    public var paused: Int64
    public var fare: Int64
    public var currency: String
    public var lines: [FareLine]

    public init(plan: String, seconds: Int64, paused: Int64, fare: Int64, currency: String, lines: [FareLine]) {
        self.plan = plan
        self.seconds = seconds
        self.paused = paused
        self.fare = fare
        self.currency = currency
        self.lines = lines
    }
}

/// A watch-only link for one ride (`url` is relative to the server's page, `token` empty when
/// the server runs without auth).
public struct ShareLink: Sendable, Equatable {
    public var ride: String
    public var url: String
    public var token: String

    public init(ride: String, url: String, token: String) {
        self.ride = ride
        self.url = url
        self.token = token
    }
}

/// Close codes the server sends (protocol/examples/close-codes.json) and what a client does.
public enum CloseCode {
    /// Sent by servers before drains existed (a stop closed everything at once); a client
    /// reconnects with backoff.
    public static let goingAway: UInt16 = 1001
    public static let policyViolation: UInt16 = 1008
    /// "Service restart": the node is draining (SIGTERM, a rolling restart); reconnect at once,
    /// with jitter, and the load balancer picks another node.
    public static let serviceRestart: UInt16 = 1012
    public static let slowConsumer: UInt16 = 4008
    public static let unauthorized: UInt16 = 4401
    /// Every code the server sends. 4401 alone is not worth a plain retry: the token must change first.
    public static let sent: [UInt16] = [policyViolation, serviceRestart, slowConsumer, unauthorized]
}
