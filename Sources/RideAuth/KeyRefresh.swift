import RideCore

/// When the identity provider's key set (`--jwks-url`) is fetched: on the interval its
/// `Cache-Control: max-age` asks for (bounded), at once when a token names a `kid` the set
/// lacks (at most once a minute: a client making up kids must not make the server hammer the
/// provider), sooner after a failed fetch (doubling waits). No clock or I/O of its own: the
/// fetch thread passes monotonic milliseconds in, so tests drive it with a manual clock.
public struct KeyRefresh: Sendable, Equatable {
    /// A provider asking for less (Auth0 says 15 s, Keycloak no-cache) is asked every 5 minutes:
    /// key rotations are announced ahead, and an unknown kid fetches at once anyway.
    public static let shortest: Int64 = 5 * 60_000
    /// A provider asking for more is still asked daily, so a removed (compromised) key goes
    /// within a day.
    public static let longest: Int64 = 24 * 3_600_000
    /// No `max-age` at all: hourly.
    public static let unstated: Int64 = 3_600_000
    /// Fetches a token's unknown `kid` may cause: one per this many ms.
    public static let unknownKidSpacing: Int64 = 60_000
    /// After failed fetches: 2 s, 4 s, … up to 5 minutes, until one succeeds.
    public static let retry = Backoff(first: 2_000, cap: 5 * 60_000)

    /// When the schedule (first fetch, max-age, retry) wants the next fetch.
    public private(set) var scheduled: Int64
    /// A token named an unknown kid since the last fetch began.
    public private(set) var unknownKidWaiting = false
    /// When an unknown kid last caused a fetch (nil: never).
    public private(set) var lastUnknownKidFetch: Int64?
    /// Failed fetches since the last success.
    public private(set) var failures = 0

    /// The first fetch is due at `now`.
    public init(now: Int64) {
        scheduled = now
    }

    /// Cache-Control's `max-age` in seconds: the directive's value (quoted or not), 0 for
    /// `no-cache` or `no-store` (ask again as early as allowed), nil when it says neither or
    /// the value is not a number. A value too large for Int64 is Int64.max.
    public static func maxAge(cacheControl: String) -> Int64? {
        var found: Int64?
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            let name = parts[0].trimmingSpaces.lowercased()
            if name == "no-cache" || name == "no-store" { return 0 }
            guard name == "max-age", parts.count == 2, found == nil else { continue }
            var value = parts[1].trimmingSpaces
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            guard !value.isEmpty, value.allSatisfy({ $0.isASCII && $0.isNumber }) else { continue }
            found = Int64(value) ?? Int64.max
        }
        return found
    }

    /// Milliseconds until the set fetched with this `Cache-Control` is fetched again, within
    /// `shortest`…`longest`.
    public static func interval(cacheControl: String?) -> Int64 {
        guard let header = cacheControl, let seconds = maxAge(cacheControl: header) else { return unstated }
        let millis = seconds > longest / 1000 ? longest : seconds * 1000
        return min(max(millis, shortest), longest)
    }

    /// When the fetch thread should wake next: the schedule, or sooner when an unknown kid
    /// waits and the last fetch it caused is a minute old.
    public var nextFetch: Int64 {
        guard unknownKidWaiting else { return scheduled }
        let allowed = lastUnknownKidFetch.map { $0 + Self.unknownKidSpacing } ?? Int64.min
        return min(scheduled, allowed)
    }

    public func isDue(now: Int64) -> Bool { now >= nextFetch }

    /// A token named a kid the set does not have.
    public mutating func unknownKid() { unknownKidWaiting = true }

    /// An operator asked (SIGHUP): the next fetch is due at once, rate limit or not.
    public mutating func refreshNow(now: Int64) { scheduled = min(scheduled, now) }

    /// A fetch begins at `now`: it answers every unknown kid so far; it counts against the
    /// unknown-kid rate only when the schedule alone would not have fetched now.
    public mutating func fetchStarted(now: Int64) {
        if unknownKidWaiting, now < scheduled { lastUnknownKidFetch = now }
        unknownKidWaiting = false
    }

    /// A usable set arrived at `now` with this `Cache-Control`.
    public mutating func succeeded(now: Int64, cacheControl: String?) {
        failures = 0
        scheduled = now + Self.interval(cacheControl: cacheControl)
    }

    /// No usable set (no answer, an error status, not a JWKS): try again after the backoff.
    public mutating func failed(now: Int64) {
        failures += 1
        scheduled = now + Self.retry.delay(afterAttempt: failures)
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return s
    }
}
