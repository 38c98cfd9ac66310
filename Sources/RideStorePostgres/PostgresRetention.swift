import RideCore
import RideStore

// Retention (--retain-ended, docs/retention.md) on the shared store: one statement per batch.
enum PostgresRetention {
    /// Deletes at most `limit` rides that ended before `instant` (oldest end first) with their
    /// journal, trace and given-up deliveries, and at most `limit` replies recorded before it,
    /// in one statement (one round trip). Two nodes purging at once take disjoint rides (SKIP
    /// LOCKED) or find them gone: a row is deleted, and counted, once. Foreign keys are checked
    /// at the statement's end, when the children are gone too.
    static let purge = """
        WITH batch AS (
            SELECT id FROM ridepush.rides
            WHERE ended_at IS NOT NULL AND ended_at < $1::bigint
            ORDER BY ended_at, (id COLLATE "C") LIMIT $2::bigint
            FOR UPDATE SKIP LOCKED),
        journal AS (DELETE FROM ridepush.journal WHERE ride_id IN (SELECT id FROM batch) RETURNING 1),
        traces AS (DELETE FROM ridepush.traces WHERE ride_id IN (SELECT id FROM batch) RETURNING 1),
        dead AS (DELETE FROM ridepush.webhook_dead WHERE ride IN (SELECT id FROM batch) RETURNING 1),
        push AS (DELETE FROM ridepush.push_targets WHERE ride IN (SELECT id FROM batch)),
        events AS (DELETE FROM ridepush.webhook_events WHERE ride IN (SELECT id FROM batch)),
        rides AS (DELETE FROM ridepush.rides WHERE id IN (SELECT id FROM batch) RETURNING 1),
        replies AS (
            DELETE FROM ridepush.replies WHERE (scope, id) IN (
                SELECT scope, id FROM ridepush.replies WHERE at < $1::bigint ORDER BY at LIMIT $2::bigint
                FOR UPDATE SKIP LOCKED)
            RETURNING 1)
        SELECT (SELECT count(*) FROM rides), (SELECT count(*) FROM journal), (SELECT count(*) FROM replies),
               (SELECT count(*) FROM traces), (SELECT count(*) FROM dead)
        """

    static func purge(_ c: PostgresConnection, before instant: UnixMillis, limit: Int) throws(PostgresError) -> PurgeCount {
        let r = try c.query(purge, [.int(instant), .int(Int64(limit))])
        func n(_ col: Int) -> Int { Int(r.int(0, col) ?? 0) }
        return PurgeCount(rides: n(0), journal: n(1), replies: n(2), traces: n(3), outbox: n(4))
    }
}
