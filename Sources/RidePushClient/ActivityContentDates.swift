import Foundation
import RideCore
import RideProtocol

// What a Live Activity's view or an Android notification needs from the content-state
// (RideProtocol's `RideActivityContent`, the same type the server encodes), as Foundation
// values: the instants as `Date`s, the money as exact `Decimal`s in major units.
extension RideActivityContent {
    /// The instant the figures stand for (`at`).
    public var date: Date { Self.date(at) }

    /// While riding: when the fare next changes (`fare_next_at`), to `fareNext`.
    public var fareNextDate: Date? { fareNextAt.map(Self.date) }

    /// When the time limit is reached if the ride keeps riding (`limit_at`).
    public var limitDate: Date? { limitAt.map(Self.date) }

    /// Whether the widget's timer runs by itself (`Text(timerInterval: timerStart...)`): riding
    /// only. Paused and ended rides show `elapsed` as it stands.
    public var timerRuns: Bool { state == .riding }

    /// `fare` in major units of `currency` (KRW 1040 → 1040, USD 1040 → 10.40), exact, for
    /// `Decimal.formatted(.currency(code:))`; nil for a currency code the SDK does not know.
    public var fareAmount: Decimal? { Self.amount(fare, currency) }

    /// `fare_next` in major units, as `fareAmount`.
    public var fareNextAmount: Decimal? { fareNext.flatMap { Self.amount($0, currency) } }

    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

    /// Minor units as a Decimal built from its integer significand: no binary fraction on the way.
    static func amount(_ minor: Int64, _ code: String) -> Decimal? {
        guard let c = Currency(code: code) else { return nil }
        let magnitude = Decimal(minor.magnitude)
        let scaled = Decimal(sign: minor < 0 ? .minus : .plus, exponent: -c.exponent, significand: magnitude)
        return scaled
    }
}
