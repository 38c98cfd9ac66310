import RideCore

/// APNs' answers ("Handling notification responses from APNs") as what to do next.
public enum APNsAnswer {
    /// `status` nil: no answer (timeout, connection lost) — sent again like a 503.
    public static func verdict(status: Int?, body: [UInt8]) -> PushVerdict {
        guard let status else { return .retry(retryAfter: nil) }
        let reason = jsonString(body, "reason") ?? ""
        switch (status, reason) {
        case (200, _):
            return .delivered
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .dropTarget(reason: reason.isEmpty ? "Unregistered" : reason)
        case (403, "ExpiredProviderToken"):
            return .renewCredentials
        case (429, _), (500, _), (503, _):
            return .retry(retryAfter: nil)
        default:
            return .failed(reason: "\(status) \(reason.isEmpty ? "(no reason)" : reason)")
        }
    }
}
