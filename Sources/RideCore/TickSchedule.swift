/// When the shared timer fires and which second each tick stands for, in the process clock's
/// time (`SlewingClock`: monotonic, never stepped). Pure, so tests drive it with a `ManualClock`: one tick per whole second the clock passes, never a burst after a
/// stall (a late timer skips to the current second), never two ticks for one second.
public struct TickSchedule: Sendable {
    /// The whole second the next tick stands for.
    public private(set) var target: UnixMillis
    /// The tick's number: the Unix second it stands for (`at / 1000`), so every node of a
    /// fleet gives the same second the same `seq` (issue 12). 0 before the first tick.
    public private(set) var seq: Int64 = 0

    public init(now: UnixMillis) {
        target = nextWholeSecond(after: now)
    }

    /// Microseconds until the timer should fire.
    public func delay(now: UnixMillis) -> Int64 { max(0, target - now) * 1000 }

    /// The timer fired at `now`: the tick to send (its seq and `at`), or nil when it woke early.
    public mutating func fire(now: UnixMillis) -> (seq: Int64, at: UnixMillis)? {
        guard now >= target else { return nil }
        let at = max(target, now / 1000 * 1000)
        seq = at >= 0 ? at / 1000 : (at - 999) / 1000
        target = at + 1000
        return (seq, at)
    }
}
