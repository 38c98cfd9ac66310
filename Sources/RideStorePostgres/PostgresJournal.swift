import RideCore
import RideStore

/// The NOTIFY channel every node listens on. The payload is `<ride id>:<seq>` (a ride id is
/// at most 64 bytes, far under NOTIFY's 8,000-byte limit); it is only a hint to read.
public let journalChannel = "ridepush"

/// The store's SQL, as functions over a connection, independent of how the server calls the
/// store. Writes run inside the transaction of a `commit`; each costs one statement (one
/// round trip), and a refused write leaves nothing behind without raising an error, so the
/// batch's transaction goes on.
enum PostgresJournal {
    /// What a ride row holds for checking an append.
    struct RideRow: Equatable {
        var lastSeq: Int64
        var state: RideState
    }

    // MARK: writes

    /// Locks the rows of `ids` that exist, in id order, and returns them. Taking every lock of
    /// a batch up front and in one order means two nodes' batches never deadlock; under READ
    /// COMMITTED a row another node is writing is read once that node commits, so the checks
    /// made against these rows hold until this transaction ends.
    static func lockRides(_ c: PostgresConnection, _ ids: [String], label: String) throws(PostgresError) -> [String: RideRow] {
        guard let st = lockStatement(ids) else { return [:] }
        return try lockedRows(try c.query(st.sql, st.params))
    }

    /// The statement of `lockRides`; nil when there is nothing to lock.
    static func lockStatement(_ ids: [String]) -> (sql: String, params: [PGValue])? {
        guard !ids.isEmpty else { return nil }
        let sorted = Array(Set(ids)).sorted()
        // One index probe per id, locking as it goes in the database's id order: the plain
        // `WHERE id = ANY(...) ORDER BY id FOR UPDATE` was planned as a sequential scan of
        // every ride while the table was small (random_page_cost), 1.3 ms at 6,000 rides
        // and growing with the table, against ~0.4 ms for 37 probes. A subquery with FOR
        // UPDATE is never flattened into the join, so the planner cannot turn it back.
        return ("""
            SELECT r.id, r.last_seq, r.state FROM (SELECT id FROM unnest($1::text[]) u(id) ORDER BY id) k
            CROSS JOIN LATERAL (SELECT id, last_seq, state FROM ridepush.rides WHERE id = k.id FOR UPDATE) r
            """, [.text(arrayLiteral(sorted))])
    }

    static func lockedRows(_ r: PGResult) throws(PostgresError) -> [String: RideRow] {
        var out: [String: RideRow] = [:]
        for i in 0..<r.count {
            guard let seq = r.int(i, 1), let state = RideState(rawValue: r.text(i, 2)) else {
                throw PostgresError(.value, "ride \(r.text(i, 0)) has an unreadable seq or state '\(r.text(i, 2))'")
            }
            out[r.text(i, 0)] = RideRow(lastSeq: seq, state: state)
        }
        return out
    }

    enum Outcome: Equatable {
        case written, idExists, replyExists
        /// The ride's row was not at the expected seq (only when an earlier write of the same
        /// pipelined batch was refused); nothing of the append was kept but its reply.
        case stale
        /// The ride row went in but the reply key was taken: the row must be taken out.
        case replyExistsRowInserted
    }

    /// Creates the ride row and its start entry (seq 1), records `reply` and notifies; or
    /// writes nothing.
    static func create(_ c: PostgresConnection, _ new: NewRide, reply: ReplyRecord?) throws(PostgresError) -> Outcome {
        let st = createStatement(new, reply: reply)
        let outcome = createOutcome(try c.query(st.sql, st.params), reply: reply)
        guard outcome == .replyExistsRowInserted else { return outcome }
        // The row went in but the reply key was taken: take the row back out (the rare path).
        try c.query("DELETE FROM ridepush.rides WHERE id = $1::text", [.text(new.id)])
        return .replyExists
    }

    /// `strict` (a group's one-round-trip path): no NOTIFY of its own (the group sends one)
    /// and a write that did not go in fails the statement with division_by_zero (22012), so
    /// the pipeline stops, the transaction is rolled back and the checked path decides.
    static func createStatement(_ new: NewRide, reply: ReplyRecord?, strict: Bool = false) -> (sql: String, params: [PGValue]) {
        // The ride row first: its insert waits for a concurrent insert of the same id (another
        // node's start) and then does nothing. The reply depends on the row, the entry on both.
        let result = strict ? "SELECT 1 / (SELECT count(*)::integer FROM j)" : """
            SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM j),
                   (SELECT count(*) FROM (SELECT pg_notify('\(journalChannel)', ride_id || ':1') FROM j) n)
            """
        return ("""
            WITH r AS (
                INSERT INTO ridepush.rides (id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::bigint, NULL, 1, 'riding')
                ON CONFLICT (id) DO NOTHING RETURNING id),
            p AS (
                INSERT INTO ridepush.replies (scope, id, request, bytes, at)
                SELECT $6::bytea, $7::bytea, $8::text, $9::bytea, $10::bigint FROM r WHERE $6::bytea IS NOT NULL
                ON CONFLICT DO NOTHING RETURNING 1),
            j AS (
                INSERT INTO ridepush.journal (ride_id, seq, kind, at)
                SELECT id, 1, 'start', $5::bigint FROM r WHERE $6::bytea IS NULL OR EXISTS (SELECT FROM p)
                RETURNING ride_id)
            \(result)
            """, [.text(new.id), .text(new.planID), .text(new.owner), .int(new.limit), .int(new.startedAt)] + replyParams(reply))
    }

    static func createOutcome(_ r: PGResult, reply: ReplyRecord?) -> Outcome {
        if (r.int(0, 1) ?? 0) == 1 { return .written }
        if (r.int(0, 0) ?? 0) == 0 { return .idExists }
        return .replyExistsRowInserted
    }

    /// Appends `entry` (already checked against the locked row) with `reply` and notifies;
    /// or, when the reply key is taken, writes nothing. The row's seq is checked again in SQL,
    /// so an append can never leave a gap whatever the caller checked.
    static func append(_ c: PostgresConnection, _ entry: JournalEntry, reply: ReplyRecord?) throws(PostgresError) -> Outcome {
        let st = appendStatement(entry, reply: reply)
        return appendOutcome(try c.query(st.sql, st.params), reply: reply)
    }

    /// `strict`: as for `createStatement`.
    static func appendStatement(_ entry: JournalEntry, reply: ReplyRecord?, strict: Bool = false) -> (sql: String, params: [PGValue]) {
        let t = entry.transition
        var reason: String?
        var metres: Int64?
        var endedAt: Int64?
        if case .end(let at, let why, let m) = t { (reason, metres, endedAt) = (why.rawValue, m, at) }
        let result = strict ? "SELECT 1 / (SELECT count(*)::integer FROM j)" : """
            SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM j),
                   (SELECT count(*) FROM (SELECT pg_notify('\(journalChannel)', ride_id || ':' || $2::integer) FROM j) n)
            """
        // Strict writes are not checked in Swift against the locked row: the transition must
        // be allowed from the row's state too (StoreRules.appendRefusal), not only follow its seq.
        let stateCheck = strict ? " AND state = ANY($14::text[])" : ""
        let allowedFrom: [RideState]
        switch t {
        case .start: allowedFrom = []
        case .pause: allowedFrom = [.riding]
        case .resume: allowedFrom = [.paused]
        case .end: allowedFrom = [.riding, .paused]
        }
        let extra: [PGValue] = strict ? [.text(arrayLiteral(allowedFrom.map(\.rawValue)))] : []
        return ("""
            WITH p AS (
                INSERT INTO ridepush.replies (scope, id, request, bytes, at)
                SELECT $8::bytea, $9::bytea, $10::text, $11::bytea, $12::bigint WHERE $8::bytea IS NOT NULL
                ON CONFLICT DO NOTHING RETURNING 1),
            u AS (
                UPDATE ridepush.rides SET last_seq = $2::integer, state = $7::text, ended_at = COALESCE($13::bigint, ended_at)
                WHERE id = $1::text AND last_seq = $2::integer - 1 AND ($8::bytea IS NULL OR EXISTS (SELECT FROM p))\(stateCheck)
                RETURNING id),
            j AS (
                INSERT INTO ridepush.journal (ride_id, seq, kind, at, reason, metres)
                SELECT id, $2::integer, $3::text, $4::bigint, $5::text, $6::bigint FROM u RETURNING ride_id)
            \(result)
            """, [.text(entry.ride), .int(entry.seq), .text(t.kind), .int(t.at), .text(reason), .int(metres),
                  .text(StoreRules.state(after: t).rawValue)] + replyParams(reply) + [.int(endedAt)] + extra)
    }

    /// The group's creates and appends as one strict statement, whatever their number: the
    /// replies, the new ride rows, the appends' row updates (each checked in SQL against the
    /// locked row: at seq − 1, in a state the transition is allowed from) and every journal
    /// entry, each one multi-row write over arrays; if any of them did not go in, the
    /// statement fails with division_by_zero, as a strict per-write statement does, and the
    /// group falls back to the checked path. One statement parsed and planned per group
    /// instead of one per write (those were ~40 % of PostgreSQL's CPU per transition).
    ///
    /// The replies and rides go in by plain INSERT, not ON CONFLICT DO NOTHING: a key or an
    /// id that is taken fails the statement (unique_violation) like any other miss, and a
    /// speculative insertion costs a second WAL record per row (HEAP_CONFIRM: 1.5 of the 13
    /// records per transition).
    ///
    /// nil when a ride has more than one create or append in the group (an UPDATE changes a
    /// row once per statement, and a row inserted by the statement is not visible to it: the
    /// per-write statements handle that), or when there is none. Traces are not in it.
    static func groupStatement(_ batch: [StoreWrite]) -> (sql: String, params: [PGValue])? {
        var seen = Set<String>()
        var cID: [String?] = [], cPlan: [String?] = [], cOwner: [String?] = [], cLimit: [String?] = [], cAt: [String?] = [],
            cN: [String?] = []
        var aRide: [String?] = [], aSeq: [String?] = [], aKind: [String?] = [], aAt: [String?] = [], aReason: [String?] = [],
            aMetres: [String?] = [], aState: [String?] = [], aAllowed: [String?] = [], aN: [String?] = []
        var pScope: [String?] = [], pID: [String?] = [], pRequest: [String?] = [], pBytes: [String?] = [], pAt: [String?] = []
        func record(_ reply: ReplyRecord?) {
            guard let reply else { return }
            pScope.append(hex(Array(reply.key.scope.utf8)))
            pID.append(hex(Array(reply.key.id.utf8)))
            pRequest.append(reply.request)
            pBytes.append(hex(reply.bytes))
            pAt.append(String(reply.at))
        }
        for (n, write) in batch.enumerated() {
            switch write {
            case .create(let new, let reply):
                guard seen.insert(new.id).inserted else { return nil }
                cID.append(new.id); cPlan.append(new.planID); cOwner.append(new.owner); cLimit.append(new.limit.map { String($0) })
                cAt.append(String(new.startedAt)); cN.append(String(n))
                record(reply)
            case .append(let entry, let reply):
                guard seen.insert(entry.ride).inserted else { return nil }
                let t = entry.transition
                let allowed: [RideState]
                var reason: String?, metres: Int64?
                switch t {
                case .start: return nil  // never allowed as an append: the per-write path refuses it
                case .pause: allowed = [.riding]
                case .resume: allowed = [.paused]
                case .end(_, let why, let m): allowed = [.riding, .paused]; (reason, metres) = (why.rawValue, m)
                }
                aRide.append(entry.ride); aSeq.append(String(entry.seq)); aKind.append(t.kind); aAt.append(String(t.at))
                aReason.append(reason); aMetres.append(metres.map { String($0) })
                aState.append(StoreRules.state(after: t).rawValue); aAllowed.append(allowed.map(\.rawValue).joined(separator: ","))
                aN.append(String(n))
                record(reply)
            case .trace:
                continue
            }
        }
        guard !seen.isEmpty else { return nil }
        let arrays: [[String?]] = [cID, cPlan, cOwner, cLimit, cAt, cN,
                                   aRide, aSeq, aKind, aAt, aReason, aMetres, aState, aAllowed, aN,
                                   pScope, pID, pRequest, pBytes, pAt]
        return ("""
            WITH c AS (
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::integer[])
                    AS c(id, plan_id, owner, time_limit, started_at, n)),
            a AS (
                SELECT * FROM unnest($7::text[], $8::integer[], $9::text[], $10::bigint[], $11::text[], $12::bigint[],
                                     $13::text[], $14::text[], $15::integer[])
                    AS a(ride_id, seq, kind, at, reason, metres, state, allowed, n)),
            p AS (
                INSERT INTO ridepush.replies (scope, id, request, bytes, at)
                SELECT decode(s, 'hex'), decode(i, 'hex'), q, decode(b, 'hex'), t
                FROM unnest($16::text[], $17::text[], $18::text[], $19::text[], $20::bigint[]) AS p(s, i, q, b, t)
                RETURNING 1),
            r AS (
                INSERT INTO ridepush.rides (id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                SELECT id, plan_id, owner, time_limit, started_at, NULL, 1, 'riding' FROM c ORDER BY n
                RETURNING 1),
            u AS (
                UPDATE ridepush.rides x SET last_seq = a.seq, state = a.state,
                    ended_at = CASE WHEN a.kind = 'end' THEN a.at ELSE x.ended_at END
                FROM a WHERE x.id = a.ride_id AND x.last_seq = a.seq - 1 AND x.state = ANY(string_to_array(a.allowed, ','))
                RETURNING 1),
            j AS (
                INSERT INTO ridepush.journal (ride_id, seq, kind, at, reason, metres)
                SELECT ride_id, seq, kind, at, reason, metres FROM (
                    SELECT id AS ride_id, 1 AS seq, 'start' AS kind, started_at AS at, NULL::text AS reason, NULL::bigint AS metres, n FROM c
                    UNION ALL SELECT ride_id, seq, kind, at, reason, metres, n FROM a) e
                ORDER BY n
                RETURNING 1)
            SELECT 1 / ((SELECT count(*) FROM p) = $21::bigint AND (SELECT count(*) FROM r) = $22::bigint
                        AND (SELECT count(*) FROM u) = $23::bigint AND (SELECT count(*) FROM j) = $24::bigint)::integer
            """, arrays.map { .text(nullableArrayLiteral($0)) }
                + [.int(Int64(pScope.count)), .int(Int64(cID.count)), .int(Int64(aRide.count)), .int(Int64(cID.count + aRide.count))])
    }

    static func appendOutcome(_ r: PGResult, reply: ReplyRecord?) -> Outcome {
        if (r.int(0, 1) ?? 0) == 1 { return .written }
        return reply != nil && (r.int(0, 0) ?? 0) == 0 ? .replyExists : .stale
    }

    static func prune(_ c: PostgresConnection, repliesBefore instant: UnixMillis) throws(PostgresError) {
        try c.query("DELETE FROM ridepush.replies WHERE at < $1::bigint", [.int(instant)])
    }

    private static func replyParams(_ reply: ReplyRecord?) -> [PGValue] {
        guard let reply else { return [.null, .null, .null, .null, .null] }
        return [.bytes(Array(reply.key.scope.utf8)), .bytes(Array(reply.key.id.utf8)), .text(reply.request),
                .bytes(reply.bytes), .int(reply.at)]
    }

    /// The group's NOTIFYs: `ride:seq` of every write, one per line, as few notifications as
    /// fit under NOTIFY's 8,000-byte payload (one for any usual group). One NOTIFY per group
    /// instead of one per write: each takes the notify queue's lock until its transaction
    /// ends, and every listening node is woken once per group, not once per write.
    static func notifyStatements(_ hints: [(ride: String, seq: Int64)]) -> [(sql: String, params: [PGValue])] {
        var out: [(sql: String, params: [PGValue])] = []
        var payload = ""
        for h in hints {
            let line = h.ride + ":" + String(h.seq)
            if !payload.isEmpty && payload.utf8.count + 1 + line.utf8.count > maxNotifyPayload {
                out.append(("SELECT pg_notify('\(journalChannel)', $1::text)", [.text(payload)]))
                payload = ""
            }
            payload += payload.isEmpty ? line : "\n" + line
        }
        if !payload.isEmpty { out.append(("SELECT pg_notify('\(journalChannel)', $1::text)", [.text(payload)])) }
        return out
    }

    /// Under PostgreSQL's 8,000 bytes (a ride id is at most 64 bytes, so a line fits).
    static let maxNotifyPayload = 7_900

    /// One statement inserting `events` in order (so their seqs follow it); nil for none.
    static func outboxStatement(_ events: [OutboxEvent]) -> (sql: String, params: [PGValue])? {
        guard !events.isEmpty else { return nil }
        return ("""
            INSERT INTO ridepush.webhook_outbox (event_id, type, ride, endpoint, created, body, next_attempt_at)
            SELECT e, t, r, p, c, decode(b, 'hex'), c
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[])
                WITH ORDINALITY AS u(e, t, r, p, c, b, n)
            ORDER BY n
            """, [.text(arrayLiteral(events.map(\.eventID))), .text(arrayLiteral(events.map(\.type))),
                  .text(arrayLiteral(events.map(\.rideID))), .text(arrayLiteral(events.map(\.endpoint))),
                  .text(arrayLiteral(events.map { String($0.created) })), .text(arrayLiteral(events.map { hex($0.body) }))])
    }

    static func insertOutbox(_ c: PostgresConnection, _ events: [OutboxEvent]) throws(PostgresError) {
        guard let s = outboxStatement(events) else { return }
        _ = try c.query(s.sql, s.params)
    }

    /// A PostgreSQL array literal of text values (ride ids never hold quotes or backslashes,
    /// but they are escaped anyway).
    static func arrayLiteral(_ items: [String]) -> String {
        nullableArrayLiteral(items.map { Optional($0) })
    }

    /// Lower-case hex of `bytes`, what `decode(..., 'hex')` reads.
    static func hex(_ bytes: [UInt8]) -> String { Hex.lower(bytes) }

    /// `arrayLiteral` with nil as SQL NULL.
    /// Built byte by byte: a group's twenty arrays of ~40 elements each went through
    /// `replacingOccurrences` twice per element before (~30 µs of the node's CPU per transition).
    static func nullableArrayLiteral(_ items: [String?]) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(items.count * 16 + 2)
        for (k, item) in items.enumerated() {
            if k > 0 { out.append(UInt8(ascii: ",")) }
            guard let item else {
                out.append(contentsOf: "NULL".utf8)
                continue
            }
            out.append(UInt8(ascii: "\""))
            for b in item.utf8 {
                if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(b)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: reads

    private static let rideColumns = "r.id, r.plan_id, r.owner, r.time_limit, r.last_seq, j.seq, j.kind, j.at, j.reason, j.metres"

    static func openRides(_ c: PostgresConnection, label: String) throws(StoreError) -> [StoredRide] {
        try rides(c, label: label, """
            SELECT \(rideColumns) FROM ridepush.rides r JOIN ridepush.journal j ON j.ride_id = r.id
            WHERE r.ended_at IS NULL ORDER BY r.id, j.seq
            """, [])
    }

    static func ride(_ c: PostgresConnection, _ id: String, label: String) throws(StoreError) -> StoredRide? {
        try rides(c, label: label, """
            SELECT \(rideColumns) FROM ridepush.rides r JOIN ridepush.journal j ON j.ride_id = r.id
            WHERE r.id = $1::text ORDER BY j.seq
            """, [.text(id)]).first
    }

    static func rides(_ c: PostgresConnection, ids: [String], label: String) throws(StoreError) -> [StoredRide] {
        let st = ridesStatement(ids: ids)
        return try rides(c, label: label, st.sql, st.params)
    }

    static func ridesStatement(ids: [String]) -> (sql: String, params: [PGValue]) {
        // One index probe per id (OFFSET 0 keeps the subquery from being flattened into a
        // hash join over a sequential scan of every ride, as `r.id = ANY(...)` was planned
        // while the table was small).
        ("""
            SELECT \(rideColumns) FROM unnest($1::text[]) k(id)
            CROSS JOIN LATERAL (SELECT * FROM ridepush.rides WHERE id = k.id OFFSET 0) r
            CROSS JOIN LATERAL (SELECT * FROM ridepush.journal WHERE ride_id = r.id OFFSET 0) j ORDER BY r.id, j.seq
            """, [.text(arrayLiteral(ids))])
    }

    /// A page of the listing: the page's ids first through rides_started / rides_ended (a
    /// page reads `limit` index entries), then their journals, in the page's order.
    static func rides(_ c: PostgresConnection, _ page: RidePage, rider: String?, limit: Int, label: String) throws(StoreError) -> [StoredRide] {
        let n = PGValue.int(Int64(max(0, limit)))
        let inner: String, order: String
        var params: [PGValue]
        switch page {
        case .byStart(let after):
            let cond = after == nil ? "TRUE" : "(started_at, id COLLATE \"C\") > ($2::bigint, $3::text COLLATE \"C\")"
            params = [n] + (after.map { [.int($0.at), .text($0.id)] } ?? [])
            // A rider's page walks the same index and skips other riders' rows.
            let owner = rider == nil ? "" : " AND owner = $\(params.count + 1)::text"
            inner = "SELECT id, started_at AS k FROM ridepush.rides WHERE \(cond)\(owner) ORDER BY started_at, id COLLATE \"C\" LIMIT $1::integer"
            order = "p.k, p.id COLLATE \"C\", j.seq"
        case .ended(let before):
            let cond = before == nil ? "" : "AND (ended_at, id COLLATE \"C\") < ($2::bigint, $3::text COLLATE \"C\")"
            params = [n] + (before.map { [.int($0.at), .text($0.id)] } ?? [])
            let owner = rider == nil ? "" : " AND owner = $\(params.count + 1)::text"
            inner = "SELECT id, ended_at AS k FROM ridepush.rides WHERE ended_at IS NOT NULL \(cond)\(owner) ORDER BY ended_at DESC, id COLLATE \"C\" DESC LIMIT $1::integer"
            order = "p.k DESC, p.id COLLATE \"C\" DESC, j.seq"
        }
        if let rider { params.append(.text(rider)) }
        return try rides(c, label: label, """
            SELECT \(rideColumns) FROM (\(inner)) p JOIN ridepush.rides r ON r.id = p.id
            JOIN ridepush.journal j ON j.ride_id = r.id ORDER BY \(order)
            """, params)
    }

    static func reply(_ c: PostgresConnection, for key: ReplyKey) throws(PostgresError) -> StoredReply? {
        let r = try c.query("SELECT bytes, request FROM ridepush.replies WHERE scope = $1::bytea AND id = $2::bytea",
                            [.bytes(Array(key.scope.utf8)), .bytes(Array(key.id.utf8))])
        guard r.count > 0, let bytes = r.bytes(0, 0) else { return nil }
        return StoredReply(request: r.optionalText(0, 1), bytes: bytes)
    }

    /// Entries of one ride after `seq`, in order (what a NOTIFY hint asks a node to read).
    static func entries(_ c: PostgresConnection, ride id: String, after seq: Int64, label: String) throws(StoreError) -> [FeedEntry] {
        let r = try run(label) { () throws(PostgresError) in
            try c.query("""
                SELECT r.id, r.plan_id, r.owner, r.time_limit, j.seq, j.kind, j.at, j.reason, j.metres
                FROM ridepush.journal j JOIN ridepush.rides r ON r.id = j.ride_id
                WHERE j.ride_id = $1::text AND j.seq > $2::integer ORDER BY j.seq
                """, [.text(id), .int(seq)])
        }
        return try (0..<r.count).map { (i: Int) throws(StoreError) -> FeedEntry in try entry(r, i, offset: 0, label: label) }
    }

    /// Entries of several rides, each after its own seq, in (ride, seq) order: a node's
    /// catch-up for a batch of NOTIFY hints in one round trip instead of one per ride.
    /// Index probes per ride (the laterals with OFFSET 0 are not flattened): the plain joins
    /// were planned as a hash join over a scan of every ride while the table was small, ~2 ms
    /// a batch of 37 hints at 7,000 rides and growing, read by every node for every other
    /// node's group.
    static func entries(_ c: PostgresConnection, after seqs: [(ride: String, seq: Int64)], label: String) throws(StoreError) -> [FeedEntry] {
        guard !seqs.isEmpty else { return [] }
        let r = try run(label) { () throws(PostgresError) in
            try c.query("""
                SELECT r.id, r.plan_id, r.owner, r.time_limit, j.seq, j.kind, j.at, j.reason, j.metres
                FROM unnest($1::text[], $2::integer[]) AS k(id, after)
                CROSS JOIN LATERAL (SELECT * FROM ridepush.journal WHERE ride_id = k.id AND seq > k.after OFFSET 0) j
                CROSS JOIN LATERAL (SELECT * FROM ridepush.rides WHERE id = j.ride_id OFFSET 0) r
                ORDER BY j.ride_id, j.seq
                """, [.text(arrayLiteral(seqs.map(\.ride))), .text("{" + seqs.map { String($0.seq) }.joined(separator: ",") + "}")])
        }
        return try (0..<r.count).map { (i: Int) throws(StoreError) -> FeedEntry in try entry(r, i, offset: 0, label: label) }
    }

    /// Entries after `cursor` in journal order, at most `limit`, only from transactions that
    /// every later reader will also see as finished; and the cursor after them. The page of
    /// entries first, then one index probe per entry for its ride (every entry has its ride:
    /// the foreign key): the plain join hashed every ride at each read (a scan of the table).
    static func feed(_ c: PostgresConnection, after cursor: JournalCursor, limit: Int,
                     label: String) throws(StoreError) -> (entries: [FeedEntry], cursor: JournalCursor) {
        let r = try run(label) { () throws(PostgresError) in
            try c.query("""
                SELECT r.id, r.plan_id, r.owner, r.time_limit, j.seq, j.kind, j.at, j.reason, j.metres,
                       j.txid::text, j.position
                FROM (SELECT * FROM ridepush.journal
                      WHERE (txid, position) > ($1::text::xid8, $2::bigint) AND txid < pg_snapshot_xmin(pg_current_snapshot())
                      ORDER BY txid, position LIMIT $3::integer) j
                CROSS JOIN LATERAL (SELECT * FROM ridepush.rides WHERE id = j.ride_id OFFSET 0) r
                ORDER BY j.txid, j.position
                """, [.int(cursor.txid), .int(cursor.position), .int(Int64(limit))])
        }
        var out: [FeedEntry] = []
        var next = cursor
        for i in 0..<r.count {
            out.append(try entry(r, i, offset: 0, label: label))
            guard let tx = r.int(i, 9), let pos = r.int(i, 10) else {
                throw StoreError(.corrupt, "\(label): a journal entry without a transaction id or position")
            }
            next = JournalCursor(txid: tx, position: pos)
        }
        return (out, next)
    }

    /// A cursor from which a feed read returns every entry not yet committed when this runs
    /// (and possibly some already committed: applying by seq skips those).
    static func startCursor(_ c: PostgresConnection, label: String) throws(StoreError) -> JournalCursor {
        let r = try run(label) { () throws(PostgresError) in
            try c.query("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
        }
        guard let xmin = r.int(0, 0) else { throw StoreError(.unavailable, "\(label): no snapshot xmin") }
        return JournalCursor(txid: xmin - 1, position: Int64.max)
    }

    // MARK: private

    /// Groups rows of (ride columns, one entry) into rides, replaying each journal and
    /// checking its seq numbers run 1, 2, … up to the ride's recorded seq.
    private static func rides(_ c: PostgresConnection, label: String, _ sql: String, _ params: [PGValue]) throws(StoreError) -> [StoredRide] {
        try rides(try run(label) { () throws(PostgresError) in try c.query(sql, params) }, label: label)
    }

    static func rides(_ r: PGResult, label: String) throws(StoreError) -> [StoredRide] {
        var out: [StoredRide] = []
        var i = 0
        while i < r.count {
            let id = r.text(i, 0)
            let plan = r.text(i, 1), owner = r.optionalText(i, 2), limit = r.int(i, 3), last = r.int(i, 4) ?? 0
            var journal: [RideTransition] = []
            while i < r.count && r.text(i, 0) == id {
                let e = try entry(r, i, offset: 1, label: label)
                guard e.seq == Int64(journal.count) + 1 else {
                    throw StoreError(.corrupt, "\(label): ride \(id) has journal entry \(e.seq) where \(journal.count + 1) belongs")
                }
                journal.append(e.entry.transition)
                i += 1
            }
            guard Int64(journal.count) == last,
                  let stored = StoredRide(id: id, planID: plan, owner: owner, limit: limit, journal: journal) else {
                throw StoreError(.corrupt, "\(label): the journal of ride \(id) does not replay (\(journal.map(\.kind).joined(separator: ", ")); recorded seq \(last))")
            }
            out.append(stored)
        }
        return out
    }

    /// Reads an entry whose columns start at 0 (id, plan, owner, limit) and, after `offset`
    /// extra columns, (seq, kind, at, reason, metres).
    private static func entry(_ r: PGResult, _ i: Int, offset: Int, label: String) throws(StoreError) -> FeedEntry {
        let id = r.text(i, 0)
        let base = 4 + offset
        guard let seq = r.int(i, base), let at = r.int(i, base + 2) else {
            throw StoreError(.corrupt, "\(label): ride \(id) has an entry without seq or instant")
        }
        let t: RideTransition
        switch r.text(i, base + 1) {
        case "start": t = .start(at: at)
        case "pause": t = .pause(at: at)
        case "resume": t = .resume(at: at)
        case "end":
            guard let raw = r.optionalText(i, base + 3), let reason = EndReason(rawValue: raw), let metres = r.int(i, base + 4) else {
                throw StoreError(.corrupt, "\(label): ride \(id) has an end without a valid reason and metres")
            }
            t = .end(at: at, reason: reason, metres: metres)
        case let other:
            throw StoreError(.corrupt, "\(label): ride \(id) has an unknown transition '\(other)'")
        }
        return FeedEntry(JournalEntry(ride: id, seq: seq, transition: t), planID: r.text(i, 1), owner: r.optionalText(i, 2), limit: r.int(i, 3))
    }

    @discardableResult
    static func run<T>(_ label: String, _ body: () throws(PostgresError) -> T) throws(StoreError) -> T {
        do { return try body() } catch { throw StoreError(postgres: error, label: label) }
    }

    // MARK: schema

    /// Creates or upgrades the schema; refuses a newer one or a `ridepush` schema that is
    /// not RidePush's. Runs with the migration lock held, so nodes starting at once agree.
    static func migrate(_ c: PostgresConnection, label: String) throws(StoreError) {
        try run(label) { () throws(PostgresError) in try c.query("BEGIN") }
        do throws(StoreError) {
            let tables: [String] = try run(label) { () throws(PostgresError) -> [String] in
                try c.query("SELECT pg_advisory_xact_lock($1::bigint)", [.int(PostgresSchema.migrationLock)])
                let ns = try c.query("SELECT 1 FROM pg_namespace WHERE nspname = 'ridepush'")
                if ns.count == 0 { try c.query("CREATE SCHEMA ridepush") }
                let t = try c.query("""
                    SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'ridepush' ORDER BY 1
                    """)
                return (0..<t.count).map { t.text($0, 0) }
            }
            var v: Int64 = 0
            if !tables.isEmpty {
                guard tables.contains("schema_version") else {
                    throw StoreError(.corrupt, "\(label): schema ridepush exists but is not a RidePush store (no schema_version table; has \(tables.joined(separator: ", ")))")
                }
                v = try run(label) { () throws(PostgresError) -> Int64 in
                    try c.query("SELECT COALESCE(MAX(version), 0) FROM ridepush.schema_version").int(0, 0) ?? 0
                }
            }
            if v > PostgresSchema.current {
                throw StoreError(.newerSchema, "\(label): schema version \(v) is newer than this RidePush supports (version \(PostgresSchema.current)); upgrade RidePush on every node, or use another database")
            }
            for step in PostgresSchema.migrations where step.version > v {
                try run(label) { () throws(PostgresError) in
                    try c.query(step.sql)
                    try c.query("INSERT INTO ridepush.schema_version (version) VALUES ($1::integer)", [.int(step.version)])
                }
            }
            try run(label) { () throws(PostgresError) in try c.query("COMMIT") }
        } catch {
            if c.isOpen { _ = try? c.query("ROLLBACK") }
            throw error
        }
    }
}

extension StoreError {
    /// What the server does about a PostgreSQL failure: anything about reaching the server
    /// is `.unavailable` (retry with the same id); a unique violation is a `.conflict`.
    init(postgres e: PostgresError, label: String) {
        switch e.kind {
        case .connect, .lost, .timeout:
            self.init(.unavailable, "\(label): \(e.message)")
        case .server where e.isUniqueViolation:
            self.init(.conflict, "\(label): \(e)")
        case .server:
            self.init(.unavailable, "\(label): \(e)")
        case .value:
            // Refused before it reached the server: retrying cannot help, so not unavailable.
            self.init(.conflict, "\(label): \(e.message)")
        }
    }
}
