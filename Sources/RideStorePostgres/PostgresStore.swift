import Foundation
import Glibc
import Synchronization
import RideCore
import RideStore

/// The ride store on PostgreSQL, shared by every node of a fleet. Same contract as
/// `SQLiteStore` (same refusals, `StoreRules`); an append is checked against the ride's row
/// under its lock, so when two nodes append the same seq to one ride exactly one commits,
/// and every written entry notifies the other nodes in the same transaction.
///
/// Not `Sendable`, like the other stores: one owner thread. A lost connection is reopened on
/// the next call, at most once per backoff interval (250 ms doubling to 5 s), so calls made
/// while PostgreSQL is down fail at once with `.unavailable` instead of each waiting for a
/// connect timeout. The backoff runs on an injected clock (tests advance it by hand).
public final class PostgresStore: RideStore {
    public let settings: PostgresSettings
    /// "ride store postgresql://user:***@host/db": what every message names.
    public let label: String
    private var conn: PostgresConnection?
    private var closed = false
    private let clock: any RideClock
    private var backoffMillis: Int64 = 0
    private var retryAt: UnixMillis
    /// The server process of the current connection (a node ignores its own NOTIFYs).
    public let ownBackend = BackendID()
    /// Whether the last call reached PostgreSQL.
    public let health: ConnectionHealth
    /// Groups whose COMMIT lost its connection, and how each was settled (tests, /metrics).
    public let settles = SettleCounts()
    /// Replies read ahead for the group being decided (nil value: known not recorded).
    private var prefetched: [ReplyKey: StoredReply?]?
    private var prefetchedRides: [String: StoredRide?]?
    /// Trace checkpoints read ahead for the group (nil value: the ride has none).
    var prefetchedTraces: [String: TraceCheckpoint?]?
    #if DEBUG
    /// Tests hold a transaction open here (its row locks taken) to race another node.
    var beforeCommit: (() -> Void)?
    #endif

    /// Connects, then creates or upgrades the schema. Throws `.unavailable` (cannot
    /// connect or authenticate: the message has libpq's words), `.newerSchema`, `.corrupt`
    /// (a `ridepush` schema that is not RidePush's).
    public init(_ settings: PostgresSettings, clock: any RideClock = MonotonicMillisClock()) throws(StoreError) {
        self.settings = settings
        self.clock = clock
        retryAt = clock.now()
        health = ConnectionHealth(downWord: settings.hostCount > 1 ? "failing over" : "unreachable")
        label = "ride store \(settings.redacted)"
        let c = try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresConnection(settings) }
        try PostgresJournal.migrate(c, label: label)
        conn = c
        ownBackend.set(c.backendPID)
    }

    public func close() {
        closed = true
        conn?.close()
        conn = nil
    }

    /// Whether the connection is open now (owner thread only; other threads read `health`).
    public var isConnected: Bool { conn?.isOpen ?? false }

    // MARK: writes

    /// One transaction for the batch: lock the rides it appends to (in id order), check each
    /// write against the locked rows as the batch goes (a write sees the ones before it),
    /// write it in one statement with its reply and its NOTIFY, COMMIT. synchronous_commit is
    /// on, so COMMIT returns once PostgreSQL has the WAL on disk.
    ///
    /// A connection lost at COMMIT leaves the outcome unknown. Unlike an fsync error in a
    /// local file, that is not a reason to stop: PostgreSQL itself decides durability (and
    /// stops itself on an fsync failure), and the answer can be read back. `settle` reads it
    /// back on whichever server is the primary now (the same one, or a promoted standby) and
    /// returns the group's results when it did commit, or `.unavailable` when it did not.
    /// Only when no primary answers within `settleTimeoutMillis` does it stay unknown: then
    /// `.unavailable` too (nobody is told anything); if it did commit, the node's catch-up
    /// read applies the entries and a retry with the same request id gets the recorded reply,
    /// so it is still applied once.
    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        if batch.isEmpty {
            _ = try connection()
            return []
        }
        prefetched = nil  // the group has been decided; later reads go to PostgreSQL
        prefetchedRides = nil
        prefetchedTraces = nil
        if let results = try oneRoundTrip(batch) { return results }
        if let results = try pipelined(batch) { return results }
        return try transaction(settle: { (results, lost, on) throws(StoreError) in try self.settle(batch, results, lost: lost, on: on) }) {
            (c: PostgresConnection) throws(PostgresError) -> [WriteResult] in
            var rows = try PostgresJournal.lockRides(c, batch.map(\.rideID), label: label)
            var results: [WriteResult] = []
            results.reserveCapacity(batch.count)
            for write in batch {
                switch write {
                case .create(let new, let reply):
                    if rows[new.id] != nil {
                        results.append(.refused(StoreRules.rideExists(new.id)))
                        continue
                    }
                    switch try PostgresJournal.create(c, new, reply: reply) {
                    case .written:
                        try PostgresJournal.insertOutbox(c, new.outbox)
                        rows[new.id] = PostgresJournal.RideRow(lastSeq: 1, state: .riding)
                        results.append(.written)
                    case .idExists, .stale:
                        results.append(.refused(StoreRules.rideExists(new.id)))
                    case .replyExists, .replyExistsRowInserted:
                        results.append(.refused(StoreRules.replyTaken(reply)))
                    }
                case .append(let entry, let reply):
                    guard let row = rows[entry.ride] else {
                        results.append(.refused(StoreRules.noRide(entry.ride)))
                        continue
                    }
                    if let e = StoreRules.appendRefusal(entry, lastSeq: row.lastSeq, state: row.state) {
                        results.append(.refused(e))
                        continue
                    }
                    switch try PostgresJournal.append(c, entry, reply: reply) {
                    case .written:
                        try PostgresJournal.insertOutbox(c, entry.outbox)
                        rows[entry.ride] = PostgresJournal.RideRow(lastSeq: entry.seq, state: StoreRules.state(after: entry.transition))
                        results.append(.written)
                    case .replyExists, .idExists, .replyExistsRowInserted:
                        results.append(.refused(StoreRules.replyTaken(reply)))
                    case .stale:
                        results.append(.refused(StoreRules.notNext(entry, last: nil)))
                    }
                case .trace(let t):
                    guard rows[t.ride] != nil, try PostgresJournal.writeTrace(c, t) == .written else {
                        results.append(.refused(StoreRules.noRide(t.ride)))
                        continue
                    }
                    results.append(.written)
                }
            }
            return results
        }
    }

    /// The usual case in one round trip whatever the group's size: `BEGIN`, the lock (in id
    /// order, as below, so two nodes' groups cannot deadlock), every write as a strict
    /// statement (one that did not go in fails), the outbox, one NOTIFY, `COMMIT`, all sent
    /// in pipeline mode. The writes were decided from the node's book; its checks are not
    /// repeated in Swift because each strict write checks in SQL that the ride's row is where
    /// the write expects it (seq − 1, so the same history) and that its reply key is free.
    /// Returns nil, rolled back, when PostgreSQL refused any of it: `pipelined` then checks
    /// every write against the locked rows and words each refusal.
    private func oneRoundTrip(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult]? {
        let c = try connection()
        // enable_seqscan off for this transaction only: the group statement's UPDATE joins
        // the rides table to the group's arrays, and while the table is small the planner
        // prefers a hash join over a scan of every ride (1–2 ms and growing with the table)
        // to one index probe per ride.
        var statements: [(sql: String, params: [PGValue])] = [("BEGIN", []), ("SET LOCAL enable_seqscan = off", []),
                                                              PostgresJournal.lockStatement(batch.map(\.rideID))!]
        var hints: [(ride: String, seq: Int64)] = []
        hints.reserveCapacity(batch.count)
        // Every create and append in one statement when no ride has two of them here;
        // else one statement each, in order.
        let group = PostgresJournal.groupStatement(batch)
        if let group { statements.append(group) }
        for write in batch {
            switch write {
            case .create(let new, let reply):
                if group == nil { statements.append(PostgresJournal.createStatement(new, reply: reply, strict: true)) }
                hints.append((new.id, 1))
            case .append(let entry, let reply):
                if group == nil { statements.append(PostgresJournal.appendStatement(entry, reply: reply, strict: true)) }
                hints.append((entry.ride, entry.seq))
            case .trace(let t):
                statements.append(PostgresJournal.traceStatement(t, strict: true))
            }
        }
        if let o = PostgresJournal.outboxStatement(batch.flatMap(\.outbox)) { statements.append(o) }
        statements += PostgresJournal.notifyStatements(hints)
        var holdCommit = false
        #if DEBUG
        holdCommit = beforeCommit != nil  // tests hold the locks before COMMIT
        #endif
        statements.append(("SET LOCAL statement_timeout = 0", []))  // see noCommitTimeout
        if !holdCommit { statements.append(("COMMIT", [])) }
        do throws(PostgresError) {
            _ = try c.pipeline(statements)
            #if DEBUG
            if holdCommit {
                beforeCommit?()
                try c.query("\(Self.noCommitTimeout) COMMIT")
            }
            #endif
            return Array(repeating: .written, count: batch.count)
        } catch {
            guard c.isOpen else {
                health.down(error.message)
                // The COMMIT went out in the pipeline (or was about to): whether it was
                // applied is known only to the server.
                if error.kind == .lost || error.kind == .timeout {
                    return try settle(batch, Array(repeating: .written, count: batch.count), lost: error, on: c.identity)
                }
                throw StoreError(postgres: error, label: label)
            }
            _ = try? c.query("ROLLBACK")
            // A write PostgreSQL refused (or a deadlock): nothing of the group applied.
            if error.kind == .server { return nil }
            throw StoreError(postgres: error, label: label)
        }
    }

    /// The checked path, in three round trips whatever the batch's size: `BEGIN` + the lock,
    /// every write (checked in Swift against the locked rows as the batch goes, then sent
    /// together in pipeline mode), `COMMIT`. Returns nil, after rolling back, when a write
    /// checked as fine was still refused by PostgreSQL (a reply key or a ride id another node
    /// took concurrently, and so anything after it that relied on it): the write-by-write path
    /// then redoes the batch and words each refusal exactly.
    private func pipelined(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult]? {
        var attempt = 0
        var lostAtCommit: (error: PostgresError, results: [WriteResult], on: PostgresConnection.Identity)?
        while true {
            let c = try connection()
            do throws(PostgresError) {
                let lock = PostgresJournal.lockStatement(batch.map(\.rideID))!
                var rows = try PostgresJournal.lockedRows(try c.pipeline([("BEGIN", []), lock])[1])
                var results: [WriteResult?] = []
                var statements: [(sql: String, params: [PGValue])] = []
                for write in batch {
                    switch write {
                    case .create(let new, let reply):
                        if rows[new.id] != nil {
                            results.append(.refused(StoreRules.rideExists(new.id)))
                            continue
                        }
                        rows[new.id] = PostgresJournal.RideRow(lastSeq: 1, state: .riding)
                        statements.append(PostgresJournal.createStatement(new, reply: reply))
                    case .append(let entry, let reply):
                        guard let row = rows[entry.ride] else {
                            results.append(.refused(StoreRules.noRide(entry.ride)))
                            continue
                        }
                        if let e = StoreRules.appendRefusal(entry, lastSeq: row.lastSeq, state: row.state) {
                            results.append(.refused(e))
                            continue
                        }
                        rows[entry.ride] = PostgresJournal.RideRow(lastSeq: entry.seq, state: StoreRules.state(after: entry.transition))
                        statements.append(PostgresJournal.appendStatement(entry, reply: reply))
                    case .trace(let t):
                        guard rows[t.ride] != nil else {
                            results.append(.refused(StoreRules.noRide(t.ride)))
                            continue
                        }
                        statements.append(PostgresJournal.traceStatement(t))
                    }
                    results.append(nil)
                }
                // Only the writes checked as fine carry their events; a refusal found by
                // PostgreSQL below rolls the whole transaction back, events included.
                let events = batch.indices.filter { results[$0] == nil }.flatMap { batch[$0].outbox }
                if !statements.isEmpty {
                    let out = try c.pipeline(statements + (PostgresJournal.outboxStatement(events).map { [$0] } ?? []))
                    var k = 0
                    for (i, write) in batch.enumerated() where results[i] == nil {
                        let outcome: PostgresJournal.Outcome
                        switch write {
                        case .create(_, let reply): outcome = PostgresJournal.createOutcome(out[k], reply: reply)
                        case .append(_, let reply): outcome = PostgresJournal.appendOutcome(out[k], reply: reply)
                        case .trace: outcome = PostgresJournal.traceOutcome(out[k])
                        }
                        k += 1
                        guard outcome == .written else {
                            try c.query("ROLLBACK")
                            return nil
                        }
                        results[i] = .written
                    }
                }
                #if DEBUG
                beforeCommit?()
                #endif
                let decided = results.map { $0! }
                do throws(PostgresError) {
                    try c.query("\(Self.noCommitTimeout) COMMIT")
                } catch {
                    // COMMIT sent and its answer lost: settled after this loop, by reading.
                    guard !c.isOpen, error.kind == .lost || error.kind == .timeout else { throw error }
                    health.down(error.message)
                    lostAtCommit = (error, decided, c.identity)
                    break
                }
                return decided
            } catch {
                if c.isOpen { _ = try? c.query("ROLLBACK") } else { health.down(error.message) }
                attempt += 1
                if error.kind == .server, error.sqlState == "40P01" || error.sqlState == "40001", attempt < 3 { continue }
                throw StoreError(postgres: error, label: label)
            }
        }
        guard let lost = lostAtCommit else { return nil }
        return try settle(batch, lost.results, lost: lost.error, on: lost.on)
    }

    // MARK: a COMMIT whose answer was lost

    /// Decides whether a group whose connection broke after its COMMIT was sent committed,
    /// by reading on whichever server is the primary now; never by assuming either way.
    ///
    /// - Reconnects (the multi-host URI with `target_session_attrs=read-write` finds the
    ///   primary, a promoted standby included), every 250 ms until `settleTimeoutMillis`.
    /// - On the same server (same postmaster): the old session may still be finishing its
    ///   COMMIT (waiting for the synchronous standby, say), and until it ends its writes are
    ///   invisible, neither there nor surely gone. So it is ended (`pg_terminate_backend`,
    ///   matched by PID and `backend_start`, never another session) and waited for.
    /// - On another server (a promoted standby, or a restarted one) nothing of the old session
    ///   is running: its transaction is there, committed, or it never will be.
    /// - Then it looks for the group's writes: every journal entry (ride, seq, kind, instant)
    ///   and every recorded reply (key, instant, the exact bytes). The transaction was one
    ///   unit, so all found = committed (or, for an auto-end, another node wrote the very same
    ///   entry, which is the same truth to publish); anything missing = not committed.
    ///
    /// Returns `results` when committed; throws `.unavailable` when not (nothing applied, the
    /// client retries with the same id) or when no primary answered in time (still unknown:
    /// no one is told; the catch-up read and the reply table settle it later).
    func settle(_ batch: [StoreWrite], _ results: [WriteResult], lost: PostgresError,
                on old: PostgresConnection.Identity) throws(StoreError) -> [WriteResult] {
        conn = nil
        ownBackend.set(0)
        let written = batch.indices.filter { results[$0] == .written }.map { batch[$0] }
        guard let check = Self.settleStatement(written) else {
            settles.unknown.add(1, ordering: .relaxed)
            throw StoreError(.unavailable, "\(label): connection lost at COMMIT (\(lost.message)); a group without entries or replies cannot be read back")
        }
        let deadline = ContinuousClock.now + .milliseconds(settings.settleTimeoutMillis)
        var why = lost.message
        while !closed && ContinuousClock.now < deadline {
            var found: Int64 = 0
            var sameServer = false
            do throws(PostgresError) {
                let c = try PostgresConnection(settings)
                conn = c
                ownBackend.set(c.backendPID)
                backoffMillis = 0
                sameServer = c.identity.server == old.server
                if sameServer && old.pid != 0 {
                    try waitForSessionEnd(c, old, until: deadline)
                }
                let r = try c.query(check.sql, check.params)
                found = (r.int(0, 0) ?? 0) + (r.int(0, 1) ?? 0)
                if found == check.expected {
                    // Found on this primary, but perhaps only here: an old session ended
                    // while it waited for the synchronous standby has committed locally
                    // and nowhere else. A commit of our own returning after it means its WAL
                    // is wherever an acknowledged commit's is (synchronous_commit = on). It must
                    // write WAL (a transaction that writes none does not wait for the standby):
                    // an update of one of the group's rides to what it is.
                    let left = ContinuousClock.now.duration(to: deadline)
                    try c.query("BEGIN")
                    try c.query("UPDATE ridepush.rides SET last_seq = last_seq WHERE id = $1::text", [.text(check.ride)])
                    try c.query("\(Self.noCommitTimeout) COMMIT", timeoutMillis: max(1_000, Int(left.components.seconds) * 1_000))
                }
                health.up()
            } catch {
                why = error.message
                conn?.close()
                conn = nil
                ownBackend.set(0)
                health.down(error.message)
                Thread.sleep(forTimeInterval: 0.25)
                continue
            }
            if found == check.expected {
                settles.committed.add(1, ordering: .relaxed)
                return results
            }
            settles.notCommitted.add(1, ordering: .relaxed)
            throw StoreError(.unavailable, "\(label): connection lost at COMMIT (\(lost.message)); read back on \(sameServer ? "the same server" : "the new primary"): not committed (\(found) of \(check.expected) writes found), nothing applied")
        }
        settles.unknown.add(1, ordering: .relaxed)
        // No backoff added: settling has waited already, so the next call tries at once.
        throw StoreError(.unavailable, "\(label): connection lost at COMMIT (\(lost.message)) and no primary answered within \(settings.settleTimeoutMillis) ms to read it back (\(why)); outcome unknown, nothing told")
    }

    /// Ends the session `old` on this same server if it is still there and waits until it has
    /// gone, so its transaction is decided (committed or rolled back) before it is looked for.
    private func waitForSessionEnd(_ c: PostgresConnection, _ old: PostgresConnection.Identity,
                                   until deadline: ContinuousClock.Instant) throws(PostgresError) {
        let match = "pid = $1::integer AND backend_start::text = $2::text"
        _ = try c.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE \(match)",
                        [.int(Int64(old.pid)), .text(old.backendStart)])
        while true {
            let r = try c.query("SELECT count(*) FROM pg_stat_activity WHERE \(match)", [.int(Int64(old.pid)), .text(old.backendStart)])
            if (r.int(0, 0) ?? 0) == 0 { return }
            if ContinuousClock.now >= deadline { throw PostgresError(.timeout, "the session that sent COMMIT (pid \(old.pid)) has not ended") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Sent just before every COMMIT of a write: the session's statement_timeout must not
    /// reach the COMMIT, because a COMMIT cancelled while it waits for the synchronous
    /// standby returns success with only a WARNING ("committed locally, but might not have
    /// been replicated"), and the group would be acknowledged with its WAL on the primary
    /// alone. Without it the client-side deadline ends the wait, and `settle` decides.
    static let noCommitTimeout = "SET LOCAL statement_timeout = 0;"

    /// One statement counting the group's journal entries and replies that are in the store
    /// exactly as the group wrote them; nil when the group wrote neither (traces only).
    static func settleStatement(_ writes: [StoreWrite]) -> (sql: String, params: [PGValue], expected: Int64, ride: String)? {
        var rides: [String] = [], seqs: [String] = [], kinds: [String] = [], ats: [String] = []
        var scopes: [String] = [], ids: [String] = [], replyAts: [String] = [], bytes: [String] = []
        func reply(_ r: ReplyRecord?) {
            guard let r else { return }
            scopes.append(hex(r.key.scope)); ids.append(hex(r.key.id)); replyAts.append(String(r.at)); bytes.append(Hex.lower(r.bytes))
        }
        for w in writes {
            switch w {
            case .create(let new, let r):
                rides.append(new.id); seqs.append("1"); kinds.append("start"); ats.append(String(new.startedAt))
                reply(r)
            case .append(let e, let r):
                rides.append(e.ride); seqs.append(String(e.seq)); kinds.append(e.transition.kind); ats.append(String(e.transition.at))
                reply(r)
            case .trace:
                continue
            }
        }
        guard let first = rides.first else { return nil }  // every reply belongs to an entry
        let a = PostgresJournal.arrayLiteral
        return ("""
            SELECT (SELECT count(*) FROM unnest($1::text[], $2::text[]::bigint[], $3::text[], $4::text[]::bigint[]) AS w(ride, seq, kind, at)
                    JOIN ridepush.journal j ON j.ride_id = w.ride AND j.seq = w.seq AND j.kind = w.kind AND j.at = w.at),
                   (SELECT count(*) FROM unnest($5::text[], $6::text[], $7::text[]::bigint[], $8::text[]) AS k(s, i, at, b)
                    JOIN ridepush.replies r ON r.scope = decode(k.s, 'hex') AND r.id = decode(k.i, 'hex') AND r.at = k.at
                                          AND r.bytes = decode(k.b, 'hex'))
            """, [.text(a(rides)), .text(a(seqs)), .text(a(kinds)), .text(a(ats)),
                  .text(a(scopes)), .text(a(ids)), .text(a(replyAts)), .text(a(bytes))], Int64(rides.count + scopes.count), first)
    }

    // MARK: exactly-once replies read ahead

    /// Reads the recorded replies of a whole group's request ids in one round trip, so the
    /// decisions that follow need none each; `reply(for:)` answers those keys from it until
    /// the group commits.
    public func prefetchReplies(_ keys: [ReplyKey]) {
        prefetched = nil
        guard !keys.isEmpty, let c = try? connection() else { return }
        let st = repliesStatement(keys)
        guard let r = try? c.query(st.sql, st.params) else { return }
        prefetched = repliesCache(keys, r)
    }

    private static func hex(_ s: String) -> String { Hex.lower(s.utf8) }

    private func repliesStatement(_ keys: [ReplyKey]) -> (sql: String, params: [PGValue]) {
        let scopes = PostgresJournal.arrayLiteral(keys.map { Self.hex($0.scope) })
        let ids = PostgresJournal.arrayLiteral(keys.map { Self.hex($0.id) })
        // One index probe per key (OFFSET 0: not flattened into a hash join over a scan of
        // every reply, as the plain join was planned while the table was small).
        return ("""
            SELECT encode(r.scope, 'hex'), encode(r.id, 'hex'), r.request, r.bytes FROM unnest($1::text[], $2::text[]) AS k(s, i)
            CROSS JOIN LATERAL (SELECT * FROM ridepush.replies WHERE scope = decode(k.s, 'hex') AND id = decode(k.i, 'hex') OFFSET 0) r
            """, [.text(scopes), .text(ids)])
    }

    /// Every key of `keys` → its recorded reply or none; nil if a row is unreadable.
    private func repliesCache(_ keys: [ReplyKey], _ r: PGResult) -> [ReplyKey: StoredReply?]? {
        var found: [String: StoredReply] = [:]
        for i in 0..<r.count {
            guard let bytes = r.bytes(i, 3) else { return nil }
            found[r.text(i, 0) + ":" + r.text(i, 1)] = StoredReply(request: r.optionalText(i, 2), bytes: bytes)
        }
        var cache: [ReplyKey: StoredReply?] = [:]
        for k in keys { cache[k] = .some(found[Self.hex(k.scope) + ":" + Self.hex(k.id)]) }
        return cache
    }

    private func ridesCache(_ ids: [String], _ found: [StoredRide]) -> [String: StoredRide?] {
        var cache: [String: StoredRide?] = [:]
        for id in ids { cache[id] = .some(nil) }
        for r in found { cache[r.id] = .some(r) }
        return cache
    }

    /// Both read-aheads of a group in one round trip (pipeline mode), not one each.
    public func prefetch(replies keys: [ReplyKey], rides ids: [String]) {
        prefetch(replies: keys, rides: ids, traces: [])
    }

    /// Every read-ahead of a group in one round trip (pipeline mode), not one each.
    public func prefetch(replies keys: [ReplyKey], rides ids: [String], traces: [String]) {
        // Whatever an earlier group read ahead is dropped here, even when this one reads
        // nothing ahead (a group without writes does not reach `commit`'s reset).
        prefetched = nil
        prefetchedRides = nil
        prefetchedTraces = nil
        if traces.isEmpty && (keys.isEmpty || ids.isEmpty) {
            if !keys.isEmpty { prefetchReplies(keys) }
            if !ids.isEmpty { prefetchRides(ids) }
            return
        }
        guard let c = try? connection() else { return }
        var statements: [(sql: String, params: [PGValue])] = []
        if !keys.isEmpty { statements.append(repliesStatement(keys)) }
        if !ids.isEmpty { statements.append(PostgresJournal.ridesStatement(ids: ids)) }
        if !traces.isEmpty { statements.append(PostgresJournal.tracesStatement(traces)) }
        guard let out = try? c.pipeline(statements), out.count == statements.count else { return }
        var k = 0
        if !keys.isEmpty { prefetched = repliesCache(keys, out[k]); k += 1 }
        if !ids.isEmpty {
            if let found = try? PostgresJournal.rides(out[k], label: label) { prefetchedRides = ridesCache(ids, found) }
            k += 1
        }
        if !traces.isEmpty {
            var cache: [String: TraceCheckpoint?] = [:]
            for id in traces { cache[id] = .some(nil) }
            let r = out[k]
            for i in 0..<r.count {
                let id = r.text(i, 0)
                cache[id] = .some(PostgresJournal.traceRow(r, i, ride: id, offset: 1))
            }
            prefetchedTraces = cache
        }
    }

    /// The rides of a group's ids in one round trip: without it every start of a new ride
    /// costs a lookup of its own, one after another on the store thread.
    public func prefetchRides(_ ids: [String]) {
        prefetchedRides = nil
        guard !ids.isEmpty, let c = try? connection(),
              let found = try? PostgresJournal.rides(c, ids: ids, label: label) else { return }
        prefetchedRides = ridesCache(ids, found)
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresJournal.prune(c, repliesBefore: instant)
        }
    }

    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        // What the group read may name rides this deletes: later reads go to PostgreSQL.
        prefetched = nil
        prefetchedRides = nil
        prefetchedTraces = nil
        guard limit > 0 else { return PurgeCount() }
        return try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresRetention.purge(c, before: instant, limit: limit)
        }
    }

    // MARK: reads (single statements: each sees one snapshot)

    public func openRides() throws(StoreError) -> [StoredRide] {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.openRides(c, label: label) }
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        if let cached = prefetchedRides?[id] { return cached }
        return try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.ride(c, id, label: label) }
    }

    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.rides(c, page, rider: rider, limit: limit, label: label) }
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? {
        if let cached = prefetched?[key] { return cached }
        return try read { (c: PostgresConnection) throws(StoreError) in
            try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresJournal.reply(c, for: key) }
        }
    }

    /// `SELECT 1`, connecting first if needed. The probe runs on its own backoff (the store
    /// worker's), so it skips the connect backoff: PostgreSQL back is seen at the next probe.
    public func probe() throws(StoreError) {
        if !isConnected { retryAt = clock.now() }
        try read { (c: PostgresConnection) throws(StoreError) in
            try PostgresJournal.run(label) { () throws(PostgresError) in _ = try c.query("SELECT 1") }
        }
    }

    public var reachable: Bool { health.isUp }

    /// One read on the open connection; a read that loses it marks the store down.
    func read<T>(_ body: (PostgresConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        let c = try connection()
        do {
            return try body(c)
        } catch {
            if !c.isOpen { health.down(error.message) }
            throw error
        }
    }

    // MARK: private

    /// The open connection, reopened if lost (at most once per backoff interval).
    func connection() throws(StoreError) -> PostgresConnection {
        if closed { throw StoreError(.unavailable, "\(label): closed") }
        if let conn, conn.stillThere() { return conn }
        conn = nil
        ownBackend.set(0)
        let now = clock.now()
        if now < retryAt {
            throw StoreError(.unavailable, "\(label): PostgreSQL unreachable (\(health.lastFailure)); next attempt in \(retryAt - now) ms")
        }
        do {
            let c = try PostgresConnection(settings)
            conn = c
            backoffMillis = 0
            ownBackend.set(c.backendPID)
            health.up()
            return c
        } catch {
            backoffMillis = Self.nextBackoff(after: backoffMillis)
            retryAt = clock.now() + backoffMillis
            health.down(error.message)
            throw StoreError(postgres: error, label: label)
        }
    }

    /// 250 ms after the first failed connect, doubling to at most 5 s.
    static func nextBackoff(after millis: Int64) -> Int64 {
        millis == 0 ? 250 : min(millis * 2, 5_000)
    }

    /// One call = one transaction. A deadlock or serialization failure (two nodes' batches
    /// locking rides in different orders) is retried, twice at most: nothing of it applied.
    /// `settle`: how to decide a COMMIT whose answer was lost (a group's writes are read
    /// back); without it such a COMMIT is reported `.unavailable`, its outcome unknown.
    func transaction<T>(settle: ((T, PostgresError, PostgresConnection.Identity) throws(StoreError) -> T)? = nil,
                                _ body: (PostgresConnection) throws(PostgresError) -> T) throws(StoreError) -> T {
        var attempt = 0
        var lostAtCommit: (value: T, error: PostgresError, on: PostgresConnection.Identity)?
        while true {
            let c = try connection()
            do throws(PostgresError) {
                try c.query("BEGIN")
                let value = try body(c)
                #if DEBUG
                beforeCommit?()
                #endif
                do throws(PostgresError) {
                    try c.query("\(Self.noCommitTimeout) COMMIT")
                } catch {
                    guard settle != nil, !c.isOpen, error.kind == .lost || error.kind == .timeout else { throw error }
                    health.down(error.message)
                    lostAtCommit = (value, error, c.identity)
                    break
                }
                return value
            } catch {
                if c.isOpen { _ = try? c.query("ROLLBACK") } else { health.down(error.message) }
                attempt += 1
                if error.kind == .server, error.sqlState == "40P01" || error.sqlState == "40001", attempt < 3 { continue }
                throw StoreError(postgres: error, label: label)
            }
        }
        let lost = lostAtCommit!
        return try settle!(lost.value, lost.error, lost.on)
    }
}

/// CLOCK_MONOTONIC in milliseconds, the default clock of the store's reconnect backoff: a
/// stepped wall clock must not stretch or cut short a wait between connects.
public struct MonotonicMillisClock: RideClock {
    public init() {}
    public func now() -> UnixMillis { systemMicros(CLOCK_MONOTONIC) / 1000 }
}
