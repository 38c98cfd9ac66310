import Foundation
import RideCore
import RideStore
import RideWebhooks

/// The webhook sender's view of the shared outbox, on a connection of its own (never the
/// store worker's). Several nodes read one table, so a node sends a row only while it holds
/// the row's lease (`lease_owner` = this node until `lease_until`):
///
/// - `pending` first renews the leases of the rows it handed out before and reports those it
///   could not renew as lost (`takeLost`): another node took them after the lease expired, or
///   finished them. Then it claims heads nobody holds (or whose lease expired: a dead node's)
///   with `FOR UPDATE SKIP LOCKED`, so two nodes claiming at once never take the same row.
/// - `record` changes a row only under this node's lease. A retry gives the lease up and
///   reports the row as no longer held: while it waits (up to 5 minutes) it costs this node
///   no memory, and whichever node reads it once due sends it. A refused retry (the lease was
///   lost meanwhile) is reported the same way.
/// - Only rows due now are claimed, at most `limit` held at once, so what a node holds is
///   bounded by its batch, not by how long a receiver has been down.
///
/// Leases are renewed at every read (the sender reads at least once a second), and a node
/// that died hands its rows on `leaseMillis` later. Lease instants are Unix ms of this node's clock (injected; NTP-synced
/// nodes in production): the lease must be much longer than a send's deadline (5 s) plus the
/// poll interval plus the clocks' skew, or a slow send could overlap another node's.
public final class PostgresOutbox: WebhookOutbox, @unchecked Sendable {  // `conn`, `held`, `heldUntil`, `lost`, `lastFailure`, `lastStats` only under `lock`
    public let settings: PostgresSettings
    /// This node's name in `lease_owner`: unique per process start.
    public let owner: String
    public let leaseMillis: Int64
    private let clock: RideClock
    private let label: String
    private let lock = NSLock()
    private var conn: PostgresConnection?
    /// Rows handed out by `pending` and not yet finished, retried or lost: the leases renewed.
    private var held: Set<Int64> = []
    private var lost: Set<Int64> = []
    private var lastFailure: String?
    /// Until when the leases in `held` are known to be valid (their last renewal's end).
    private var heldUntil: UnixMillis = .min
    /// The last counts read, answered while PostgreSQL cannot be read.
    private var lastStats = OutboxStats()

    public init(_ settings: PostgresSettings, owner: String = PostgresOutbox.newOwner(), leaseMillis: Int64 = 30_000,
                clock: RideClock = SystemClock()) {
        precondition(leaseMillis > 0)
        var s = settings
        s.applicationName = settings.applicationName + "-webhooks"
        self.settings = s
        self.owner = owner
        self.leaseMillis = leaseMillis
        self.clock = clock
        label = "webhook outbox \(settings.redacted)"
    }

    /// Host, process id and a random part: two processes never share one, a restart is a new one.
    public static func newOwner() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count - 1)
        let name = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(name):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Gives every lease of this node up (a clean shutdown: another node takes the rows at once
    /// instead of after `leaseMillis`), then closes the connection. Call after the sender stopped.
    public func close() {
        locked(()) { (c: PostgresConnection) throws(PostgresError) in
            try c.query("UPDATE ridepush.webhook_outbox SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1",
                        [.text(owner)])
            held = []
        }
        lock.lock()
        defer { lock.unlock() }
        conn?.close()
        conn = nil
    }

    /// The last call's failure, nil if it succeeded (the sender logs it).
    public var lastError: String? {
        lock.lock()
        defer { lock.unlock() }
        return lastFailure
    }

    /// Rows this node holds a lease on now, as far as it knows (tests, metrics).
    public var heldCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return held.count
    }

    public func pending(limit: Int) -> [OutboxRow] {
        let rows = locked(nil) { (c: PostgresConnection) throws(PostgresError) -> [OutboxRow]? in
            let now = clock.now()
            let until = now + leaseMillis
            if !held.isEmpty {
                let r = try c.query("""
                    UPDATE ridepush.webhook_outbox SET lease_until = $1
                    WHERE lease_owner = $2 AND seq = ANY($3::bigint[]) RETURNING seq
                    """, [.int(until), .text(owner), .text(Self.bigints(held))])
                var renewed = Set<Int64>()
                for i in 0..<r.count { if let seq = r.int(i, 0) { renewed.insert(seq) } }
                lost.formUnion(held.subtracting(renewed))
                held = renewed
            }
            heldUntil = until
            // Heads from this statement's snapshot; a head another node holds is skipped (its
            // lease is valid, or it is locked by a claim in progress), and its lane with it.
            let room = max(0, limit - held.count)
            guard room > 0 else { return [] }
            let r = try c.query("""
                WITH heads AS (
                    SELECT min(seq) AS seq FROM ridepush.webhook_outbox WHERE endpoint <> 'push:' GROUP BY endpoint, ride
                ), claim AS (
                    SELECT o.seq FROM ridepush.webhook_outbox o JOIN heads h ON o.seq = h.seq
                    WHERE (o.lease_owner IS NULL OR o.lease_until < $1 OR o.lease_owner = $2)
                      AND o.next_attempt_at <= $1 AND NOT o.seq = ANY($5::bigint[])
                    ORDER BY o.next_attempt_at, o.seq LIMIT $3
                    FOR UPDATE OF o SKIP LOCKED
                )
                UPDATE ridepush.webhook_outbox o SET lease_owner = $2, lease_until = $4 FROM claim WHERE o.seq = claim.seq
                RETURNING o.seq, o.event_id, o.ride, o.endpoint, o.created, o.body, o.attempts, o.next_attempt_at, o.last_result
                """, [.int(now), .text(owner), .int(Int64(room)), .int(until), .text(Self.bigints(held))])
            var rows: [OutboxRow] = []
            for i in 0..<r.count { rows.append(try Self.row(r, i)) }
            rows.sort { ($0.nextAttemptAt, $0.seq) < ($1.nextAttemptAt, $1.seq) }
            held.formUnion(rows.map(\.seq))
            return rows
        }
        if let rows { return rows }
        // PostgreSQL unreachable past the leases' end: another node may hold them now, so the
        // sender must not send them (their results would be refused anyway).
        lock.lock()
        defer { lock.unlock() }
        if !held.isEmpty, clock.now() >= heldUntil {
            lost.formUnion(held)
            held = []
        }
        return []
    }

    public func takeLost() -> Set<Int64> {
        lock.lock()
        defer { lock.unlock() }
        let out = lost
        lost = []
        return out
    }

    public func record(_ update: OutboxUpdate) {
        let recorded = locked(false) { (c: PostgresConnection) throws(PostgresError) -> Bool in
            let seq = update.seq
            switch update {
            case .delivered:
                // Not ours any more: the other node sends it again (at least once).
                try c.query("DELETE FROM ridepush.webhook_outbox WHERE seq = $1 AND lease_owner = $2", [.int(seq), .text(owner)])
                held.remove(seq)
            case .retry(_, let attempts, let at, let lastResult):
                try c.query("""
                    UPDATE ridepush.webhook_outbox
                    SET attempts = $3, next_attempt_at = $4, last_result = $5, lease_owner = NULL, lease_until = NULL
                    WHERE seq = $1 AND lease_owner = $2
                    """, [.int(seq), .text(owner), .int(Int64(attempts)), .int(at), .text(lastResult)])
                // Released (or already lost): the sender forgets it until it is due and claimed again.
                if held.remove(seq) != nil { lost.insert(seq) }
            case .dead(_, let attempts, let lastResult):
                try c.query("""
                    WITH gone AS (
                        DELETE FROM ridepush.webhook_outbox WHERE seq = $1 AND lease_owner = $2
                        RETURNING seq, event_id, type, ride, endpoint, created, body
                    )
                    INSERT INTO ridepush.webhook_dead (seq, event_id, type, ride, endpoint, created, body, attempts, last_result, died_at)
                    SELECT seq, event_id, type, ride, endpoint, created, body, $3, $4, $5 FROM gone
                    """, [.int(seq), .text(owner), .int(Int64(attempts)), .text(lastResult), .int(clock.now())])
                held.remove(seq)
            }
            return true
        }
        // Not recorded (PostgreSQL unreachable, a failover): the row keeps this node's lease,
        // which `pending` would renew forever with nothing to send it again, so the row is let
        // go here: the sender forgets it and claims it afresh (its own lease is no bar), and
        // it is sent again (at least once; receivers de-duplicate by event id). Seen in
        // test_failover: deliveries whose result was lost with the primary never went out.
        if !recorded {
            lock.lock()
            if held.remove(update.seq) != nil { lost.insert(update.seq) }
            lock.unlock()
        }
    }

    public func stats() -> OutboxStats {
        locked(lastStats) { (c: PostgresConnection) throws(PostgresError) -> OutboxStats in
            let r = try c.query("""
                SELECT (SELECT count(*) FROM ridepush.webhook_outbox WHERE endpoint <> 'push:'),
                       (SELECT min(created) FROM ridepush.webhook_outbox WHERE endpoint <> 'push:'),
                       (SELECT count(*) FROM ridepush.webhook_dead)
                """)
            lastStats = OutboxStats(pending: Int(r.int(0, 0) ?? 0), oldestPendingCreated: r.int(0, 1), dead: Int(r.int(0, 2) ?? 0))
            return lastStats
        }
    }

    public func dead(limit: Int) -> [OutboxRow] {
        locked([]) { (c: PostgresConnection) throws(PostgresError) -> [OutboxRow] in
            let r = try c.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, died_at, last_result
                FROM ridepush.webhook_dead ORDER BY seq LIMIT $1
                """, [.int(Int64(max(0, limit)))])
            var rows: [OutboxRow] = []
            for i in 0..<r.count { rows.append(try Self.row(r, i)) }
            return rows
        }
    }

    public func requeueDead(eventID: String, now: UnixMillis) -> Int? {
        locked(nil) { (c: PostgresConnection) throws(PostgresError) -> Int? in
            let r = try c.query("""
                WITH back AS (
                    DELETE FROM ridepush.webhook_dead WHERE event_id = $1
                    RETURNING seq, event_id, type, ride, endpoint, created, body
                ), put AS (
                    INSERT INTO ridepush.webhook_outbox (event_id, type, ride, endpoint, created, body, next_attempt_at)
                    SELECT event_id, type, ride, endpoint, created, body, $2 FROM back ORDER BY seq RETURNING seq
                )
                SELECT count(*) FROM put
                """, [.text(eventID), .int(now)])
            return Int(r.int(0, 0) ?? 0)
        }
    }

    public func events(after: String?, ride: String?, limit: Int) -> EventLogRead {
        locked(.unavailable) { (c: PostgresConnection) throws(PostgresError) -> EventLogRead in
            var from: Int64 = 0
            if let after {
                let r = try c.query("SELECT seq FROM ridepush.webhook_events WHERE event_id = $1", [.text(after)])
                guard r.count == 1, let seq = r.int(0, 0) else { return .unknownCursor }
                from = seq
            }
            let r = try c.query("""
                SELECT body FROM ridepush.webhook_events WHERE ($1::text IS NULL OR ride = $1::text) AND seq > $2
                ORDER BY seq LIMIT $3
                """, [ride.map { .text($0) } ?? .null, .int(from), .int(Int64(max(0, limit)))])
            var bodies: [[UInt8]] = []
            for i in 0..<r.count {
                guard let body = r.bytes(i, 0) else { throw PostgresError(.value, "webhook event \(i): no body") }
                bodies.append(body)
            }
            return .events(bodies)
        }
    }

    public func purgeEvents(before instant: UnixMillis) {
        locked(()) { (c: PostgresConnection) throws(PostgresError) in
            _ = try c.query("DELETE FROM ridepush.webhook_events WHERE created < $1", [.int(instant)])
        }
    }

    /// Columns: seq, event_id, ride, endpoint, created, body, attempts, next attempt (a dead
    /// row: when it died), last_result.
    static func row(_ r: PGResult, _ i: Int) throws(PostgresError) -> OutboxRow {
        guard let seq = r.int(i, 0), let created = r.int(i, 4), let body = r.bytes(i, 5), let attempts = r.int(i, 6),
              let next = r.int(i, 7) else {
            throw PostgresError(.value, "webhook outbox row \(i): a NULL or unreadable column")
        }
        return OutboxRow(seq: seq, eventID: r.text(i, 1), rideID: r.text(i, 2), endpoint: r.text(i, 3), created: created,
                         body: body, attempts: Int(attempts), nextAttemptAt: next, lastResult: r.optionalText(i, 8))
    }

    private static func bigints(_ seqs: Set<Int64>) -> String {
        "{" + seqs.map(String.init).joined(separator: ",") + "}"
    }

    /// Runs `body` on the open connection (reconnecting if it was lost); a failure is kept in
    /// `lastError` and answered with `fallback`: nothing changed, the rows stay pending.
    // The fallback is read under the lock: `stats()` falls back to `lastStats`, which the body writes.
    func locked<T>(_ fallback: @autoclosure () -> T, _ body: (PostgresConnection) throws(PostgresError) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        do throws(PostgresError) {
            if conn?.isOpen != true {
                conn?.close()
                conn = try PostgresConnection(settings)
            }
            let value = try body(conn!)
            lastFailure = nil
            return value
        } catch {
            lastFailure = "\(label): \(error)"
            if conn?.isOpen != true { conn = nil }
            return fallback()
        }
    }
}

extension PostgresOutbox {
    /// Every pending row in seq order, held by anyone or not (tests).
    func allPending() -> [OutboxRow] {
        locked([]) { (c: PostgresConnection) throws(PostgresError) -> [OutboxRow] in
            let r = try c.query("""
                SELECT seq, event_id, ride, endpoint, created, body, attempts, next_attempt_at, last_result
                FROM ridepush.webhook_outbox ORDER BY seq
                """)
            var rows: [OutboxRow] = []
            for i in 0..<r.count { rows.append(try Self.row(r, i)) }
            return rows
        }
    }
}
