import RideCore
import RideStore

// Retention (--retain-ended, docs/retention.md): ended rides older than the window deleted in
// small batches, and the pages they held given back to the filesystem.
extension SQLiteStore {
    /// Most free pages one purge batch gives back (8 MiB of 4 KiB pages): bounds the batch's
    /// transaction however many pages other deletes (reply prunes) left free.
    static let vacuumPagesPerPurge = 2048

    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        prefetchedReplies = nil
        prefetchedRides = nil
        guard limit > 0 else { return PurgeCount() }
        return try transaction { () throws(StoreError) -> PurgeCount in
            var count = PurgeCount()
            // The oldest ends first, through the partial index of ended rides: a batch reads
            // the rides it deletes, not the open ones nor the ones still in the window.
            var rides: [Int64] = []
            try db.query("""
                SELECT n FROM rides INDEXED BY rides_ended WHERE ended_at IS NOT NULL AND ended_at < ?
                ORDER BY ended_at, id LIMIT ?
                """, [.int(instant), .int(Int64(limit))]) { (r: SQLRow) throws(StoreError) in rides.append(r.int(0)) }
            if !rides.isEmpty {
                // The batch's row numbers as one bound JSON array (one statement shape whatever
                // the batch's size). Children first: foreign keys are on.
                let batch: [SQLValue] = [.text("[" + rides.map(String.init).joined(separator: ",") + "]")]
                let members = "(SELECT value FROM json_each(?))"
                try db.run("DELETE FROM webhook_dead WHERE ride IN (SELECT id FROM rides WHERE n IN \(members))", batch)
                count.outbox = Int(db.changes)
                // Nor the event log's copies (GET /v1/events; not counted).
                try db.run("DELETE FROM webhook_events WHERE ride IN (SELECT id FROM rides WHERE n IN \(members))", batch)
                // Push targets of a purged ride have nothing left to show (not counted).
                try db.run("DELETE FROM push_targets WHERE ride IN (SELECT id FROM rides WHERE n IN \(members))", batch)
                try db.run("DELETE FROM traces WHERE ride IN \(members)", batch)
                count.traces = Int(db.changes)
                try db.run("DELETE FROM transitions WHERE ride IN \(members)", batch)
                count.journal = Int(db.changes)
                try db.run("DELETE FROM rides WHERE n IN \(members)", batch)
                count.rides = Int(db.changes)
            }
            // Replies are not linked to their ride (a start without an id, a server API request):
            // every one recorded before the cutoff goes, oldest first, found as `prune` finds
            // them (walking from the first row, schema 6); the purged rides' among them.
            try db.run("""
                DELETE FROM replies WHERE n IN (
                    SELECT n FROM replies WHERE n < COALESCE(
                        (SELECT n FROM replies WHERE at >= ? ORDER BY n LIMIT 1),
                        (SELECT MAX(n) + 1 FROM replies))
                    ORDER BY n LIMIT ?)
                """, [.int(instant), .int(Int64(limit))])
            count.replies = Int(db.changes)
            // In the same transaction, so one commit: the freed pages leave the file (at the
            // next checkpoint, which truncates it) instead of waiting on the free list.
            if count != PurgeCount() { try db.exec("PRAGMA incremental_vacuum(\(Self.vacuumPagesPerPurge))") }
            return count
        }
    }

    /// Makes a file made before schema 9 give back freed pages: `auto_vacuum` only changes on a
    /// non-empty file through a VACUUM, which rewrites the whole file once (minutes for
    /// gigabytes, and room for a copy of it; docs/retention.md). A file made with schema 9
    /// is incremental from its first table, so this does nothing there.
    func vacuumIntoIncremental() throws(StoreError) {
        guard try db.scalarText("PRAGMA auto_vacuum") != "2" else { return }
        try db.exec("PRAGMA auto_vacuum = INCREMENTAL")
        try db.exec("VACUUM")
        // VACUUM in WAL mode writes the whole file through the log: copy it back and empty
        // the log now rather than leave a log as big as the store.
        try db.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        guard try db.scalarText("PRAGMA auto_vacuum") == "2" else {
            throw StoreError(.unavailable, "ride store \(path): could not switch the file to auto_vacuum = INCREMENTAL")
        }
    }
}
