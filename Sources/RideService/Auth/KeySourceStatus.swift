import RideCore

/// What `--jwks-url`'s fetches last achieved, written by the fetch thread and read by /metrics
/// and /healthz at the request (no I/O there): when the set in use was fetched, how many keys
/// it has, whether the last fetch failed, and every fetch's result by kind.
public final class KeySourceStatus: Sendable {
    /// How a fetch ended, the `result` label of `ridepush_jwks_fetch_total`.
    public enum Result: String, Sendable, CaseIterable {
        /// A usable key set (swapped in).
        case ok
        /// No HTTP answer: resolve, connect, TLS or certificate failure, timeout.
        case unreachable
        /// An answer other than 200 (redirects are not followed).
        case status
        /// A 200 whose body is not a usable JWKS (not JSON, no signing key, a key that cannot verify, too large).
        case invalid
    }

    private struct State {
        var fetchedAt: Int64?
        var keys = 0
        var lastFailed = false
        var counts = [Result: Int]()
    }

    public let url: String
    private let state = Locked(State())
    private let clock: @Sendable () -> Int64

    /// `clock`: monotonic milliseconds, the fetch thread's clock.
    public init(url: String, clock: @escaping @Sendable () -> Int64 = { monotonicMillis() }) {
        self.url = url
        self.clock = clock
    }

    /// A fetch ended: `keys` is the size of the set swapped in when `result` is ok.
    public func record(_ result: Result, keys: Int = 0) {
        let now = clock()
        state.withLock { s in
            s.counts[result, default: 0] += 1
            s.lastFailed = result != .ok
            if result == .ok {
                s.fetchedAt = now
                s.keys = keys
            }
        }
    }

    /// Milliseconds since the set in use was fetched; nil before the first set.
    public var age: Int64? {
        let now = clock()
        return state.withLock { $0.fetchedAt.map { now - $0 } }
    }

    /// /healthz's word: `ok` (the last fetch gave the set in use), `stale` (the last fetch
    /// failed; the last good set stays in force, the node is healthy), `failing` (no set yet:
    /// every identity-provider token is refused, so the node is degraded).
    public var word: String {
        state.withLock { s in s.fetchedAt == nil ? "failing" : (s.lastFailed ? "stale" : "ok") }
    }

    package func count(_ result: Result) -> Int { state.withLock { $0.counts[result, default: 0] } }

    package func prometheusText() -> String {
        var out = PrometheusText()
        let s = state.withLock { $0 }
        let age = self.age
        // Omitted, not faked, before the first set.
        if let age {
            out.metric("ridepush_jwks_age_seconds", "gauge", "Seconds since the identity provider's key set in use (--jwks-url) was fetched.",
                       [("", Double(age) / 1000)])
            out.metric("ridepush_jwks_keys", "gauge", "Signing keys in the set in use.", [("", Double(s.keys))])
        }
        out.metric("ridepush_jwks_fetch_total", "counter", "Fetches of --jwks-url by result: ok, unreachable (no answer, TLS), status (not 200), invalid (not a usable JWKS).",
                   Result.allCases.map { ("{result=\"\($0.rawValue)\"}", Double(s.counts[$0, default: 0])) })
        return out.text
    }

    /// `"identity_keys"` and `"identity_keys_age_s"` of /healthz.
    package func writeHealth(into w: inout JSONWriter) {
        w.field("identity_keys", word)
        w.field("identity_keys_age_s", age.map { $0 / 1000 })
    }
}
