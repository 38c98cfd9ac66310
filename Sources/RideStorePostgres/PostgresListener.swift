import RideCore
import RideStore
import Synchronization

extension PostgresStore: SharedJournal {
    public func startCursor() throws(StoreError) -> JournalCursor {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.startCursor(c, label: label) }
    }

    public func feed(after cursor: JournalCursor, limit: Int) throws(StoreError) -> (entries: [FeedEntry], cursor: JournalCursor) {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.feed(c, after: cursor, limit: limit, label: label) }
    }

    public func entries(ride: String, after seq: Int64) throws(StoreError) -> [FeedEntry] {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.entries(c, ride: ride, after: seq, label: label) }
    }

    public func entries(after seqs: [(ride: String, seq: Int64)]) throws(StoreError) -> [FeedEntry] {
        try read { (c: PostgresConnection) throws(StoreError) in try PostgresJournal.entries(c, after: seqs, label: label) }
    }
}

/// A node's dedicated LISTEN connection. It must reach PostgreSQL directly (or through a
/// session-mode pooler): a transaction-mode pooler hands the session to others between
/// statements, and the LISTEN goes with it. One owner thread.
public final class PostgresListener {
    public let label: String
    private let connection: PostgresConnection

    /// Connects and listens on `journalChannel`. Throws `.unavailable` with libpq's words.
    public init(_ settings: PostgresSettings) throws(StoreError) {
        var s = settings
        s.applicationName = settings.applicationName + "-listen"
        label = "ride store listener \(settings.redacted)"
        let l = label
        connection = try PostgresJournal.run(l) { () throws(PostgresError) in try PostgresConnection(s) }
        try PostgresJournal.run(l) { () throws(PostgresError) in try connection.query("LISTEN \(journalChannel)") }
    }

    public var backendPID: Int32 { connection.backendPID }
    public var isOpen: Bool { connection.isOpen }

    /// Notifications received, waiting up to `millis` for the first. Throws `.unavailable`
    /// when the connection is gone (the server restarted, `pg_terminate_backend`, network).
    public func wait(millis: Int) throws(StoreError) -> [PostgresNotification] {
        try PostgresJournal.run(label) { () throws(PostgresError) in try connection.notifications(waitingUpTo: millis) }
    }

    /// A round trip, so a silent network failure is noticed within the statement deadline
    /// even when no notification is due.
    public func ping() throws(StoreError) {
        try PostgresJournal.run(label) { () throws(PostgresError) in try connection.query("SELECT 1") }
    }

    public func close() { connection.close() }

    /// A group's payload: one `<ride id>:<seq>` a line (see `PostgresJournal.notifyStatements`);
    /// lines that are not hints are skipped.
    public static func hints(_ payload: String) -> [(ride: String, seq: Int64)] {
        payload.split(separator: "\n").compactMap { hint(String($0)) }
    }

    /// `<ride id>:<seq>` split at the last colon (ride ids may hold colons).
    public static func hint(_ payload: String) -> (ride: String, seq: Int64)? {
        guard let colon = payload.lastIndex(of: ":"), let seq = Int64(payload[payload.index(after: colon)...]), seq >= 1 else { return nil }
        let ride = String(payload[..<colon])
        return ride.isEmpty ? nil : (ride, seq)
    }
}
