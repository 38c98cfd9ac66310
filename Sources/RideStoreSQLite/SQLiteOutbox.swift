import Foundation
import RideCore
import RideStore
import RideWebhooks

/// The webhook sender's view of an SQLite store's outbox, on a connection of its own: the
/// store worker's connection belongs to the worker's thread, and the sender must never wait
/// behind a group commit nor make one wait behind an HTTP send. Its writes are one short
/// statement each (a DELETE or an UPDATE by seq), so the worker's BEGIN IMMEDIATE waits at
/// most for one of them.
///
/// One sender per file (the store's flock already means one server per file), so no leases.
/// A failed statement loses nothing: the row stays pending and is read and sent again
/// (at least once); `lastError` says why for the log.
public final class SQLiteOutbox: WebhookOutbox, @unchecked Sendable {  // `db`, `lastFailure` and `lastStats` only under `lock`
    public let path: String
    let db: SQLiteConnection
    private let clock: RideClock
    private let lock = NSLock()
    private var lastFailure: String?
    /// The last counts read, answered while the file cannot be read.
    private var lastStats = OutboxStats()

    /// Opens `path`, which `SQLiteStore` must have opened (created or upgraded) first.
    public init(path: String, clock: RideClock = SystemClock()) throws(StoreError) {
        self.path = path
        self.clock = clock
        db = try SQLiteConnection(path: path)
        do throws(StoreError) {
            try db.exec("PRAGMA busy_timeout = 1000")
            // The store's checkpointer copies the log; this connection never checkpoints inline.
            try db.exec("PRAGMA wal_autocheckpoint = 0")
            // A delivery recorded and lost to a power cut is only sent again: at least once.
            try db.exec("PRAGMA synchronous = NORMAL")
            var hasTable = false
            try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'webhook_outbox'") {
                (_: SQLRow) throws(StoreError) in hasTable = true
            }
            guard hasTable else {
                throw StoreError(.unavailable, "ride store \(path): no webhook outbox (open the store first)")
            }
        } catch {
            db.close()
            throw error
        }
    }

    deinit { db.close() }

    public func close() {
        lock.lock()
        defer { lock.unlock() }
        db.close()
    }

    /// The last failure of a call, if the last call failed (the sender logs it).
    public var lastError: String? {
        lock.lock()
        defer { lock.unlock() }
        return lastFailure
    }

    public func pending(limit: Int) -> [OutboxRow] {
        locked([]) { () throws(StoreError) in
            // Each lane's lowest seq through the lane index (no bodies read), then those rows.
            var rows: [OutboxRow] = []
            try db.query("""
                SELECT o.seq, o.event_id, o.ride, o.endpoint, o.created, o.body, o.attempts, o.next_attempt_at, o.last_result
                FROM (SELECT min(seq) AS seq FROM webhook_outbox WHERE endpoint <> 'push:' GROUP BY endpoint, ride) h
                JOIN webhook_outbox o ON o.seq = h.seq
                ORDER BY o.next_attempt_at, o.seq LIMIT ?
                """, [.int(Int64(max(0, limit)))]) { (r: SQLRow) throws(StoreError) in rows.append(Self.row(r)) }
            return rows
        }
    }

    public func record(_ update: OutboxUpdate) {
        locked(()) { () throws(StoreError) in
            switch update {
            case .delivered(let seq, _):
                try db.run("DELETE FROM webhook_outbox WHERE seq = ?", [.int(seq)])
            case .retry(let seq, let attempts, let at, let lastResult):
                try db.run("UPDATE webhook_outbox SET attempts = ?, next_attempt_at = ?, last_result = ? WHERE seq = ?",
                           [.int(Int64(attempts)), .int(at), .text(lastResult), .int(seq)])
            case .dead(let seq, let attempts, let lastResult):
                try db.run("BEGIN IMMEDIATE")
                do throws(StoreError) {
                    try db.run("""
                        INSERT INTO webhook_dead (seq, event_id, type, ride, endpoint, created, body, attempts, last_result, died_at)
                        SELECT seq, event_id, type, ride, endpoint, created, body, ?, ?, ? FROM webhook_outbox WHERE seq = ?
                        """, [.int(Int64(attempts)), .text(lastResult), .int(clock.now()), .int(seq)])
                    try db.run("DELETE FROM webhook_outbox WHERE seq = ?", [.int(seq)])
                    try db.run("COMMIT")
                } catch {
                    if db.inTransaction { try? db.run("ROLLBACK") }
                    throw error
                }
            }
        }
    }

    public func stats() -> OutboxStats {
        locked(lastStats) { () throws(StoreError) in
            var out = OutboxStats()
            try db.query("""
                SELECT (SELECT count(*) FROM webhook_outbox WHERE endpoint <> 'push:'),
                       (SELECT min(created) FROM webhook_outbox WHERE endpoint <> 'push:'),
                       (SELECT count(*) FROM webhook_dead)
                """) { (r: SQLRow) throws(StoreError) in
                out = OutboxStats(pending: Int(r.int(0)), oldestPendingCreated: r.optionalInt(1), dead: Int(r.int(2)))
            }
            lastStats = out
            return out
        }
    }

    public func dead(limit: Int) -> [OutboxRow] {
        locked([]) { () throws(StoreError) in
            var rows: [OutboxRow] = []
            try db.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, died_at, last_result
                FROM webhook_dead ORDER BY seq LIMIT ?
                """, [.int(Int64(max(0, limit)))]) { (r: SQLRow) throws(StoreError) in rows.append(Self.row(r)) }
            return rows
        }
    }

    public func requeueDead(eventID: String, now: UnixMillis) -> Int? {
        locked(nil) { () throws(StoreError) -> Int? in
            try db.run("BEGIN IMMEDIATE")
            do throws(StoreError) {
                try db.run("""
                    INSERT INTO webhook_outbox (event_id, type, ride, endpoint, created, body, attempts, next_attempt_at)
                    SELECT event_id, type, ride, endpoint, created, body, 0, ? FROM webhook_dead WHERE event_id = ? ORDER BY seq
                    """, [.int(now), .text(eventID)])
                let n = Int(db.changes)
                try db.run("DELETE FROM webhook_dead WHERE event_id = ?", [.text(eventID)])
                try db.run("COMMIT")
                return n
            } catch {
                if db.inTransaction { try? db.run("ROLLBACK") }
                throw error
            }
        }
    }

    public func events(after: String?, ride: String?, limit: Int) -> EventLogRead {
        locked(.unavailable) { () throws(StoreError) -> EventLogRead in
            var from: Int64 = 0
            if let after {
                var found: Int64?
                try db.query("SELECT seq FROM webhook_events WHERE event_id = ?", [.text(after)]) { (r: SQLRow) throws(StoreError) in found = r.int(0) }
                guard let found else { return .unknownCursor }
                from = found
            }
            var bodies: [[UInt8]] = []
            let sql = ride == nil ? "SELECT body FROM webhook_events WHERE seq > ? ORDER BY seq LIMIT ?"
                : "SELECT body FROM webhook_events WHERE ride = ? AND seq > ? ORDER BY seq LIMIT ?"
            let binds: [SQLValue] = (ride.map { [.text($0)] } ?? []) + [.int(from), .int(Int64(max(0, limit)))]
            try db.query(sql, binds) { (r: SQLRow) throws(StoreError) in bodies.append(r.blob(0)) }
            return .events(bodies)
        }
    }

    public func purgeEvents(before instant: UnixMillis) {
        locked(()) { () throws(StoreError) in
            // Batches of 1,000: each a short statement the store worker waits behind at most.
            repeat {
                try db.run("DELETE FROM webhook_events WHERE seq IN (SELECT seq FROM webhook_events WHERE created < ? ORDER BY created LIMIT 1000)",
                           [.int(instant)])
            } while db.changes == 1000
        }
    }

    /// Columns: seq, event_id, ride, endpoint, created, body, attempts, next attempt (for a dead
    /// row: when it died), last_result.
    static func row(_ r: SQLRow) -> OutboxRow {
        OutboxRow(seq: r.int(0), eventID: r.text(1), rideID: r.text(2), endpoint: r.text(3), created: r.int(4),
                  body: r.blob(5), attempts: Int(r.int(6)), nextAttemptAt: r.int(7), lastResult: r.optionalText(8))
    }

    // The fallback is read under the lock: `stats()` falls back to `lastStats`, which the body writes.
    func locked<T>(_ fallback: @autoclosure () -> T, _ body: () throws(StoreError) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        do {
            let value = try body()
            lastFailure = nil
            return value
        } catch {
            lastFailure = error.message
            return fallback()
        }
    }
}

extension SQLiteOutbox {
    /// Every pending row in seq order, heads or not (tests).
    func allPending() -> [OutboxRow] {
        locked([]) { () throws(StoreError) in
            var rows: [OutboxRow] = []
            try db.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, next_attempt_at, last_result
                FROM webhook_outbox ORDER BY seq
                """) { (r: SQLRow) throws(StoreError) in rows.append(Self.row(r)) }
            return rows
        }
    }
}
