import RideCore
import RideStore
import Synchronization

/// `--retain-ended DAYS` (docs/retention.md): ended rides older than the window are deleted in
/// batches of `batch` rides, each a store-worker job of its own transaction. The ticker
/// submits one with the hourly prune and, while the last batch was full, one a tick (so a
/// backlog drains at a batch a second and no group waits behind more than one batch); the
/// ticker itself only reads a flag, never the store.
package final class Retention: Sendable {
    /// How long an ended ride is kept, in ms.
    package let window: Int64
    /// Rides (and replies) at most per batch: a batch of 500 held SQLite's writer 4 to 30 ms
    /// in the store tests (debug build, SQLiteRetentionTests), the most a group waits behind it.
    package let batch: Int
    /// Set by the store worker when a batch was full; taken by the ticker.
    private let more = Atomic<Bool>(false)
    /// What was purged since start, for /metrics.
    private let total = Locked(PurgeCount())
    package var purged: PurgeCount { total.withLock { $0 } }
    package let batches = Atomic<Int>(0)
    package let failures = Atomic<Int>(0)

    package static let defaultBatch = 500

    package init(days: Int, batch: Int = Retention.defaultBatch) {
        window = Int64(days) * 86_400_000
        self.batch = batch
    }

    /// The next batch: rides that ended before `now` − window.
    package func job(now: UnixMillis) -> StoreJob { .purge(self, before: now - window) }

    /// Whether a full batch asked for another since the last call (the ticker, each tick).
    package func takeMore() -> Bool { more.exchange(false, ordering: .relaxed) }

    /// Runs one batch on the store worker's thread and counts it.
    package func run(_ store: RideStore, before: UnixMillis) {
        do throws(StoreError) {
            let c = try store.purgeEnded(before: before, limit: batch)
            batches.add(1, ordering: .relaxed)
            total.withLock { $0 += c }
            if c.full(limit: batch) { more.store(true, ordering: .relaxed) }
            if c.rides > 0 {
                Log.info("retention: purged \(c.rides) rides ended before \(before) ms (\(c.journal) journal entries, \(c.replies) replies, \(c.traces) traces, \(c.outbox) dead webhook deliveries)\(c.full(limit: batch) ? "; more next second" : "")")
            }
        } catch {
            failures.add(1, ordering: .relaxed)
            Log.warn("retention: could not purge ended rides (retrying with the next hourly prune): \(error.message)")
        }
    }

    /// Prometheus text of the counters (MetricsText appends it).
    package func prometheusText() -> String {
        var out = "# HELP ridepush_retention_purged_total Rows deleted by --retain-ended, by kind (docs/retention.md).\n"
        out += "# TYPE ridepush_retention_purged_total counter\n"
        let p = purged
        for (kind, n) in [("rides", p.rides), ("journal_entries", p.journal), ("replies", p.replies), ("traces", p.traces), ("outbox_rows", p.outbox)] {
            out += "ridepush_retention_purged_total{kind=\"\(kind)\"} \(n)\n"
        }
        out += "# HELP ridepush_retention_batches_total Purge batches run, and those that failed (retried at the next hourly prune).\n"
        out += "# TYPE ridepush_retention_batches_total counter\n"
        out += "ridepush_retention_batches_total{result=\"ok\"} \(batches.load(ordering: .relaxed))\n"
        out += "ridepush_retention_batches_total{result=\"failed\"} \(failures.load(ordering: .relaxed))\n"
        return out
    }
}
