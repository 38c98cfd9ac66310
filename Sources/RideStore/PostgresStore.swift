import RideCore

/// The ride store on PostgreSQL, shared by every node of a fleet. Same contract as
/// `SQLiteStore` (same refusals, `StoreRules`); an append is checked against the ride's row
/// under its lock, so when two nodes append the same seq to one ride exactly one commits,
/// and every written entry notifies the other nodes in the same transaction.
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
    /// The server process of the current connection (a node ignores its own NOTIFYs).
    public let ownBackend = BackendID()
    /// Whether the last call reached PostgreSQL.
    public let health = ConnectionHealth()
    /// Tests hold a transaction open here (its row locks taken) to race another node.
    var beforeCommit: (() -> Void)?

    /// Connects, then creates or upgrades the schema. Throws `.unavailable` (cannot
    /// connect or authenticate: the message has libpq's words), `.newerSchema`, `.corrupt`
    /// (a `ridepush` schema that is not RidePush's).
    public init(_ settings: PostgresSettings) throws(StoreError) {
        self.settings = settings
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
    /// stops itself on an fsync failure), and the answer can be read back. So it is reported
    /// as `.unavailable`; if it did commit, the node's catch-up read applies the entries, and a
    /// retry with the same request id gets the recorded reply, so it is still applied once.
    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        if batch.isEmpty {
            _ = try connection()
            return []
        }
        return try transaction { (c: PostgresConnection) throws(PostgresError) -> [WriteResult] in
            var rows = try PostgresJournal.lockRides(c, batch.map(\.rideID), label: label)
            var results: [WriteResult] = []
            results.reserveCapacity(batch.count)
            for write in batch {
                switch write {
                case .create(let new, let reply):
                    if rows[new.id] != nil {
                        results.append(.refused(StoreError(.conflict, "ride \(new.id) already exists")))
                        continue
                    }
                    switch try PostgresJournal.create(c, new, reply: reply) {
                    case .written:
                        rows[new.id] = PostgresJournal.RideRow(lastSeq: 1, state: .riding)
                        results.append(.written)
                    case .idExists:
                        results.append(.refused(StoreError(.conflict, "ride \(new.id) already exists")))
                    case .replyExists:
                        results.append(.refused(StoreError(.conflict, "a reply is already recorded for \(reply!.key)")))
                    }
                case .append(let entry, let reply):
                    guard let row = rows[entry.ride] else {
                        results.append(.refused(StoreError(.notFound, "no ride \(entry.ride)")))
                        continue
                    }
                    if let e = StoreRules.appendRefusal(entry, lastSeq: row.lastSeq, state: row.state) {
                        results.append(.refused(e))
                        continue
                    }
                    switch try PostgresJournal.append(c, entry, reply: reply) {
                    case .written:
                        rows[entry.ride] = PostgresJournal.RideRow(lastSeq: entry.seq, state: StoreRules.state(after: entry.transition))
                        results.append(.written)
                    case .replyExists, .idExists:
                        results.append(.refused(StoreError(.conflict, "a reply is already recorded for \(reply!.key)")))
                    }
                }
            }
            return results
        }
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try transaction { (c: PostgresConnection) throws(PostgresError) in
            try PostgresJournal.prune(c, repliesBefore: instant)
        }
    }

    // MARK: reads (single statements: each sees one snapshot)

    public func openRides() throws(StoreError) -> [StoredRide] {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.openRides(c, label: label) }
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.ride(c, id, label: label) }
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? {
        try read { (c: PostgresConnection) throws(StoreError) in
            try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresJournal.reply(c, for: key) }
        }
    }

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
        if let conn, conn.isOpen { return conn }
        conn = nil
        ownBackend.set(0)
        let now = ContinuousClock.now
        if now < retryAt {
            throw StoreError(.unavailable, "\(label): PostgreSQL unreachable (\(health.lastFailure)); next attempt in \(now.duration(to: retryAt).formatted(.units(allowed: [.milliseconds])))")
        }
        do {
            let c = try PostgresConnection(settings)
            conn = c
            backoff = .zero
            ownBackend.set(c.backendPID)
            health.up()
            return c
        } catch {
            backoff = backoff == .zero ? .milliseconds(250) : min(backoff * 2, .seconds(5))
            retryAt = ContinuousClock.now + backoff
            health.down(error.message)
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
                beforeCommit?()
                try c.query("COMMIT")
                return value
            } catch {
                if c.isOpen { _ = try? c.query("ROLLBACK") } else { health.down(error.message) }
                attempt += 1
                if error.kind == .server, error.sqlState == "40P01" || error.sqlState == "40001", attempt < 3 { continue }
                throw StoreError(postgres: error, label: label)
            }
        }
    }
}
