import RideCore

/// The ride store on PostgreSQL, shared by every node of a fleet. Same rules as
/// `SQLiteStore` (same conflicts, same validation, all-or-nothing calls); on top, an append
/// is conditional on the ride's last sequence number in the database, so when two nodes race
/// on one ride exactly one commits, and every commit notifies the other nodes.
///
/// Not `Sendable`, like the other stores: one owner thread. A lost connection is reopened on
/// the next call, at most once per backoff interval (250 ms doubling to 5 s), so calls made
/// while PostgreSQL is down fail at once with `.unavailable` instead of each waiting for a
/// connect timeout.
public final class PostgresStore: RideStore {
    public let settings: PostgresSettings
    /// "ride store postgresql://user:***@host/db": what every message names.
    public let label: String
    private var conn: PostgresConnection?
    private var closed = false
    private var backoff: Duration = .zero
    private var retryAt: ContinuousClock.Instant = .now

    /// Connects, then creates or upgrades the schema. Throws `.unavailable` (cannot
    /// connect or authenticate: the message has libpq's words), `.newerSchema`, `.corrupt`
    /// (a `ridepush` schema that is not RidePush's).
    public init(_ settings: PostgresSettings) throws(StoreError) {
        self.settings = settings
        label = "ride store \(settings.redacted)"
        let c = try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresConnection(settings) }
        try PostgresJournal.migrate(c, label: label)
        conn = c
    }

    public func close() {
        closed = true
        conn?.close()
        conn = nil
    }

    /// Whether the last call reached PostgreSQL (what /healthz reports).
    public var isConnected: Bool { conn?.isOpen ?? false }

    // MARK: writes

    @discardableResult
    public func create(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis,
                       reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        let outcome = try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresJournal.create(c, id: id, planID: planID, owner: owner, limit: limit, startedAt: startedAt, reply: reply)
        }
        switch outcome {
        case .written: return StoredRide(id: id, planID: planID, owner: owner, limit: limit, journal: [.start(at: startedAt)])!
        case .replyExists: throw StoreError(.conflict, "a reply is already recorded for \(reply!.key)")
        case .exists, .stale: throw StoreError(.conflict, "ride \(id) already exists")
        }
    }

    @discardableResult
    public func append(ride id: String, _ transition: RideTransition, reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        // Validated against the database, not a node's copy: another node may have moved the
        // ride on. The append is conditional on what was read, so a write in between makes
        // this one refuse rather than apply to a state it did not check.
        guard let current = try ride(id) else { throw StoreError(.notFound, "no ride \(id)") }
        let next = try current.appending(transition).get()
        let outcome = try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresJournal.append(c, ride: id, seq: Int64(next.journal.count), transition, reply: reply)
        }
        switch outcome {
        case .written: return next
        case .replyExists: throw StoreError(.conflict, "a reply is already recorded for \(reply!.key)")
        case .stale, .exists: throw StoreError(.conflict, "ride \(id) changed on another node; \(transition.kind) not applied")
        }
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresJournal.prune(c, repliesBefore: instant)
        }
    }

    // MARK: reads (single statements: each sees one snapshot)

    public func openRides() throws(StoreError) -> [StoredRide] {
        try PostgresJournal.openRides(try connection(), label: label)
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        try PostgresJournal.ride(try connection(), id, label: label)
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> [UInt8]? {
        let c = try connection()
        return try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresJournal.reply(c, for: key) }
    }

    // MARK: private

    /// The open connection, reopened if lost (at most once per backoff interval).
    func connection() throws(StoreError) -> PostgresConnection {
        if closed { throw StoreError(.unavailable, "\(label): closed") }
        if let conn, conn.isOpen { return conn }
        conn = nil
        let now = ContinuousClock.now
        if now < retryAt {
            throw StoreError(.unavailable, "\(label): PostgreSQL unreachable; next attempt in \(now.duration(to: retryAt))")
        }
        do {
            let c = try PostgresConnection(settings)
            conn = c
            backoff = .zero
            return c
        } catch {
            backoff = backoff == .zero ? .milliseconds(250) : min(backoff * 2, .seconds(5))
            retryAt = ContinuousClock.now + backoff
            throw StoreError(postgres: error, label: label)
        }
    }

    /// One call = one transaction. A deadlock or serialization failure (two nodes' batches
    /// locking rides in different orders) is retried, twice at most: nothing of it applied.
    private func transaction<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(StoreError) -> T {
        var attempt = 0
        while true {
            let c = try connection()
            do {
                try c.query("BEGIN")
                let value = try body(c)
                try c.query("COMMIT")
                return value
            } catch {
                if c.isOpen { _ = try? c.query("ROLLBACK") }
                attempt += 1
                if error.kind == .server, error.sqlState == "40P01" || error.sqlState == "40001", attempt < 3 { continue }
                throw StoreError(postgres: error, label: label)
            }
        }
    }
}
