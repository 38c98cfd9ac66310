import RideCore
import RideProtocol

/// The FCM HTTP v1 request for one push: `POST /v1/projects/PROJECT/messages:send` with
/// `{"message":{"token":T,"android":{…},"data":{…}}}`. Android has no Live Activity: the app's
/// ongoing notification reads `data` (a chronometer based at `at` − `elapsed`).
public enum FCMMessage {
    public static func path(project: String) -> String { "/v1/projects/\(project)/messages:send" }

    /// `ttl`: how long FCM keeps it for an offline device, in seconds. `collapse_key` is the
    /// ride: a newer message for it replaces an older one still held by FCM.
    public static func body(_ push: DevicePush, token: String, ttl: Int64) -> [UInt8] {
        var w = JSONWriter(reserving: 512)
        w.beginObject()
        w.key("message")
        w.beginObject()
        w.field("token", token)
        w.key("android")
        w.beginObject()
        w.field("priority", push.priority == .immediate ? "high" : "normal")
        w.field("ttl", "\(max(0, ttl))s")
        w.field("collapse_key", push.content.ride)
        w.endObject()
        w.key("data")
        w.beginObject()
        for (k, v) in data(push) { w.key(k); w.string(v) }
        w.endObject()
        w.endObject()
        w.endObject()
        return w.bytes
    }

    /// The content-state as FCM data, where every value must be a string: the same names,
    /// numbers in decimal, the zone as `zone` and `zone_end_allowed`.
    public static func data(_ p: DevicePush) -> [(String, String)] {
        let c = p.content
        var d: [(String, String)] = [
            ("event", p.event.rawValue),
            ("ride", c.ride),
            ("state", c.state.rawValue),
            ("elapsed", String(c.elapsed)),
            ("at", String(c.at)),
            ("fare", String(c.fare)),
            ("currency", c.currency),
        ]
        if let v = c.fareNext { d.append(("fare_next", String(v))) }
        if let v = c.fareNextAt { d.append(("fare_next_at", String(v))) }
        if let v = c.limitAt { d.append(("limit_at", String(v))) }
        if let z = c.zone {
            d.append(("zone", z.name ?? ""))
            d.append(("zone_end_allowed", z.endAllowed ? "true" : "false"))
        }
        if let a = p.alert {
            d.append(("alert_title", a.title))
            d.append(("alert_body", a.body))
        }
        return d
    }
}

/// FCM v1's answers as what to do next.
public enum FCMAnswer {
    /// `retryAfter`: the Retry-After header, if any. A 401 asks for a new access token; the
    /// schedule sends again at once only the first time (PushSchedule).
    public static func verdict(status: Int?, body: [UInt8], retryAfter: String?) -> PushVerdict {
        guard let status else { return .retry(retryAfter: nil) }
        let code = errorCode(body)
        switch status {
        case 200:
            return .delivered
        case 404 where code == "UNREGISTERED" || code == nil:
            return .dropTarget(reason: "UNREGISTERED")
        case 401:
            return .renewCredentials
        case 429, 503:
            return .retry(retryAfter: retryAfter.flatMap(retryAfterMillis))
        case 500:
            return .retry(retryAfter: nil)
        default:
            return .failed(reason: "\(status) \(code ?? jsonString(body, "error", "status") ?? "(no reason)")")
        }
    }

    /// The FcmError code in `error.details[]` (`UNREGISTERED`, `QUOTA_EXCEEDED`, …).
    static func errorCode(_ body: [UInt8]) -> String? {
        guard let details = (try? JSON.parse(body))?["error"]?["details"]?.array else { return nil }
        return details.lazy.compactMap { $0["errorCode"]?.string }.first
    }

    /// Retry-After in whole seconds (what FCM sends), as milliseconds; an HTTP-date is not
    /// read (the backoff applies then).
    static func retryAfterMillis(_ value: String) -> Int64? {
        guard let s = Int64(String(value.filter { $0 != " " })), s >= 0, s <= 86_400 else { return nil }
        return s * 1000
    }
}
