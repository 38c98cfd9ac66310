import RideCore
import RideStore
import RideWebhooks

/// The push sender's view of an SQLite store (PushIntentOutbox), on a connection of its own
/// like SQLiteOutbox's, for the same reasons: the sender never waits behind a group commit, and
/// its writes (a DELETE by seq, a target's DELETE) are one short statement each. One server per
/// file, so no leases: rows are handed out once per process, in seq order.
public final class SQLitePushIntents: PushIntentOutbox {
    public let path: String
    /// The connection, the last seq handed out and the last failure, only inside `withLock`.
    private let state: Locked<State>

    private struct State {
        let db: SQLiteConnection
        var handedOut: Int64 = 0
        var lastFailure: String?
    }

    /// Opens `path`, which `SQLiteStore` must have opened (created or upgraded) first.
    public init(path: String) throws(StoreError) {
        self.path = path
        let db = try SQLiteConnection(path: path)
        do throws(StoreError) {
            try db.exec("PRAGMA busy_timeout = 1000")
            try db.exec("PRAGMA wal_autocheckpoint = 0")
            // A push recorded and lost to a power cut is only sent again: at least once.
            try db.exec("PRAGMA synchronous = NORMAL")
        } catch {
            db.close()
            throw error
        }
        state = Locked(State(db: db))
    }

    deinit { state.withLock { $0.db.close() } }

    public func close() { state.withLock { $0.db.close() } }

    public var lastError: String? { state.withLock { $0.lastFailure } }

    public func newIntents(limit: Int) -> [OutboxRow] {
        locked([]) { (st: inout State) throws(StoreError) in
            var rows: [OutboxRow] = []
            try st.db.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, next_attempt_at, last_result
                FROM webhook_outbox WHERE endpoint = ? AND seq > ? ORDER BY seq LIMIT ?
                """, [.text(OutboxEvent.pushEndpoint), .int(st.handedOut), .int(Int64(max(0, limit)))]) { (r: SQLRow) throws(StoreError) in
                rows.append(SQLiteOutbox.row(r))
            }
            if let last = rows.last { st.handedOut = last.seq }
            return rows
        }
    }

    public func delivered(seq: Int64) {
        locked(()) { (st: inout State) throws(StoreError) in
            try st.db.run("DELETE FROM webhook_outbox WHERE seq = ? AND endpoint = ?", [.int(seq), .text(OutboxEvent.pushEndpoint)])
        }
    }

    public func pushStats() -> (pending: Int, targets: Int) {
        locked((0, 0)) { (st: inout State) throws(StoreError) in
            var out = (pending: 0, targets: 0)
            try st.db.query("SELECT (SELECT count(*) FROM webhook_outbox WHERE endpoint = ?), (SELECT count(*) FROM push_targets)",
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
        locked(()) { (st: inout State) throws(StoreError) in
            if let ride {
                try st.db.run("DELETE FROM push_targets WHERE ride = ? AND token = ?", [.text(ride), .text(token)])
            } else {
                try st.db.run("DELETE FROM push_targets WHERE ride IS NULL AND rider = ? AND token = ?", [.text(rider), .text(token)])
            }
        }
    }

    private func rows(_ whereClause: String, _ key: String) -> [StoredPushTarget]? {
        locked(nil) { (st: inout State) throws(StoreError) -> [StoredPushTarget]? in
            var out: [StoredPushTarget] = []
            try st.db.query("SELECT platform, kind, ride, rider, token, at FROM push_targets \(whereClause)", [.text(key)]) {
                (r: SQLRow) throws(StoreError) in
                out.append(StoredPushTarget(platform: r.text(0), kind: r.text(1), ride: r.optionalText(2), rider: r.text(3),
                                            token: r.text(4), at: r.int(5)))
            }
            return out
        }
    }

    private func locked<T>(_ fallback: @autoclosure () -> T, _ body: (inout State) throws(StoreError) -> T) -> T {
        state.withLock { st in
            do throws(StoreError) {
                let value = try body(&st)
                st.lastFailure = nil
                return value
            } catch {
                st.lastFailure = error.message
                return fallback()
            }
        }
    }
}
