import Foundation
import RidePushClient

/// What the lock screen and the Dynamic Island show of a ride, from its content-state alone:
/// the widget (RideActivityWidget.swift) draws these values, and ride-demo prints them here,
/// where ActivityKit does not exist. Nothing counts on a timer: a riding ride's time is
/// `Text(timerInterval: timerStart...)`, counted by the system from the pushed `at` and `elapsed`.
public struct LockScreenRide: Equatable, Sendable {
    public let content: RideActivityContent

    public init(_ content: RideActivityContent) { self.content = content }

    public var title: String {
        switch content.state {
        case .riding: return "Riding"
        case .paused: return "Paused"
        case .ended: return "Ended"
        }
    }

    /// Where the running timer starts; nil when the time stands still (paused, ended).
    public var timerStart: Date? { content.timerRuns ? content.timerStart : nil }

    /// The time as it stands at `at`: what a paused or ended ride shows (m:ss, h:mm:ss).
    public var elapsedText: String {
        let s = max(0, content.elapsed)
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return h > 0 ? "\(h):\(two(m)):\(two(sec))" : "\(m):\(two(sec))"
    }

    /// The fare in major units (an ended ride's is its receipt's total), and the currency to
    /// format it with: `fare.formatted(.currency(code: currency))` in the widget.
    public var fare: Decimal? { content.fareAmount }
    public var currency: String { content.currency }

    /// While riding: the fare after its next step, and when (`Text(date, style: .time)`).
    public var nextFare: (amount: Decimal, at: Date)? {
        guard let a = content.fareNextAmount, let d = content.fareNextDate else { return nil }
        return (a, d)
    }

    /// When the time limit ends the ride if it keeps riding.
    public var limit: Date? { content.limitDate }

    /// The zone line: its name, and whether the ride may end there. Nil before any position.
    public var zoneText: String? {
        guard let z = content.zone else { return nil }
        let name = z.name ?? "Outside the zones"
        return z.endAllowed ? name : name + " · no parking here"
    }
}
