import RideCore

/// What the store is asked to do besides requests, decided at each tick of the shared timer
/// (the ticker submits what this returns, and never touches the store itself): once an hour,
/// forget idempotency replies older than a day (a retry comes within seconds; a day covers a
/// client that retries after a night offline), and with `--retain-ended` a purge batch with
/// it, then one a tick while the last batch was full.
package struct Housekeeping {
    /// How long a recorded reply answers a retry.
    package static let replyLife: Int64 = 24 * 3600 * 1000
    package static let every: Int64 = 3_600_000
    private var lastPrune: UnixMillis = 0
    private let retention: Retention?

    package init(retention: Retention?) {
        self.retention = retention
    }

    /// The jobs due at the tick of second `at`, `now` being the ride clock's reading.
    package mutating func due(at: UnixMillis, now: UnixMillis) -> [StoreJob] {
        if at - lastPrune > Self.every {
            lastPrune = at
            return [.prune(before: now - Self.replyLife)] + (retention.map { [$0.job(now: now)] } ?? [])
        }
        if let retention, retention.takeMore() { return [retention.job(now: now)] }
        return []
    }
}
