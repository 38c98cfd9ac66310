import Foundation
import RideCore

/// The ride as the lock screen shows it: the `content-state` of a Live Activity (APNs) and the
/// data of an Android ongoing notification (FCM), one type shared by the server and the SDK
/// (protocol/examples/push/content-state). The device counts the seconds itself from `at` and
/// `elapsed` (`Text(timerInterval:)`, `setUsesChronometer`), so it is pushed on changes only.
///
/// Codable because ActivityKit decodes the content-state with it on the device; its
/// `encode(to:)` is also what the server sends (`json()`), so there is one encoder.
public struct RideActivityContent: Sendable, Hashable, Codable {
    public var ride: String
    public var state: RideState
    /// Whole seconds of riding at `at`.
    public var elapsed: Int64
    /// Unix milliseconds the figures stand for.
    public var at: Int64
    /// Minor units of `currency`; an ended ride's is its receipt's total.
    public var fare: Int64
    public var currency: String
    /// While riding: the fare once it next changes, and the Unix milliseconds it does.
    public var fareNext: Int64?
    public var fareNextAt: Int64?
    /// When the time limit is reached if the ride keeps riding from `at` (rides with a limit
    /// that have not ended).
    public var limitAt: Int64?
    /// Where the ride is, once it has reported positions.
    public var zone: Zone?

    /// The zone at the ride's last position: its name (nil outside every named zone) and
    /// whether the ride may end there.
    public struct Zone: Sendable, Hashable, Codable {
        public var name: String?
        public var endAllowed: Bool

        public init(name: String?, endAllowed: Bool) {
            self.name = name
            self.endAllowed = endAllowed
        }

        enum CodingKeys: String, CodingKey {
            case name
            case endAllowed = "end_allowed"
        }
    }

    public init(ride: String, state: RideState, elapsed: Int64, at: Int64, fare: Int64, currency: String,
                fareNext: Int64? = nil, fareNextAt: Int64? = nil, limitAt: Int64? = nil, zone: Zone? = nil) {
        self.ride = ride
        self.state = state
        self.elapsed = elapsed
        self.at = at
        self.fare = fare
        self.currency = currency
        self.fareNext = fareNext
        self.fareNextAt = fareNextAt
        self.limitAt = limitAt
        self.zone = zone
    }

    /// When a timer counting from zero would show `elapsed` at `at`: the widget's
    /// `Text(timerInterval: timerStart...)` while riding (paused and ended rides show
    /// `elapsed` as it stands).
    public var timerStart: Date {
        Date(timeIntervalSince1970: Double(at - elapsed * 1000) / 1000)
    }

    enum CodingKeys: String, CodingKey {
        case ride, state, elapsed, at, fare, currency, zone
        case fareNext = "fare_next"
        case fareNextAt = "fare_next_at"
        case limitAt = "limit_at"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        ride = try c.decode(String.self, forKey: .ride)
        let raw = try c.decode(String.self, forKey: .state)
        guard let s = RideState(rawValue: raw) else {
            throw DecodingError.dataCorruptedError(forKey: .state, in: c, debugDescription: "unknown ride state \"\(raw.prefix(20))\"")
        }
        state = s
        elapsed = try c.decode(Int64.self, forKey: .elapsed)
        at = try c.decode(Int64.self, forKey: .at)
        fare = try c.decode(Int64.self, forKey: .fare)
        currency = try c.decode(String.self, forKey: .currency)
        fareNext = try c.decodeIfPresent(Int64.self, forKey: .fareNext)
        fareNextAt = try c.decodeIfPresent(Int64.self, forKey: .fareNextAt)
        limitAt = try c.decodeIfPresent(Int64.self, forKey: .limitAt)
        zone = try c.decodeIfPresent(Zone.self, forKey: .zone)
    }

    /// Absent values are left out (not `null`): every byte counts against APNs' 4 KB.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(ride, forKey: .ride)
        try c.encode(state.rawValue, forKey: .state)
        try c.encode(elapsed, forKey: .elapsed)
        try c.encode(at, forKey: .at)
        try c.encode(fare, forKey: .fare)
        try c.encode(currency, forKey: .currency)
        try c.encodeIfPresent(fareNext, forKey: .fareNext)
        try c.encodeIfPresent(fareNextAt, forKey: .fareNextAt)
        try c.encodeIfPresent(limitAt, forKey: .limitAt)
        try c.encodeIfPresent(zone, forKey: .zone)
    }

    /// The bytes the server sends: sorted keys, so the same content is always the same bytes
    /// (what the goldens hold, and what a push's size is checked on).
    public func json() -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, integers and a Bool cannot fail to encode.
        return Array((try? e.encode(self)) ?? Data())
    }
}

extension RideActivityContent {
    /// The ride at `at` on `plan`, with the figures a tick has (RideFigures) and, while riding,
    /// the fare's next change (FareEngine.nextChange) if it comes before the time limit.
    /// `distance`: the trace's metres, for a per-km plan; `zone`: where the ride is, if known.
    public init(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, distance: Int64? = nil, zone: Zone? = nil) {
        let f = RideFigures(ride, plan, at: at, metres: distance)
        self.init(ride: ride.id, state: ride.state, elapsed: f.elapsed, at: at, fare: f.fare, currency: plan.currency.code,
                  zone: zone)
        guard ride.state != .ended else { return }
        // Milliseconds from `at` until riding reaches `seconds` (riding goes on from `at`).
        let riding = ride.ridingMillis(at: at)
        func instant(ridingSeconds seconds: Int64) -> Int64 {
            let (ms, o1) = seconds.multipliedReportingOverflow(by: 1000)
            let (t, o2) = at.addingReportingOverflow(max(0, ms - riding))
            return o1 || o2 ? Int64.max : t
        }
        if let limit = ride.limit { limitAt = instant(ridingSeconds: limit) }
        guard ride.state == .riding,
              let next = FareEngine.nextChange(plan, riding: f.elapsed, paused: f.paused,
                                               metres: distance ?? ride.metres) else { return }
        let when = instant(ridingSeconds: next.riding)
        // Past the limit the ride ends by itself: that change is the end's, not a fare step.
        if let limitAt, when > limitAt { return }
        fareNext = next.fare
        fareNextAt = when
    }
}
