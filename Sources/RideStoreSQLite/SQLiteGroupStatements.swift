import RideCore
import RideStore

/// A group's writes and reads as a few multi-row statements instead of three statements per
/// write and two reads per request. Each statement run costs SQLite a fixed part (opening the
/// transaction's statement, a cursor per table and index, halting, resetting) besides its
/// B-tree work; the profile of the 10,000/s bench put that fixed part, over 5 statements per
/// transition, near half of the store worker's CPU.
///
/// Writes go the fast way only when all of them apply: the statements are checked by their
/// row counts and, on any shortfall (a retry's reply key, a ride that exists, an append that
/// is not the ride's next), the group's transaction is rolled back, begun again and written one
/// write at a time by `apply`, which says exactly why each refused one is refused.
extension SQLiteStore {
    /// Rows per multi-row statement: a group of n rows runs as the binary digits of n (at
    /// most 8 statements per table for a group of 255), each shape prepared once.
    static let arities = [128, 64, 32, 16, 8, 4, 2, 1]

    /// The statement shapes, each a prefix and one row's placeholders repeated `arity` times.
    /// The writes say OR ROLLBACK: a multi-row statement that may abort halfway (a NOT NULL or
    /// CHECK failure) makes SQLite copy every page it touches to a statement journal first, in
    /// a temporary file once past 64 KiB (measured: twice the bytes written per transition);
    /// one that fails rolls the whole group back instead, which the group does anyway.
    enum GroupStatement: Int {
        case replies, creates, moves, ends, transitions, replyReads, rideReads, outbox

        func sql(arity: Int) -> String {
            func rows(_ one: String) -> String { Array(repeating: one, count: arity).joined(separator: ", ") }
            switch self {
            case .replies:
                return "INSERT OR ROLLBACK INTO replies (scope, id, bytes, at, request) VALUES \(rows("(?, ?, ?, ?, ?)")) ON CONFLICT DO NOTHING"
            case .creates:
                return """
                    INSERT OR ROLLBACK INTO rides (id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)
                    VALUES \(rows("(?, ?, ?, ?, ?, NULL, 1, 'riding')")) ON CONFLICT DO NOTHING RETURNING id, n
                    """
            case .moves:
                // A pause or resume: only as the ride's next entry, from the state it leaves.
                // ended_at is not set here, so the partial indexes on it are left alone.
                return """
                    WITH v(id, seq, state, from_state) AS (VALUES \(rows("(?, ?, ?, ?)")))
                    UPDATE OR ROLLBACK rides SET last_seq = v.seq, state = v.state FROM v
                    WHERE rides.id = v.id AND rides.last_seq = v.seq - 1 AND rides.state = v.from_state
                    RETURNING id, n
                    """
            case .ends:
                return """
                    WITH v(id, seq, at) AS (VALUES \(rows("(?, ?, ?)")))
                    UPDATE OR ROLLBACK rides SET last_seq = v.seq, state = 'ended', ended_at = v.at FROM v
                    WHERE rides.id = v.id AND rides.last_seq = v.seq - 1 AND rides.state <> 'ended'
                    RETURNING id, n
                    """
            case .transitions:
                return "INSERT OR ROLLBACK INTO transitions (ride, seq, kind, at, reason, metres) VALUES \(rows("(?, ?, ?, ?, ?, ?)"))"
            case .outbox:
                return """
                    INSERT OR ROLLBACK INTO webhook_outbox (event_id, type, ride, endpoint, created, body, attempts, next_attempt_at)
                    VALUES \(rows("(?, ?, ?, ?, ?, ?, 0, ?)"))
                    """
            case .replyReads:
                // Rows name the key by its place in the list: matched as SQLite compares
                // (bytes), with no text read back.
                return """
                    WITH k(i, scope, id) AS (VALUES \(rows("(?, ?, ?)")))
                    SELECT k.i, r.bytes, r.request FROM k JOIN replies r ON r.scope = k.scope AND r.id = k.id
                    """
            case .rideReads:
                return """
                    WITH k(id) AS (VALUES \(rows("(?)")))
                    SELECT r.id, r.plan_id, r.owner, r.time_limit, t.kind, t.at, t.reason, t.metres
                    FROM k JOIN rides r ON r.id = k.id LEFT JOIN transitions t ON t.ride = r.n
                    ORDER BY r.id, t.seq
                    """
            }
        }
    }

    /// Runs `items` through `kind`'s statements, largest shape first; `bind` binds one item's
    /// row, `row` sees every result row. Returns the rows changed (INSERT/UPDATE).
    @discardableResult
    func inGroups<T>(_ items: some RandomAccessCollection<T>, _ kind: GroupStatement,
                     bind: (inout SQLBinder, T) -> Void,
                     row: (SQLRow) throws(StoreError) -> Void = { (_: SQLRow) throws(StoreError) in }) throws(StoreError) -> Int {
        var changed = 0
        var i = items.startIndex
        var left = items.count
        for arity in Self.arities where left >= arity {
            while left >= arity {
                let s = try groupStatement(kind, arity: arity)
                let end = items.index(i, offsetBy: arity)
                try db.query(s, bind: { b in for item in items[i..<end] { bind(&b, item) } }, row: row)
                changed += Int(db.changes)
                i = end
                left -= arity
            }
        }
        return changed
    }

    private func groupStatement(_ kind: GroupStatement, arity: Int) throws(StoreError) -> SQLStatement {
        let key = kind.rawValue << 8 | arity
        if let s = groupStatements[key] { return s }
        let s = try db.statement(kind.sql(arity: arity))
        groupStatements[key] = s
        return s
    }

    // MARK: writes

    /// Writes all of `batch` when every write applies, and returns nil having changed nothing
    /// when any would be refused (or the batch is one `apply` must take alone). Runs inside
    /// the group's transaction (which holds nothing else), and may roll it back and begin it
    /// again.
    func applyAll(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult]? {
        guard batch.count > 1 else { return nil }
        var replies: [ReplyRecord] = []
        var creates: [NewRide] = []
        var moves: [JournalEntry] = []
        var ends: [JournalEntry] = []
        replies.reserveCapacity(batch.count)
        // Creates run before appends: an append of a ride this batch creates must come after
        // the create (else one at a time would refuse it), and a ride appended to twice must
        // not be created between them.
        var appended: Set<String> = []
        for write in batch {
            switch write {
            case .create(let new, let reply):
                if appended.contains(new.id) { return nil }
                creates.append(new)
                if let reply { replies.append(reply) }
            case .append(let entry, let reply):
                switch entry.transition {
                case .start: return nil
                case .pause, .resume: moves.append(entry)
                case .end: ends.append(entry)
                }
                appended.insert(entry.ride)
                if let reply { replies.append(reply) }
            case .trace:
                return nil  // the caller writes checkpoints itself
            }
        }
        // Ends after pauses and resumes: a ride paused and ended in one group is paused first
        // (an end is never followed by anything that applies).
        func undone() throws(StoreError) -> [WriteResult]? {
            try db.run("ROLLBACK")
            try db.run("BEGIN IMMEDIATE")
            return nil
        }

        guard try inGroups(replies, .replies, bind: { b, r in
            b.text(r.key.scope); b.text(r.key.id); b.blob(r.bytes); b.int(r.at); b.text(r.request)
        }) == replies.count else { return try undone() }

        var numbers: [String: Int64] = [:]
        numbers.reserveCapacity(creates.count + moves.count + ends.count)
        let number = { (r: SQLRow) throws(StoreError) in numbers[r.text(0)] = r.int(1) }
        guard try inGroups(creates, .creates, bind: { b, new in
            b.text(new.id); b.text(new.planID); b.text(new.owner); b.int(new.limit); b.int(new.startedAt)
        }, row: number) == creates.count else { return try undone() }
        guard try inGroups(moves, .moves, bind: { b, e in
            let (to, from): (RideState, RideState) = if case .pause = e.transition { (.paused, .riding) } else { (.riding, .paused) }
            b.text(e.ride); b.int(e.seq); b.text(to.rawValue); b.text(from.rawValue)
        }, row: number) == moves.count else { return try undone() }
        guard try inGroups(ends, .ends, bind: { b, e in
            b.text(e.ride); b.int(e.seq); b.int(e.transition.at)
        }, row: number) == ends.count else { return try undone() }

        try inGroups(batch, .transitions, bind: { b, write in
            let t: RideTransition, seq: Int64
            switch write {
            case .create(let new, _): (t, seq) = (.start(at: new.startedAt), 1)
            case .append(let e, _): (t, seq) = (e.transition, e.seq)
            case .trace: preconditionFailure("applyAll takes no trace checkpoints")
            }
            var reason: String?, metres: Int64?
            if case .end(_, let r, let m) = t { (reason, metres) = (r.rawValue, m) }
            // Every write's ride was numbered above (the counts matched).
            b.int(numbers[write.rideID]!); b.int(seq); b.text(t.kind); b.int(t.at); b.text(reason); b.int(metres)
        })
        // In the batch's order, so seq (the rowid) follows commit order within each ride.
        try insertOutbox(batch.flatMap(\.outbox))
        return [WriteResult](repeating: .written, count: batch.count)
    }
}

extension SQLiteStore {
    /// The webhook deliveries of writes being kept, in the same transaction.
    func insertOutbox(_ events: [OutboxEvent]) throws(StoreError) {
        guard !events.isEmpty else { return }
        try inGroups(events, .outbox, bind: { b, e in
            b.text(e.eventID); b.text(e.type); b.text(e.rideID); b.text(e.endpoint); b.int(e.created); b.blob(e.body); b.int(e.created)
        })
    }
}

// MARK: reads

extension SQLiteStore: GroupReads {
    public func prefetchReplies(_ keys: [ReplyKey]) {
        prefetchedReplies = nil
        guard !keys.isEmpty else { return }
        var found: [StoredReply?] = Array(repeating: nil, count: keys.count)
        // Only the keys the file may hold: the rest were never written.
        let maybe = keys.indices.filter { mayHold(replyKey: keys[$0]) }
        do throws(StoreError) {
            try inGroups(maybe, .replyReads, bind: { b, i in b.int(Int64(i)); b.text(keys[i].scope); b.text(keys[i].id) }) {
                (r: SQLRow) throws(StoreError) in found[Int(r.int(0))] = StoredReply(request: r.optionalText(2), bytes: r.blob(1))
            }
        } catch {
            return  // reply(for:) then reads each key itself, and reports the failure
        }
        var cache: [ReplyKey: StoredReply?] = [:]
        cache.reserveCapacity(keys.count)
        for (k, r) in zip(keys, found) { cache[k] = .some(r) }
        prefetchedReplies = cache
    }

    public func prefetchRides(_ ids: [String]) {
        prefetchedRides = nil
        // Once each: a ride listed twice in one statement would come back with its journal twice.
        let unique = Array(Set(ids))
        guard !unique.isEmpty else { return }
        var cache: [String: StoredRide?] = [:]
        cache.reserveCapacity(unique.count)
        for id in unique { cache[id] = .some(nil) }
        // Only the ids the file may hold: the rest were never written.
        let maybe = unique.filter { mayHold(rideID: $0) }
        do throws(StoreError) {
            let rides = try loadRides { (row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) in
                try inGroups(maybe, .rideReads, bind: { b, id in b.text(id) }, row: row)
            }
            for r in rides { cache[r.id] = .some(r) }
        } catch {
            return
        }
        prefetchedRides = cache
    }
}
