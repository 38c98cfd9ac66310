import RideCore

/// What to do after one answer from APNs or FCM (or none): the sender acts on it, the
/// schedule re-queues or forgets.
public enum PushVerdict: Sendable, Equatable {
    case delivered
    /// The device token is gone (uninstalled, expired, never valid): stop sending to it.
    case dropTarget(reason: String)
    /// The credentials expired (APNs provider token, FCM access token): renew, then send again.
    case renewCredentials
    /// Try again later: after `retryAfter` ms when the service said (Retry-After), otherwise
    /// after the backoff for the attempt.
    case retry(retryAfter: Int64?)
    /// Refused for a reason sending again will not change (a bad payload, a bad topic): this
    /// push is given up, the target kept.
    case failed(reason: String)
}

/// The wait before attempt n + 1 after n failed: 1 s, doubling, capped. (RideWebhooks'
/// RetrySchedule has the same curve; this target does not depend on the webhooks.)
public struct PushBackoff: Sendable, Equatable {
    public var first: Int64
    public var cap: Int64

    public init(first: Int64 = 1_000, cap: Int64 = 60_000) {
        precondition(first > 0 && cap >= first)
        self.first = first
        self.cap = cap
    }

    /// Milliseconds to wait after failed attempt `attempt` (1 = the first).
    public func delay(afterAttempt attempt: Int) -> Int64 {
        var d = first
        var k = 1
        // Stops at the cap long before doubling could overflow.
        while k < attempt, d < cap {
            d *= 2
            k += 1
        }
        return min(d, cap)
    }
}

/// The `reason` (APNs) of an error body, if the body is JSON with one.
func jsonString(_ body: [UInt8], _ path: String...) -> String? {
    guard var v = try? JSON.parse(body) else { return nil }
    for k in path {
        guard let next = v[k] else { return nil }
        v = next
    }
    return v.string
}
