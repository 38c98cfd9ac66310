import RideCore

/// When a failed delivery is tried again: 1 s after the first failure, doubling (2, 4, … 256 s)
/// up to a 5 min cap, for 24 h from the event's creation; after that the event is dead (kept,
/// listed, not sent). Pure: the sender asks it with the attempt count and the clock.
public struct RetrySchedule: Sendable, Equatable {
    public var firstDelay: Int64
    public var maxDelay: Int64
    /// How long after `created` an event may still be retried.
    public var giveUpAfter: Int64

    public init(firstDelay: Int64 = 1_000, maxDelay: Int64 = 300_000, giveUpAfter: Int64 = 86_400_000) {
        precondition(firstDelay > 0 && maxDelay >= firstDelay && giveUpAfter > 0)
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
        self.giveUpAfter = giveUpAfter
    }

    /// Milliseconds to wait after failed attempt number `attempt` (1 = the first).
    public func delay(afterAttempt attempt: Int) -> Int64 {
        Backoff(first: firstDelay, cap: maxDelay).delay(afterAttempt: attempt)
    }

    public enum Decision: Sendable, Equatable {
        case retry(at: UnixMillis)
        case dead
    }

    /// After attempt `attempt` of an event made at `created` failed at `now`: the next try, or
    /// dead when that try would fall past `created + giveUpAfter`.
    public func next(created: UnixMillis, attempt: Int, failedAt now: UnixMillis) -> Decision {
        let at = now + delay(afterAttempt: attempt)
        return at > created + giveUpAfter ? .dead : .retry(at: at)
    }
}
