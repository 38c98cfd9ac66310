/// Waits that double from `first` up to `cap`: the one retry curve of every sender (webhook
/// deliveries, device pushes), each with its own bounds.
public struct Backoff: Sendable, Equatable {
    public var first: Int64
    public var cap: Int64

    public init(first: Int64, cap: Int64) {
        precondition(first > 0 && cap >= first)
        self.first = first
        self.cap = cap
    }

    /// Milliseconds to wait after failed attempt number `attempt` (1 = the first).
    public func delay(afterAttempt attempt: Int) -> Int64 {
        precondition(attempt >= 1)
        // Doubling stops at the cap long before it could overflow: 2^k > cap for small k.
        var d = first
        var k = 1
        while k < attempt, d < cap {
            d *= 2
            k += 1
        }
        return min(d, cap)
    }
}
