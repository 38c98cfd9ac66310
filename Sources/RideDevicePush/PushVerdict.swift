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

/// The wait before attempt n + 1 after n failed: 1 s, doubling, capped at a minute (RideCore's
/// Backoff, the webhooks' curve with a push's bounds).
public typealias PushBackoff = Backoff

/// The `reason` (APNs) of an error body, if the body is JSON with one.
func jsonString(_ body: [UInt8], _ path: String...) -> String? {
    guard var v = try? JSON.parse(body) else { return nil }
    for k in path {
        guard let next = v[k] else { return nil }
        v = next
    }
    return v.string
}
