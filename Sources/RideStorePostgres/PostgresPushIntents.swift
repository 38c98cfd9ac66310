import RideCore
import RideStore
import RideWebhooks

/// The push sender's view of the shared store (PushIntentOutbox), on a connection of its own.
/// Several nodes read one outbox, so a node sends an intent only while it holds its lease
/// (`lease_owner`, `lease_until`, the webhook rows' columns): `newIntents` renews the leases of
/// the intents it holds (reporting those it could not renew as lost), then claims intents
/// nobody holds, or whose lease expired (a dead node's), with `FOR UPDATE SKIP LOCKED`, so two
/// nodes claiming at once never take the same one. An intent is held until every push it
/// owes was answered (a retrying APNs keeps it here, renewed every read), then deleted under
/// the lease.
public final class PostgresPushIntents: PushIntentOutbox {
    public let settings: PostgresSettings
    public let owner: String
    public let leaseMillis: Int64
    private let clock: RideClock
    private let label: String
    /// The connection and the leases this node holds, only inside `withLock`.
    private let state = Locked(State())

    private struct State {
        var conn: PostgresConnection?
        var held: Set<Int64> = []
        var lost: Set<Int64> = []
        var heldUntil: UnixMillis = .min
        var lastFailure: String?
    }

    public init(_ settings: PostgresSettings, owner: String = PostgresOutbox.newOwner(), leaseMillis: Int64 = 30_000,
                clock: RideClock = SystemClock()) {
        var s = settings
        s.applicationName = settings.applicationName + "-push"
        self.settings = s
        self.owner = owner
        self.leaseMillis = leaseMillis
        self.clock = clock
        label = "push outbox \(settings.redacted)"
    }

    /// Gives this node's leases up (another node takes the intents at once), then closes.
    public func close() {
        locked(()) { (c: PostgresConnection, st: inout State) throws(PostgresError) in
            try c.query("UPDATE ridepush.webhook_outbox SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1 AND endpoint = $2",
                        [.text(owner), .text(OutboxEvent.pushEndpoint)])
            st.held = []
        }
        state.withLock { st in
            st.conn?.close()
            st.conn = nil
        }
    }

    public var lastError: String? { state.withLock { $0.lastFailure } }

    public func newIntents(limit: Int) -> [OutboxRow] {
        let rows = locked(nil) { (c: PostgresConnection, st: inout State) throws(PostgresError) -> [OutboxRow]? in
            let now = clock.now()
            let until = now + leaseMillis
            if !st.held.isEmpty {
                let r = try c.query("""
                    UPDATE ridepush.webhook_outbox SET lease_until = $1
                    WHERE lease_owner = $2 AND seq = ANY($3::bigint[]) RETURNING seq
                    """, [.int(until), .text(owner), .text(Self.bigints(st.held))])
                var renewed = Set<Int64>()
                for i in 0..<r.count { if let seq = r.int(i, 0) { renewed.insert(seq) } }
                st.lost.formUnion(st.held.subtracting(renewed))
                st.held = renewed
            }
            st.heldUntil = until
            let room = max(0, limit - st.held.count)
            guard room > 0 else { return [] }
            let r = try c.query("""
                WITH claim AS (
                    SELECT seq FROM ridepush.webhook_outbox
                    WHERE endpoint = $5 AND (lease_owner IS NULL OR lease_until < $1)
                    ORDER BY seq LIMIT $3
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE ridepush.webhook_outbox o SET lease_owner = $2, lease_until = $4 FROM claim WHERE o.seq = claim.seq
                RETURNING o.seq, o.event_id, o.ride, o.endpoint, o.created, o.body, o.attempts, o.next_attempt_at, o.last_result
                """, [.int(now), .text(owner), .int(Int64(room)), .int(until), .text(OutboxEvent.pushEndpoint)])
            var rows: [OutboxRow] = []
            for i in 0..<r.count { rows.append(try PostgresOutbox.row(r, i)) }
            rows.sort { $0.seq < $1.seq }
            st.held.formUnion(rows.map(\.seq))
            return rows
        }
        if let rows { return rows }
        let now = clock.now()
        state.withLock { st in
            if !st.held.isEmpty, now >= st.heldUntil {
                st.lost.formUnion(st.held)
                st.held = []
            }
        }
        return []
    }

    public func takeLost() -> Set<Int64> {
        state.withLock { st in
            defer { st.lost = [] }
            return st.lost
        }
    }

    public func delivered(seq: Int64) {
        let done = locked(false) { (c: PostgresConnection, st: inout State) throws(PostgresError) -> Bool in
            try c.query("DELETE FROM ridepush.webhook_outbox WHERE seq = $1 AND lease_owner = $2", [.int(seq), .text(owner)])
            st.held.remove(seq)
            return true
        }
        // Not recorded: let the lease go, so the intent is claimed again (sent again: at least once).
        if !done {
            state.withLock { st in
                if st.held.remove(seq) != nil { st.lost.insert(seq) }
            }
        }
    }

    public func pushStats() -> (pending: Int, targets: Int) {
        locked((0, 0)) { (c: PostgresConnection, _: inout State) throws(PostgresError) -> (pending: Int, targets: Int) in
            let r = try c.query("""
                SELECT (SELECT count(*) FROM ridepush.webhook_outbox WHERE endpoint = $1), (SELECT count(*) FROM ridepush.push_targets)
                """, [.text(OutboxEvent.pushEndpoint)])
            return (Int(r.int(0, 0) ?? 0), Int(r.int(0, 1) ?? 0))
        }
    }

    public func pushTargets(ride: String) -> [StoredPushTarget]? {
        rows("WHERE ride = $1::text ORDER BY n", ride)
    }

    public func pushToStartTokens(rider: String) -> [StoredPushTarget]? {
        rows("WHERE ride IS NULL AND rider = $1::text ORDER BY n", rider)
    }

    public func deletePushTarget(ride: String?, rider: String, token: String) {
        locked(()) { (c: PostgresConnection, _: inout State) throws(PostgresError) in
            if let ride {
                try c.query("DELETE FROM ridepush.push_targets WHERE ride = $1::text AND token = $2::text", [.text(ride), .text(token)])
            } else {
                try c.query("DELETE FROM ridepush.push_targets WHERE ride IS NULL AND rider = $1::text AND token = $2::text",
                            [.text(rider), .text(token)])
            }
        }
    }

    private func rows(_ whereClause: String, _ key: String) -> [StoredPushTarget]? {
        locked(nil) { (c: PostgresConnection, _: inout State) throws(PostgresError) -> [StoredPushTarget]? in
            let r = try c.query("SELECT platform, kind, ride, rider, token, at FROM ridepush.push_targets \(whereClause)", [.text(key)])
            return (0..<r.count).map { i in
                StoredPushTarget(platform: r.text(i, 0), kind: r.text(i, 1), ride: r.optionalText(i, 2), rider: r.text(i, 3),
                                 token: r.text(i, 4), at: r.int(i, 5) ?? 0)
            }
        }
    }

    private static func bigints(_ seqs: Set<Int64>) -> String {
        "{" + seqs.map(String.init).joined(separator: ",") + "}"
    }

    private func locked<T>(_ fallback: @autoclosure () -> T, _ body: (PostgresConnection, inout State) throws(PostgresError) -> T) -> T {
        state.withLock { st in
            do throws(PostgresError) {
                let c: PostgresConnection
                if let open = st.conn, open.isOpen {
                    c = open
                } else {
                    st.conn?.close()
                    c = try PostgresConnection(settings)
                    st.conn = c
                }
                let value = try body(c, &st)
                st.lastFailure = nil
                return value
            } catch {
                st.lastFailure = "\(label): \(error)"
                if st.conn?.isOpen != true { st.conn = nil }
                return fallback()
            }
        }
    }
}
