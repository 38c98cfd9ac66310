/// How a plan counts a time interval: GBFS's plain reading bills an interval as soon as it has
/// begun; the original kickboard app billed completed minutes only (500 won until 0:59).
public enum BillingRule: String, Sendable, Equatable {
    case started
    case completed
}

/// A GBFS pricing segment `{start, rate, interval, end}` in minor units. `start`/`end` are
/// minutes (or km) from the start of the ride; `end` is exclusive; `interval: 0` charges once.
public struct FareSegment: Sendable, Equatable {
    public var start: Int64
    public var rate: Int64
    public var interval: Int64
    public var end: Int64?

    public init(start: Int64, rate: Int64, interval: Int64, end: Int64? = nil) {
        self.start = start
        self.rate = rate
        self.interval = interval
        self.end = end
    }
}

/// GBFS v3.1 `fare_capping`: at most `price` per `duration` minutes, unlock included.
public struct FareCap: Sendable, Equatable {
    public var duration: Int64
    public var price: Int64
    public init(duration: Int64, price: Int64) {
        self.duration = duration
        self.price = price
    }
}

/// A pricing plan, converted once from GBFS decimals to integer minor units.
public struct FarePlan: Sendable, Equatable {
    public var id: String
    /// Localized names, language tag → text (GBFS 3 arrays; GBFS 2 strings are stored under "").
    public var names: [String: String]
    public var descriptions: [String: String]
    public var currency: Currency
    /// Charged once per ride (the unlock fee).
    public var price: Int64
    public var isTaxable: Bool
    public var perMinute: [FareSegment]
    public var perKm: [FareSegment]
    public var surgePricing: Bool
    public var cap: FareCap?
    public var billing: BillingRule
    /// Minor units per paused minute (billed with `billing`); 0 means pauses are free.
    public var pauseRate: Int64
    /// A pause longer than this ends the ride by itself.
    public var maxPauseSeconds: Int64?
    /// Riding time after which the ride ends by itself.
    public var maxRideSeconds: Int64?
    /// The plans file marked this plan `_ridepush_default`: a start without a plan gets it.
    public var isDefault: Bool

    public init(id: String, names: [String: String], descriptions: [String: String] = [:],
                currency: Currency, price: Int64, isTaxable: Bool = false,
                perMinute: [FareSegment] = [], perKm: [FareSegment] = [], surgePricing: Bool = false,
                cap: FareCap? = nil, billing: BillingRule = .started, pauseRate: Int64 = 0,
                maxPauseSeconds: Int64? = nil, maxRideSeconds: Int64? = nil, isDefault: Bool = false) {
        self.id = id
        self.names = names
        self.descriptions = descriptions
        self.currency = currency
        self.price = price
        self.isTaxable = isTaxable
        self.perMinute = perMinute
        self.perKm = perKm
        self.surgePricing = surgePricing
        self.cap = cap
        self.billing = billing
        self.pauseRate = pauseRate
        self.maxPauseSeconds = maxPauseSeconds
        self.maxRideSeconds = maxRideSeconds
        self.isDefault = isDefault
    }

    /// The plan a start or quote without a plan gets: the one marked `_ridepush_default`, else
    /// the first (a plans file's first plan, in its currency), else the built-in plan.
    public static func defaultPlan(of plans: [FarePlan]) -> FarePlan {
        plans.first(where: \.isDefault) ?? plans.first ?? .standard
    }

    /// The original app's plan: 500 KRW unlock + 180 KRW per completed riding minute.
    public static let standard = FarePlan(
        id: "default",
        names: ["ko": "기본 요금", "en": "Standard"],
        descriptions: ["ko": "기본 500원 + 분당 180원", "en": "500 KRW unlock + 180 KRW per minute"],
        currency: .krw, price: 500,
        perMinute: [FareSegment(start: 0, rate: 180, interval: 1)],
        billing: .completed)

    public var displayName: String { names["en"] ?? names[""] ?? names.values.sorted().first ?? id }
}
