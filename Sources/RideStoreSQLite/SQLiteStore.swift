import Glibc
import RideCore
import RideStore

/// The embedded default store: one SQLite file in WAL mode. Every `commit` is one
/// `BEGIN IMMEDIATE … COMMIT` (one fsync for the whole batch) that is on disk when it returns.
///
/// The writer connection runs at `synchronous = NORMAL`, which in WAL mode syncs the log only
/// when a checkpoint copies it into the file (the log first, then the file) and when the log
/// restarts (its new header, before any frame), never at COMMIT; the log's fsync at COMMIT is
/// done by `logSync` (the store worker's sync thread, while the writer goes on) or by
/// `commit` itself. That keeps `FULL`'s promise for what anyone was told, because nobody is
/// told before that sync returns, and NORMAL's ordering keeps the file from tearing.
public final class SQLiteStore: LogSyncing {
    public let path: String
    /// Internal so tests can poke at the file (e.g. cap its size to provoke SQLITE_FULL).
    let db: SQLiteConnection
    /// Holds the file's flock (see `lock`); -1 once closed.
    private var lockFD: Int32 = -1
    /// Checkpoints the log off the writer's thread; nil once closed.
    private var checkpointer: SQLiteCheckpointer?
    private var syncer: SQLiteLogSync?
    /// The multi-row statements, by shape and rows (SQLiteGroupStatements.swift).
    var groupStatements: [Int: SQLStatement] = [:]
    /// What `prefetchReplies`/`prefetchRides` read for the group being decided; dropped at
    /// the next commit or prune (the only writes), so never older than the store's state.
    var prefetchedReplies: [ReplyKey: StoredReply?]?
    var prefetchedRides: [String: StoredRide?]?
    /// Every ride id and reply key in the file, so looking up one never written reads nothing
    /// (KeyFilter.swift). Built at open; nil (every lookup reads) if a rebuild failed.
    var rideIDs: KeyFilter?
    var replyKeys: KeyFilter?

    /// Opens or creates the store at `path`, upgrading an older schema. Throws, with a message
    /// naming the file: `.unavailable` (directory, unwritable, locked), `.corrupt` (not an
    /// SQLite file, damaged, or someone else's database), `.newerSchema`.
    public init(path: String) throws(StoreError) {
        self.path = path
        db = try SQLiteConnection(path: path)
        do {
            lockFD = try Self.lock(path)
            try configureAndMigrate()
            try buildFilters()
            try startCheckpointer()
            syncer = try SQLiteLogSync(logPath: path + "-wal")
            try db.exec("PRAGMA synchronous = NORMAL")
        } catch {
            syncer?.close()
            checkpointer?.stop()
            db.close()
            if lockFD >= 0 { Glibc.close(lockFD) }
            throw error
        }
    }

    deinit { close() }

    public func close() {
        checkpointer?.stop()
        checkpointer = nil
        syncer?.close()
        syncer = nil
        groupStatements = [:]  // finalized by db.close()
        prefetchedReplies = nil
        prefetchedRides = nil
        rideIDs = nil  // a closed store answers every lookup with its error, not from memory
        replyKeys = nil
        db.close()
        if lockFD >= 0 { Glibc.close(lockFD) }
        lockFD = -1
    }

    /// Checkpoints run by the helper thread so far (tests; the log is checkpointed there).
    var checkpoints: Int { checkpointer?.runs.load(ordering: .relaxed) ?? 0 }
    var log: SQLiteCheckpointer { checkpointer! }

    private func startCheckpointer() throws(StoreError) {
        let helper = try SQLiteCheckpointer(path: path)
        checkpointer = helper
        let writer = db
        // Replaces SQLite's autocheckpoint, which would run inside the worker's COMMIT.
        try db.onCommit { [unowned writer] pages in
            // A failed copy loses nothing (the frames stay in the log); the next commit retries.
            if helper.logGrew(to: pages), (try? writer.checkpoint()) != nil { helper.writerFinished() }
        }
        helper.start()
    }

    public var logSync: @Sendable () throws(StoreError) -> Void {
        guard let syncer else { return { () throws(StoreError) in throw StoreError(.unavailable, "ride store closed") } }
        return { () throws(StoreError) in try syncer.sync() }
    }

    /// One server per file: two would each keep their own rides in memory and diverge
    /// silently. An exclusive flock, held while the store is open and released by the kernel
    /// when the process dies (kill -9 included), so a restart never finds a stale lock.
    private static func lock(_ path: String) throws(StoreError) -> Int32 {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError(.unavailable, "ride store \(path): cannot open to lock it (\(String(cString: strerror(errno))))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            Glibc.close(fd)
            if e == EWOULDBLOCK {
                throw StoreError(.unavailable, "ride store \(path): another RidePush server is using this file; stop it or give this one another --store")
            }
            throw StoreError(.unavailable, "ride store \(path): cannot lock it (\(String(cString: strerror(e))))")
        }
        return fd
    }

    // MARK: writes

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        let results = try commitUnsynced(batch)
        guard let syncer else { throw StoreError(.commitFailed, "ride store \(path): closed before its log was synced") }
        try syncer.sync()
        return results
    }

    public func commitUnsynced(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        prefetchedReplies = nil
        prefetchedRides = nil
        noteKeys(batch)
        try db.run("BEGIN IMMEDIATE")
        var results: [WriteResult] = []
        results.reserveCapacity(batch.count)
        do {
            // Trace checkpoints overwrite one row each and refuse nothing but an unknown ride:
            // written after the journal writes, which keep their grouped statements.
            let journal = batch.filter { if case .trace = $0 { false } else { true } }
            if journal.count == batch.count, let all = try applyAll(batch) { results = all } else {
                var journalResults: [WriteResult] = []
                if let all = try applyAll(journal) { journalResults = all } else { try applyEach(journal, into: &journalResults) }
                var next = journalResults.makeIterator()
                for write in batch {
                    if case .trace(let t) = write {
                        results.append(try writeTrace(t) ? .written : .refused(StoreRules.noRide(t.ride)))
                    } else {
                        results.append(next.next()!)
                    }
                }
            }
        } catch {
            if db.inTransaction { try? db.run("ROLLBACK") }
            throw StoreError(.unavailable, error.message)
        }
        do {
            try db.run("COMMIT")
        } catch {
            // An I/O error at COMMIT (a failed write or fsync of the log): the log may or may
            // not hold it. Only a restart, reading the file, can tell; retrying an fsync that
            // failed would lie (the kernel may have dropped the dirty pages already).
            if db.lastFailureWasIO { throw StoreError(.commitFailed, error.message) }
            // Anything else (SQLITE_FULL: no room for the log's frames, BUSY) leaves no commit
            // record in the log, so nothing was applied, and we know it.
            if db.inTransaction { try? db.run("ROLLBACK") }
            throw StoreError(.unavailable, error.message)
        }
        return results
    }

    /// One write at a time, each seeing the ones before it: the way that names each refusal.
    private func applyEach(_ batch: [StoreWrite], into results: inout [WriteResult]) throws(StoreError) {
        for write in batch {
            if try apply(write) {
                results.append(.written)
            } else {
                // Rare (the server decides from the same state): say exactly why.
                results.append(.refused(try refusal(write) ?? StoreRules.refusedUnexplained(write.rideID)))
            }
        }
    }

    private func refusal(_ write: StoreWrite) throws(StoreError) -> StoreError? {
        switch write {
        case .create(let new, let reply):
            var exists = false
            try db.query("SELECT 1 FROM rides WHERE id = ?", [.text(new.id)]) { (_: SQLRow) throws(StoreError) in exists = true }
            if exists { return StoreRules.rideExists(new.id) }
            return try taken(reply)
        case .append(let entry, let reply):
            var row: (seq: Int64, state: String)?
            try db.query("SELECT last_seq, state FROM rides WHERE id = ?", [.text(entry.ride)]) { (r: SQLRow) throws(StoreError) in
                row = (r.int(0), r.text(1))
            }
            guard let row else { return StoreRules.noRide(entry.ride) }
            guard let state = RideState(rawValue: row.state) else {
                return StoreError(.corrupt, "ride store \(path): ride \(entry.ride) has an unknown state '\(row.state)'")
            }
            if let e = StoreRules.appendRefusal(entry, lastSeq: row.seq, state: state) { return e }
            return try taken(reply)
        case .trace(let t):
            return StoreRules.noRide(t.ride)
        }
    }

    /// Writes all of `write` or nothing of it: three statements, each conditional, instead of
    /// reading the ride and the reply first. False when refused (nothing of it kept).
    private func apply(_ write: StoreWrite) throws(StoreError) -> Bool {
        let reply: ReplyRecord?
        switch write {
        case .create(_, let r): reply = r
        case .append(let e, let r):
            if case .start = e.transition { return false }
            reply = r
        case .trace(let t): return try writeTrace(t)
        }
        if let reply {
            try db.run("INSERT INTO replies (scope, id, bytes, at, request) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                       [.text(reply.key.scope), .text(reply.key.id), .blob(reply.bytes), .int(reply.at), .text(reply.request)])
            if db.changes == 0 { return false }
        }
        var n: Int64?
        let returning = { (r: SQLRow) throws(StoreError) in n = r.int(0) }
        switch write {
        case .create(let new, _):
            try db.query("""
                INSERT INTO rides (id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                VALUES (?, ?, ?, ?, ?, NULL, 1, 'riding') ON CONFLICT DO NOTHING RETURNING n
                """, [.text(new.id), .text(new.planID), .text(new.owner), .int(new.limit), .int(new.startedAt)], row: returning)
            guard let n else { return try undo(reply) }
            try insert(.start(at: new.startedAt), ride: n, seq: 1)
        case .append(let entry, _):
            // Only as exactly the next entry, and only from a state that allows it
            // (StoreRules.appendRefusal says the same, for the refusal's message).
            let state = SQLValue.text(StoreRules.state(after: entry.transition).rawValue)
            let id = SQLValue.text(entry.ride), previous = SQLValue.int(entry.seq - 1)
            switch entry.transition {
            case .start: return false
            case .pause:
                try db.query("UPDATE rides SET last_seq = ?, state = ? WHERE id = ? AND last_seq = ? AND state = 'riding' RETURNING n",
                             [.int(entry.seq), state, id, previous], row: returning)
            case .resume:
                try db.query("UPDATE rides SET last_seq = ?, state = ? WHERE id = ? AND last_seq = ? AND state = 'paused' RETURNING n",
                             [.int(entry.seq), state, id, previous], row: returning)
            case .end(let at, _, _):
                try db.query("UPDATE rides SET last_seq = ?, state = ?, ended_at = ? WHERE id = ? AND last_seq = ? AND state <> 'ended' RETURNING n",
                             [.int(entry.seq), state, .int(at), id, previous], row: returning)
            }
            guard let n else { return try undo(reply) }
            try insert(entry.transition, ride: n, seq: entry.seq)
        case .trace:
            return false
        }
        try insertOutbox(write.outbox)
        return true
    }

    /// Takes back the reply a refused write had recorded first (it was new: the insert took).
    private func undo(_ reply: ReplyRecord?) throws(StoreError) -> Bool {
        if let reply {
            try db.run("DELETE FROM replies WHERE scope = ? AND id = ?", [.text(reply.key.scope), .text(reply.key.id)])
        }
        return false
    }

    private func taken(_ reply: ReplyRecord?) throws(StoreError) -> StoreError? {
        guard let reply else { return nil }
        var exists = false
        try db.query("SELECT 1 FROM replies WHERE scope = ? AND id = ?", [.text(reply.key.scope), .text(reply.key.id)]) {
            (_: SQLRow) throws(StoreError) in exists = true
        }
        // The server should have answered from `reply(for:)` instead of applying again;
        // refusing here keeps "applied once" true.
        return exists ? StoreRules.replyTaken(reply) : nil
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        prefetchedReplies = nil
        try transaction { () throws(StoreError) in
            // The oldest replies in the order recorded, up to the first not older than
            // `instant`: found by walking from the first row (no index on `at`, schema 6),
            // reading only the rows deleted and one more. A reply recorded after a clock stepped
            // back stays until the replies before it are old enough (kept longer, never less).
            try db.run("""
                DELETE FROM replies WHERE n < COALESCE(
                    (SELECT n FROM replies WHERE at >= ? ORDER BY n LIMIT 1),
                    (SELECT MAX(n) + 1 FROM replies))
                """, [.int(instant)])
        }
    }

    // MARK: reads (single statements: each sees one consistent snapshot)

    public func openRides() throws(StoreError) -> [StoredRide] {
        // INDEXED BY: without statistics SQLite would scan every ride ever recorded; the
        // partial index holds only the open ones, so recovery time follows open rides only.
        try loadRides("""
            SELECT r.id, r.plan_id, r.owner, r.time_limit, t.kind, t.at, t.reason, t.metres
            FROM rides r INDEXED BY rides_open LEFT JOIN transitions t ON t.ride = r.n
            WHERE r.ended_at IS NULL
            ORDER BY r.id, t.seq
            """, [])
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        if let cached = prefetchedRides?[id] { return cached }
        guard mayHold(rideID: id) else { return nil }
        return try load(id)
    }

    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] {
        // The page's ids first (through rides_started / rides_ended, so a page reads `limit`
        // index entries, not every ride), then their journals.
        let select = "SELECT r.id, r.plan_id, r.owner, r.time_limit, t.kind, t.at, t.reason, t.metres FROM ("
        let join = ") p JOIN rides r ON r.id = p.id LEFT JOIN transitions t ON t.ride = r.n"
        let n = SQLValue.int(Int64(max(0, limit)))
        // A rider's page walks the same index and skips other riders' rows.
        let (riderBinds, riderCond): ([SQLValue], String) = rider.map { ([.text($0)], " AND owner = ?") } ?? ([], "")
        switch page {
        case .byStart(let after):
            let (binds, cond): ([SQLValue], String) = after.map { ([.int($0.at), .text($0.id)], "(started_at, id) > (?, ?)") } ?? ([], "1")
            return try loadRides(select + "SELECT id, started_at AS k FROM rides WHERE \(cond)\(riderCond) ORDER BY started_at, id LIMIT ?"
                                 + join + " ORDER BY p.k, p.id, t.seq", binds + riderBinds + [n])
        case .ended(let before):
            let (binds, cond): ([SQLValue], String) = before.map { ([.int($0.at), .text($0.id)], "AND (ended_at, id) < (?, ?)") } ?? ([], "")
            return try loadRides(select + "SELECT id, ended_at AS k FROM rides WHERE ended_at IS NOT NULL \(cond)\(riderCond) ORDER BY ended_at DESC, id DESC LIMIT ?"
                                 + join + " ORDER BY p.k DESC, p.id DESC, t.seq", binds + riderBinds + [n])
        }
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? {
        if let cached = prefetchedReplies?[key] { return cached }
        guard mayHold(replyKey: key) else { return nil }
        var out: StoredReply?
        try db.query("SELECT bytes, request FROM replies WHERE scope = ? AND id = ?", [.text(key.scope), .text(key.id)]) {
            (r: SQLRow) throws(StoreError) in out = StoredReply(request: r.optionalText(1), bytes: r.blob(0))
        }
        return out
    }

    // MARK: key filters

    /// False only for a ride id the file certainly lacks (never written); true without a filter.
    func mayHold(rideID id: String) -> Bool {
        rideIDs?.mayContain(KeyFilter.hash(id)) ?? true
    }

    /// False only for a reply key the file certainly lacks (never written); true without a filter.
    func mayHold(replyKey key: ReplyKey) -> Bool {
        replyKeys?.mayContain(KeyFilter.hash(key.scope, key.id)) ?? true
    }

    private func buildFilters() throws(StoreError) {
        rideIDs = try filter("SELECT id FROM rides") { KeyFilter.hash($0.text(0)) }
        replyKeys = try filter("SELECT scope, id FROM replies") { KeyFilter.hash($0.text(0), $0.text(1)) }
    }

    /// A filter of every key `sql` lists, with room for as many again before its rebuild.
    private func filter(_ sql: String, _ hash: (SQLRow) -> UInt64) throws(StoreError) -> KeyFilter {
        var hashes: [UInt64] = []
        try db.query(sql) { (r: SQLRow) throws(StoreError) in hashes.append(hash(r)) }
        var f = KeyFilter(capacity: 2 * hashes.count)
        for h in hashes { f.insert(h) }
        return f
    }

    /// Adds the keys `batch` writes, before any of it is written; first rebuilds a filter that
    /// is past its capacity from the committed file (so sized by the rows there now, which
    /// pruning keeps bounded; a scan of two covering indexes, made rare by the doubling).
    private func noteKeys(_ batch: [StoreWrite]) {
        if rideIDs?.needsRebuild == true || replyKeys?.needsRebuild == true {
            do throws(StoreError) { try buildFilters() } catch {
                rideIDs = nil  // every lookup reads the table again: slower, still exact
                replyKeys = nil
            }
        }
        for write in batch {
            let reply: ReplyRecord?
            switch write {
            case .create(let new, let r):
                rideIDs?.insert(KeyFilter.hash(new.id))
                reply = r
            case .append(_, let r):
                reply = r
            case .trace:
                reply = nil
            }
            if let reply { replyKeys?.insert(KeyFilter.hash(reply.key.scope, reply.key.id)) }
        }
    }

    // MARK: private

    private func load(_ id: String) throws(StoreError) -> StoredRide? {
        try loadRides("""
            SELECT r.id, r.plan_id, r.owner, r.time_limit, t.kind, t.at, t.reason, t.metres
            FROM rides r LEFT JOIN transitions t ON t.ride = r.n
            WHERE r.id = ?
            ORDER BY t.seq
            """, [.text(id)]).first
    }

    private func loadRides(_ sql: String, _ binds: [SQLValue]) throws(StoreError) -> [StoredRide] {
        try loadRides { (row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) in try db.query(sql, binds, row: row) }
    }

    /// Groups rows of (ride columns, one transition) into rides, replaying each journal;
    /// `run` runs the statements, handing each row on, rows of one ride together in seq order.
    func loadRides(_ run: ((SQLRow) throws(StoreError) -> Void) throws(StoreError) -> Void) throws(StoreError) -> [StoredRide] {
        var out: [StoredRide] = []
        var meta: (id: String, plan: String, owner: String?, limit: Int64?)?
        var journal: [RideTransition] = []
        func flush() throws(StoreError) {
            guard let m = meta else { return }
            guard let stored = StoredRide(id: m.id, planID: m.plan, owner: m.owner, limit: m.limit, journal: journal) else {
                throw StoreError(.corrupt, "ride store \(path): the journal of ride \(m.id) does not replay (\(journal.map(\.kind).joined(separator: ", ")))")
            }
            out.append(stored)
        }
        try run { (r: SQLRow) throws(StoreError) in
            let id = r.text(0)
            if meta?.id != id {
                try flush()
                meta = (id, r.text(1), r.optionalText(2), r.optionalInt(3))
                journal = []
            }
            if !r.isNull(4) { journal.append(try decode(r, ride: id)) }
        }
        try flush()
        return out
    }

    private func decode(_ r: SQLRow, ride id: String) throws(StoreError) -> RideTransition {
        let at = r.int(5)
        switch r.text(4) {
        case "start": return .start(at: at)
        case "pause": return .pause(at: at)
        case "resume": return .resume(at: at)
        case "end":
            guard let raw = r.optionalText(6), let reason = EndReason(rawValue: raw), let metres = r.optionalInt(7) else {
                throw StoreError(.corrupt, "ride store \(path): ride \(id) has an end without a valid reason and metres")
            }
            return .end(at: at, reason: reason, metres: metres)
        case let other:
            throw StoreError(.corrupt, "ride store \(path): ride \(id) has an unknown transition '\(other)'")
        }
    }

    private func insert(_ t: RideTransition, ride n: Int64, seq: Int64) throws(StoreError) {
        var reason: String?
        var metres: Int64?
        if case .end(_, let r, let m) = t { (reason, metres) = (r.rawValue, m) }
        try db.run("INSERT INTO transitions (ride, seq, kind, at, reason, metres) VALUES (?, ?, ?, ?, ?, ?)",
                   [.int(n), .int(seq), .text(t.kind), .int(t.at), .text(reason), .int(metres)])
    }

    /// One call = one write transaction. IMMEDIATE takes the write lock up front, so a
    /// second process on the file fails fast at BEGIN (after busy_timeout), never halfway.
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try db.run("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try db.run("COMMIT")
            return value
        } catch {
            // SQLite may already have rolled back (e.g. after some I/O errors); a ROLLBACK
            // then would only fail, so issue it only while a transaction is still open.
            if db.inTransaction { try? db.run("ROLLBACK") }
            throw error
        }
    }

    private func configureAndMigrate() throws(StoreError) {
        // Wait a little for a lock held by another process (an inspecting sqlite3 shell, a
        // checkpoint) instead of failing at once; short, because the caller is the server's
        // only service thread and everything else waits behind it.
        try db.exec("PRAGMA busy_timeout = 1000")
        // SQLite's default 2 MiB page cache is smaller than the B-tree pages a busy store
        // touches, so every group would re-read pages it had just written (a pread each). Not
        // much more than needed, though: at the end of every write transaction SQLite 3.40 walks
        // the cache's whole hash table (pcache1TruncateUnsafe), and at 64 MiB that walk is
        // 8 % of the store worker's CPU (16 MiB: 73-86 against 79-90 us per transition,
        // reads per transition 0.7-1.0 either way).
        try db.exec("PRAGMA cache_size = -16384")

        // Read before changing anything: this is where a non-SQLite file ("file is not a
        // database") or a damaged header fails, and a newer file is refused untouched.
        var tables: Set<String> = []
        try db.query("SELECT name FROM sqlite_master WHERE type = 'table'") { (r: SQLRow) throws(StoreError) in
            tables.insert(r.text(0))
        }
        if !tables.isEmpty && !tables.contains("schema_version") {
            throw StoreError(.corrupt, "ride store \(path): an SQLite database but not a RidePush store (no schema_version table; has \(tables.sorted().joined(separator: ", ")))")
        }
        try refuseNewer(try version())
        // A new file gives back what a purge frees (schema 9): set before its first table,
        // when it takes effect without a VACUUM.
        if tables.isEmpty { try db.exec("PRAGMA auto_vacuum = INCREMENTAL") }

        // WAL: a commit appends to the log instead of rewriting pages, so one fsync per
        // transition; readers never block the writer.
        let mode = try db.scalarText("PRAGMA journal_mode = WAL")
        if mode?.lowercased() != "wal" {
            throw StoreError(.unavailable, "ride store \(path): cannot switch to WAL mode (got \(mode ?? "nothing"))")
        }
        // FULL, not NORMAL: in WAL mode NORMAL skips the fsync at commit (it syncs only at
        // checkpoints), so a power cut or kernel crash could drop transitions the rider was
        // already told about. A ride is money: the reply waits for the fsync.
        try db.exec("PRAGMA synchronous = FULL")
        try db.exec("PRAGMA foreign_keys = ON")

        for step in Schema.migrations {
            try transaction { () throws(StoreError) in
                // Re-read inside the write lock: another process may have upgraded meanwhile.
                let v = try version()
                try refuseNewer(v)
                guard v < step.version else { return }
                try db.exec(step.sql)
                try db.run("INSERT INTO schema_version (version, applied_at) VALUES (?, CAST(strftime('%s', 'now') AS INTEGER))",
                           [.int(step.version)])
            }
        }
        try vacuumIntoIncremental()
    }

    /// The least room left on the file's filesystem for the store to count as able to write:
    /// a read alone succeeds on a full disk, which is how a store most often fails.
    var probeRoomBytes: UInt64 = 256 * 1024

    /// A read of the file (its schema version) and room on its filesystem to write a group.
    public func probe() throws(StoreError) {
        _ = try version()
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else {
            throw StoreError(.unavailable, "ride store \(path): cannot read its filesystem's free space (\(String(cString: strerror(errno))))")
        }
        let room = UInt64(fs.f_bavail) * UInt64(fs.f_frsize)
        guard room >= probeRoomBytes else {
            throw StoreError(.unavailable, "ride store \(path): \(room) bytes free on its filesystem, less than \(probeRoomBytes)")
        }
    }

    /// The file's schema version: 0 for a new (empty) file.
    private func version() throws(StoreError) -> Int64 {
        var hasTable = false
        try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'") {
            (_: SQLRow) throws(StoreError) in hasTable = true
        }
        guard hasTable else { return 0 }
        var v: Int64 = 0
        try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_version") { (r: SQLRow) throws(StoreError) in v = r.int(0) }
        return v
    }

    private func refuseNewer(_ v: Int64) throws(StoreError) {
        if v > Schema.current {
            throw StoreError(.newerSchema, "ride store \(path): schema version \(v) is newer than this RidePush supports (version \(Schema.current)); upgrade RidePush or use another file")
        }
    }
}
