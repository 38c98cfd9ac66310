import RideCore

/// One journal entry as the nodes exchange it: the ride's fixed fields travel with it so a
/// node that never saw the ride's start can still build the ride from its entries.
public struct JournalEntry: Sendable, Equatable {
    public let ride: String
    public let planID: String
    public let owner: String?
    public let limit: Int64?
    /// 1 for the start; each later entry of the ride is the previous one's + 1.
    public let seq: Int64
    public let transition: RideTransition

    public init(ride: String, planID: String, owner: String?, limit: Int64?, seq: Int64, transition: RideTransition) {
        self.ride = ride
        self.planID = planID
        self.owner = owner
        self.limit = limit
        self.seq = seq
        self.transition = transition
    }
}

/// Where a node's catch-up read of the whole journal stands: the (transaction id, position)
/// of the last entry read, in the order of `ridepush.journal_feed`.
public struct JournalCursor: Sendable, Equatable, Comparable, CustomStringConvertible {
    public let txid: Int64
    public let position: Int64

    public init(txid: Int64, position: Int64) {
        self.txid = txid
        self.position = position
    }

    public static func < (a: JournalCursor, b: JournalCursor) -> Bool {
        (a.txid, a.position) < (b.txid, b.position)
    }

    public var description: String { "\(txid)/\(position)" }
}

/// The NOTIFY channel every node listens on. The payload is `<ride id>:<seq>` (a ride id is
/// at most 64 bytes, far under NOTIFY's 8,000-byte limit); it is only a hint to read.
public let journalChannel = "ridepush"

/// What a conditional write found.
enum WriteOutcome: Equatable {
    case written
    /// The ride's last sequence number was not the expected one (another node appended
    /// first), or the ride does not exist; nothing was written.
    case stale
    /// A ride with this id already exists (create only); nothing was written.
    case exists
    /// The reply key is already recorded; nothing was written.
    case replyExists
}

/// The store's SQL, as functions over a connection, independent of how the server calls the
/// store (one request at a time or a batch per transaction). Writes run inside a transaction
/// the caller opened; each one is a single statement, so a batch costs one round trip per
/// entry plus BEGIN and COMMIT, and a refused entry leaves nothing behind (no error is raised
/// for it, so the batch's transaction goes on).
enum PostgresJournal {
    // MARK: writes

    /// Creates the ride row and its start entry (seq 1) and records `reply`, or nothing.
    static func create(_ c: PostgresConnection, id: String, planID: String, owner: String?, limit: Int64?,
                       startedAt: UnixMillis, reply: ReplyRecord?) throws(PostgresError) -> WriteOutcome {
        // The reply first: its insert waits for a concurrent insert of the same key and then
        // does nothing, so at most one node records a request. The ride depends on it.
        let r = try c.query("""
            WITH p AS (
                INSERT INTO ridepush.replies (scope, id, bytes, at)
                SELECT $6::bytea, $7::bytea, $8::bytea, $9::bigint WHERE $6::bytea IS NOT NULL
                ON CONFLICT DO NOTHING RETURNING 1),
            r AS (
                INSERT INTO ridepush.rides (id, plan_id, owner, time_limit, started_at, ended_at, seq)
                SELECT $1::text, $2::text, $3::text, $4::bigint, $5::bigint, NULL, 1
                WHERE $6::bytea IS NULL OR EXISTS (SELECT FROM p)
                ON CONFLICT (id) DO NOTHING RETURNING id),
            j AS (
                INSERT INTO ridepush.journal (ride_id, seq, kind, at)
                SELECT id, 1, 'start', $5::bigint FROM r RETURNING ride_id)
            SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM j),
                   (SELECT count(*) FROM (SELECT pg_notify('\(journalChannel)', ride_id || ':1') FROM j) n)
            """, [.text(id), .text(planID), .text(owner), .int(limit), .int(startedAt)] + replyParams(reply))
        let replied = r.int(0, 0) ?? 0, written = r.int(0, 1) ?? 0
        if written == 1 { return .written }
        if reply != nil && replied == 0 { return .replyExists }
        if replied == 1 {
            // The ride id was taken after our reply went in: take the reply back out, so the
            // refusal leaves nothing (the rare path; the common one is a single statement).
            try c.query("DELETE FROM ridepush.replies WHERE scope = $1::bytea AND id = $2::bytea",
                        [.bytes(Array(reply!.key.scope.utf8)), .bytes(Array(reply!.key.id.utf8))])
        }
        return .exists
    }

    /// Appends `transition` as entry `seq` of the ride if its last entry is `seq - 1`, with
    /// `reply`, and notifies the other nodes; or writes nothing.
    static func append(_ c: PostgresConnection, ride id: String, seq: Int64, _ t: RideTransition,
                       reply: ReplyRecord?) throws(PostgresError) -> WriteOutcome {
        var reason: String?
        var metres: Int64?
        if case .end(_, let why, let m) = t { (reason, metres) = (why.rawValue, m) }
        // FOR UPDATE takes the ride's row lock and, under READ COMMITTED, re-reads the row
        // once a concurrent writer commits: the loser of a race sees the new seq and matches
        // nothing. Everything after depends on that row, so a refusal writes nothing.
        let r = try c.query("""
            WITH cur AS (
                SELECT id FROM ridepush.rides WHERE id = $1::text AND seq = $2::integer - 1 FOR UPDATE),
            p AS (
                INSERT INTO ridepush.replies (scope, id, bytes, at)
                SELECT $7::bytea, $8::bytea, $9::bytea, $10::bigint FROM cur WHERE $7::bytea IS NOT NULL
                ON CONFLICT DO NOTHING RETURNING 1),
            r AS (
                UPDATE ridepush.rides SET seq = $2::integer,
                    ended_at = CASE WHEN $3::text = 'end' THEN $4::bigint ELSE ended_at END
                WHERE id IN (SELECT id FROM cur) AND ($7::bytea IS NULL OR EXISTS (SELECT FROM p))
                RETURNING id),
            j AS (
                INSERT INTO ridepush.journal (ride_id, seq, kind, at, reason, metres)
                SELECT id, $2::integer, $3::text, $4::bigint, $5::text, $6::bigint FROM r RETURNING ride_id)
            SELECT (SELECT count(*) FROM cur), (SELECT count(*) FROM j),
                   (SELECT count(*) FROM (SELECT pg_notify('\(journalChannel)', ride_id || ':' || $2::integer) FROM j) n)
            """, [.text(id), .int(seq), .text(t.kind), .int(t.at), .text(reason), .int(metres)] + replyParams(reply))
        if (r.int(0, 1) ?? 0) == 1 { return .written }
        return (r.int(0, 0) ?? 0) == 0 ? .stale : .replyExists
    }

    static func prune(_ c: PostgresConnection, repliesBefore instant: UnixMillis) throws(PostgresError) {
        try c.query("DELETE FROM ridepush.replies WHERE at < $1::bigint", [.int(instant)])
    }

    private static func replyParams(_ reply: ReplyRecord?) -> [PGValue] {
        guard let reply else { return [.null, .null, .null, .null] }
        return [.bytes(Array(reply.key.scope.utf8)), .bytes(Array(reply.key.id.utf8)), .bytes(reply.bytes), .int(reply.at)]
    }

    // MARK: reads

    private static let rideColumns = "r.id, r.plan_id, r.owner, r.time_limit, r.seq, j.seq, j.kind, j.at, j.reason, j.metres"

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

    static func reply(_ c: PostgresConnection, for key: ReplyKey) throws(PostgresError) -> [UInt8]? {
        let r = try c.query("SELECT bytes FROM ridepush.replies WHERE scope = $1::bytea AND id = $2::bytea",
                            [.bytes(Array(key.scope.utf8)), .bytes(Array(key.id.utf8))])
        return r.count == 0 ? nil : r.bytes(0, 0)
    }

    /// Entries of one ride after `seq`, in order (what a NOTIFY hint asks a node to read).
    static func entries(_ c: PostgresConnection, ride id: String, after seq: Int64, label: String) throws(StoreError) -> [JournalEntry] {
        let r = try run(label) { () throws(PostgresError) in
            try c.query("""
                SELECT r.id, r.plan_id, r.owner, r.time_limit, j.seq, j.kind, j.at, j.reason, j.metres
                FROM ridepush.journal j JOIN ridepush.rides r ON r.id = j.ride_id
                WHERE j.ride_id = $1::text AND j.seq > $2::integer ORDER BY j.seq
                """, [.text(id), .int(seq)])
        }
        return try (0..<r.count).map { (i: Int) throws(StoreError) -> JournalEntry in try entry(r, i, offset: 0, label: label) }
    }

    /// Entries after `cursor` in journal order, at most `limit`, only from transactions that
    /// every later reader will also see as finished; and the cursor after them.
    static func feed(_ c: PostgresConnection, after cursor: JournalCursor, limit: Int,
                     label: String) throws(StoreError) -> (entries: [JournalEntry], cursor: JournalCursor) {
        let r = try run(label) { () throws(PostgresError) in
            try c.query("""
                SELECT r.id, r.plan_id, r.owner, r.time_limit, j.seq, j.kind, j.at, j.reason, j.metres,
                       j.txid::text, j.position
                FROM ridepush.journal j JOIN ridepush.rides r ON r.id = j.ride_id
                WHERE (j.txid, j.position) > ($1::text::xid8, $2::bigint)
                  AND j.txid < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY j.txid, j.position LIMIT $3::integer
                """, [.int(cursor.txid), .int(cursor.position), .int(Int64(limit))])
        }
        var out: [JournalEntry] = []
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
        let r = try run(label) { () throws(PostgresError) in try c.query(sql, params) }
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
                journal.append(e.transition)
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
    private static func entry(_ r: PGResult, _ i: Int, offset: Int, label: String) throws(StoreError) -> JournalEntry {
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
        return JournalEntry(ride: id, planID: r.text(i, 1), owner: r.optionalText(i, 2), limit: r.int(i, 3), seq: seq, transition: t)
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
