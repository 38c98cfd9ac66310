import Foundation
import RideCore
import RideStore
import RideWebhooks

/// The push sender's view of an SQLite store (PushIntentOutbox), on a connection of its own
/// like SQLiteOutbox's, for the same reasons: the sender never waits behind a group commit, and
/// its writes (a DELETE by seq, a target's DELETE) are one short statement each. One server per
/// file, so no leases: rows are handed out once per process, in seq order.
public final class SQLitePushIntents: PushIntentOutbox, @unchecked Sendable {  // `db`, `handedOut`, `lastFailure` only under `lock`
    public let path: String
    private let db: SQLiteConnection
    private let lock = NSLock()
    private var handedOut: Int64 = 0
    private var lastFailure: String?

    /// Opens `path`, which `SQLiteStore` must have opened (created or upgraded) first.
    public init(path: String) throws(StoreError) {
        self.path = path
        db = try SQLiteConnection(path: path)
        do throws(StoreError) {
            try db.exec("PRAGMA busy_timeout = 1000")
            try db.exec("PRAGMA wal_autocheckpoint = 0")
            // A push recorded and lost to a power cut is only sent again: at least once.
            try db.exec("PRAGMA synchronous = NORMAL")
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

    public var lastError: String? {
        lock.lock()
        defer { lock.unlock() }
        return lastFailure
    }

    public func newIntents(limit: Int) -> [OutboxRow] {
        locked([]) { () throws(StoreError) in
            var rows: [OutboxRow] = []
            try db.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, next_attempt_at, last_result
                FROM webhook_outbox WHERE endpoint = ? AND seq > ? ORDER BY seq LIMIT ?
                """, [.text(OutboxEvent.pushEndpoint), .int(handedOut), .int(Int64(max(0, limit)))]) { (r: SQLRow) throws(StoreError) in
                rows.append(SQLiteOutbox.row(r))
            }
            if let last = rows.last { handedOut = last.seq }
            return rows
        }
    }

    public func delivered(seq: Int64) {
        locked(()) { () throws(StoreError) in
            try db.run("DELETE FROM webhook_outbox WHERE seq = ? AND endpoint = ?", [.int(seq), .text(OutboxEvent.pushEndpoint)])
        }
    }

    public func pushStats() -> (pending: Int, targets: Int) {
        locked((0, 0)) { () throws(StoreError) in
            var out = (pending: 0, targets: 0)
            try db.query("SELECT (SELECT count(*) FROM webhook_outbox WHERE endpoint = ?), (SELECT count(*) FROM push_targets)",
                         [.text(OutboxEvent.pushEndpoint)]) { (r: SQLRow) throws(StoreError) in
                out = (Int(r.int(0)), Int(r.int(1)))
            }
            return out
        }
    }

    public func pushTargets(ride: String) -> [StoredPushTarget]? {
        rows("WHERE ride = ? ORDER BY n", ride)
    }

    public func pushToStartTokens(rider: String) -> [StoredPushTarget]? {
        rows("WHERE ride IS NULL AND rider = ? ORDER BY n", rider)
    }

    public func deletePushTarget(ride: String?, rider: String, token: String) {
        locked(()) { () throws(StoreError) in
            if let ride {
                try db.run("DELETE FROM push_targets WHERE ride = ? AND token = ?", [.text(ride), .text(token)])
            } else {
                try db.run("DELETE FROM push_targets WHERE ride IS NULL AND rider = ? AND token = ?", [.text(rider), .text(token)])
            }
        }
    }

    private func rows(_ whereClause: String, _ key: String) -> [StoredPushTarget]? {
        locked(nil) { () throws(StoreError) -> [StoredPushTarget]? in
            var out: [StoredPushTarget] = []
            try db.query("SELECT platform, kind, ride, rider, token, at FROM push_targets \(whereClause)", [.text(key)]) {
                (r: SQLRow) throws(StoreError) in
                out.append(StoredPushTarget(platform: r.text(0), kind: r.text(1), ride: r.optionalText(2), rider: r.text(3),
                                            token: r.text(4), at: r.int(5)))
            }
            return out
        }
    }

    private func locked<T>(_ fallback: @autoclosure () -> T, _ body: () throws(StoreError) -> T) -> T {
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
