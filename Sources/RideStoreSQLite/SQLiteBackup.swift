import CSQLite
import Glibc
import RideStore

/// A consistent copy of a SQLite store made while a server writes to it (`ridepush backup`),
/// through SQLite's online backup API, page batches at a time.
///
/// The copy is of one snapshot: the source is opened read-only as a connection of its own,
/// and a read transaction begun on it before the first page is held until the last. A backup
/// step on a connection with no read transaction takes one per step, and a commit by another
/// connection between steps restarts the copy from page 1 (sqlite.org/backup.html): under the
/// server's steady writes such a backup may never finish. Held across steps, the snapshot
/// cannot change, so the copy always progresses. In WAL mode a reader blocks no writer; what
/// it holds back is the log's restart (the server's checkpoints copy up to the snapshot and no
/// further), so the log grows while the backup runs and restarts after it.
///
/// The pages go into a temporary file beside the destination, which is then checked (integrity,
/// a RidePush schema this build knows, the ride count the snapshot had), fsynced and renamed
/// into place, so the destination is either the old file or a whole, checked copy.
public enum SQLiteBackup {
    public struct Options: Sendable {
        /// Pages copied per step: the unit of work between two looks at the clock, small enough
        /// that one step's reads stay short next to the server's own.
        public var pagesPerStep: Int32 = 256
        /// Replace an existing destination (never the store itself, nor a file a server holds).
        public var force = false
        /// A step answered BUSY or LOCKED (a WAL recovery or checkpoint holding a lock) waits
        /// this long and tries again, at most `busyRetries` times in a row.
        public var busyPause: Duration = .milliseconds(20)
        public var busyRetries = 250
        /// Restarts tolerated (a restart should not happen with the snapshot held; bounded in
        /// case SQLite restarts anyway, so a backup never loops forever).
        public var maxRestarts = 3

        public init(pagesPerStep: Int32 = 256, force: Bool = false) {
            self.pagesPerStep = pagesPerStep
            self.force = force
        }
    }

    /// Where a backup stands after one step (tests use it to write between steps).
    public struct Progress: Sendable {
        public let step: Int
        public let remaining: Int32
        public let pageCount: Int32
    }

    /// What a finished backup copied, as the command prints it.
    public struct Report: Sendable {
        public var pages: Int32 = 0
        public var pageSize: Int64 = 0
        /// The copy's size on disk.
        public var bytes: Int64 = 0
        public var steps = 0
        public var busyWaits = 0
        public var restarts = 0
        public var seconds = 0.0
        public var schemaVersion: Int64 = 0
        public var rides: Int64 = 0
        public var openRides: Int64 = 0
        /// Rows of each outbox table (webhook deliveries owed, and any later outbox), by name.
        public var outboxes: [(table: String, rows: Int64)] = []
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            /// The store path names nothing, or not a regular file.
            case noStore
            /// Not an SQLite file, or an SQLite file without RidePush's schema.
            case notAStore
            /// Written by a newer RidePush: this build cannot check the copy.
            case newerSchema
            /// The destination exists (without --force), or a server holds it (even with).
            case destinationExists
            /// No room left for the copy on the destination's filesystem.
            case diskFull
            /// Reading the store or writing the copy failed (I/O, busy for too long, …).
            case copyFailed
            /// The copy was made but does not check out; nothing was renamed into place.
            case checkFailed
        }

        public let kind: Kind
        public let message: String
        public var description: String { message }

        init(_ kind: Kind, _ message: String) {
            self.kind = kind
            self.message = message
        }
    }

    /// Copies the store at `store` to `destination`. `afterStep` runs after every step that
    /// left pages to copy, on the calling thread.
    public static func run(store: String, to destination: String, options: Options = Options(),
                           afterStep: (Progress) -> Void = { _ in }) throws(Failure) -> Report {
        let clock = ContinuousClock()
        let began = clock.now
        try checkPaths(store: store, destination: destination, force: options.force)

        let source: SQLiteConnection
        do { source = try SQLiteConnection(path: store, readOnly: true) } catch {
            throw Failure(.copyFailed, "cannot open the store \(store) for reading: \(error.message)")
        }
        defer { source.close() }
        var report = Report()
        do throws(StoreError) {
            try source.exec("PRAGMA busy_timeout = 1000")
            // Deferred: the snapshot is taken by the first read (in `describe`) and kept until COMMIT.
            try source.exec("BEGIN")
        } catch {
            throw Failure(.copyFailed, "cannot read the store: \(error.message)")
        }
        try describe(source, path: store, into: &report)
        do throws(StoreError) {
            report.pageSize = Int64(try source.scalarText("PRAGMA page_size") ?? "0") ?? 0
        } catch {
            throw Failure(.copyFailed, "cannot read the store: \(error.message)")
        }

        let partial = destination + ".\(getpid()).partial"
        removeFileAndSidecars(partial)  // a leftover of a killed backup with our pid
        do throws(Failure) {
            try copy(source, into: partial, options: options, report: &report, afterStep: afterStep)
            // The snapshot is no longer needed: let the server's log restart now, not after the check.
            try? source.exec("COMMIT")
            source.close()
            try check(partial, expecting: report)
            try syncFile(partial)
            try replace(destination, with: partial, force: options.force)
        } catch {
            removeFileAndSidecars(partial)
            throw error
        }
        var st = stat()
        if stat(destination, &st) == 0 { report.bytes = Int64(st.st_size) }
        let elapsed = clock.now - began
        report.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return report
    }

    // MARK: steps

    /// Refuses before anything is read or written: a missing store, a destination that is the
    /// store (or its log), a folder, or exists without `force`.
    private static func checkPaths(store: String, destination: String, force: Bool) throws(Failure) {
        var src = stat()
        guard stat(store, &src) == 0 else {
            throw Failure(.noStore, "no store at \(store) (\(String(cString: strerror(errno))))")
        }
        guard src.st_mode & S_IFMT == S_IFREG else { throw Failure(.noStore, "\(store) is not a file") }
        for suffix in ["-wal", "-shm", "-journal"] where destination == store + suffix {
            throw Failure(.destinationExists, "--to \(destination) is the store's own \(suffix.dropFirst()) file")
        }
        var dst = stat()
        if stat(destination, &dst) == 0 {
            if dst.st_dev == src.st_dev && dst.st_ino == src.st_ino {
                throw Failure(.destinationExists, "--to \(destination) is the store itself")
            }
            guard dst.st_mode & S_IFMT == S_IFREG else {
                throw Failure(.destinationExists, "--to \(destination) exists and is not a file; name the copy's file")
            }
            guard force else {
                throw Failure(.destinationExists, "--to \(destination) exists; give --force to replace it, or another name")
            }
        }
        let folder = directory(of: destination)
        var dir = stat()
        guard stat(folder, &dir) == 0, dir.st_mode & S_IFMT == S_IFDIR else {
            throw Failure(.copyFailed, "--to \(destination): no folder \(folder)")
        }
    }

    /// Reads, in the snapshot's read transaction, that this is a RidePush store of a version
    /// this build knows, and what it holds (the figures the copy is checked against).
    private static func describe(_ db: SQLiteConnection, path: String, into report: inout Report) throws(Failure) {
        var tables: [String] = []
        do throws(StoreError) {
            try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") { (r: SQLRow) throws(StoreError) in
                tables.append(r.text(0))
            }
        } catch {
            // SQLITE_NOTADB: some other file; anything else is a read failure.
            if error.kind == .corrupt { throw Failure(.notAStore, "\(path) is not a RidePush store: \(error.message)") }
            throw Failure(.copyFailed, error.message)
        }
        guard tables.contains("schema_version"), tables.contains("rides") else {
            let has = tables.isEmpty ? "no tables" : "has " + tables.joined(separator: ", ")
            throw Failure(.notAStore, "\(path) is an SQLite database but not a RidePush store (\(has))")
        }
        do throws(StoreError) {
            try counts(db, tables: tables, into: &report)
        } catch {
            throw Failure(.copyFailed, error.message)
        }
        if report.schemaVersion > Schema.current {
            throw Failure(.newerSchema, "\(path) has schema version \(report.schemaVersion), newer than this RidePush knows (\(Schema.current)); back it up with the ridepush that serves it")
        }
    }

    /// The schema version, rides, open rides and outbox rows, read from `db`.
    private static func counts(_ db: SQLiteConnection, tables: [String], into report: inout Report) throws(StoreError) {
        report.schemaVersion = Int64(try db.scalarText("SELECT COALESCE(MAX(version), 0) FROM schema_version") ?? "0") ?? 0
        report.rides = Int64(try db.scalarText("SELECT COUNT(*) FROM rides") ?? "0") ?? 0
        report.openRides = Int64(try db.scalarText("SELECT COUNT(*) FROM rides WHERE ended_at IS NULL") ?? "0") ?? 0
        report.outboxes = []
        for t in tables where t.hasSuffix("_outbox") {
            // A table name from sqlite_master, quoted: SQL cannot bind an identifier.
            let n = Int64(try db.scalarText("SELECT COUNT(*) FROM \"\(t.replacingOccurrences(of: "\"", with: "\"\""))\"") ?? "0") ?? 0
            report.outboxes.append((t, n))
        }
    }

    /// The backup proper: every page of the snapshot into `partial`, `pagesPerStep` at a time.
    private static func copy(_ source: SQLiteConnection, into partial: String, options: Options, report: inout Report,
                             afterStep: (Progress) -> Void) throws(Failure) {
        let dest: SQLiteConnection
        do { dest = try SQLiteConnection(path: partial) } catch { throw Failure(.copyFailed, "cannot create \(partial): \(error.message)") }
        defer { dest.close() }
        guard let src = source.rawHandle, let dst = dest.rawHandle,
              let backup = sqlite3_backup_init(dst, "main", src, "main") else {
            let msg = dest.rawHandle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
            throw Failure(.copyFailed, "cannot start the backup: \(msg)")
        }
        var busyInARow = 0
        var lastRemaining = Int32.max
        var failed: Int32 = SQLITE_OK
        while true {
            let rc = sqlite3_backup_step(backup, options.pagesPerStep)
            if rc == SQLITE_DONE { break }
            let primary = rc & 0xff
            if primary == SQLITE_BUSY || primary == SQLITE_LOCKED {
                report.busyWaits += 1
                busyInARow += 1
                if busyInARow > options.busyRetries { failed = rc; break }
                pause(options.busyPause)
                continue
            }
            guard rc == SQLITE_OK else { failed = rc; break }
            busyInARow = 0
            report.steps += 1
            let remaining = sqlite3_backup_remaining(backup)
            // Remaining pages can only grow back if SQLite started the copy over.
            if remaining > lastRemaining {
                report.restarts += 1
                if report.restarts > options.maxRestarts { failed = SQLITE_ABORT; break }
            }
            lastRemaining = remaining
            afterStep(Progress(step: report.steps, remaining: remaining, pageCount: sqlite3_backup_pagecount(backup)))
        }
        report.pages = sqlite3_backup_pagecount(backup)
        // finish reports the failure of the last step (and rolls the destination back on one).
        let finished = sqlite3_backup_finish(backup)
        let rc = failed != SQLITE_OK ? failed : finished
        guard rc == SQLITE_OK else {
            let msg = String(cString: sqlite3_errstr(rc))
            switch rc & 0xff {
            case SQLITE_FULL:
                throw Failure(.diskFull, "no room for the copy beside \(partial) (\(msg)); free space or back up to another filesystem")
            case SQLITE_ABORT where failed == SQLITE_ABORT:
                throw Failure(.copyFailed, "the copy started over \(report.restarts) times (the store changed under it); try again")
            case SQLITE_BUSY, SQLITE_LOCKED:
                throw Failure(.copyFailed, "the store stayed locked (\(msg)) after \(report.busyWaits) waits and \(report.restarts) restarts; try again")
            case SQLITE_NOTADB, SQLITE_CORRUPT:
                throw Failure(.copyFailed, "the store could not be read (\(msg), SQLite code \(rc)); check it with sqlite3 PRAGMA integrity_check")
            default:
                throw Failure(.copyFailed, "copying failed: \(msg) (SQLite code \(rc))")
            }
        }
    }

    /// Opens the copy as its own file and checks it: intact, a RidePush schema this build
    /// knows, the rides the snapshot had. Leaves it in rollback-journal mode, one file with no
    /// -wal beside it (the server switches it back to WAL when it opens it).
    private static func check(_ partial: String, expecting snapshot: Report) throws(Failure) {
        do {
            let db = try SQLiteConnection(path: partial)
            defer { db.close() }
            // The copy's header says WAL, as the store's did; one file is what a backup should be.
            let mode = try db.scalarText("PRAGMA journal_mode = DELETE")
            guard mode?.lowercased() == "delete" else {
                throw Failure(.checkFailed, "the copy stayed in journal mode \(mode ?? "?")")
            }
            var problems: [String] = []
            try db.query("PRAGMA integrity_check(10)") { (r: SQLRow) throws(StoreError) in problems.append(r.text(0)) }
            guard problems == ["ok"] else {
                throw Failure(.checkFailed, "the copy fails SQLite's integrity check: " + problems.joined(separator: "; "))
            }
            var tables: [String] = []
            try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") { (r: SQLRow) throws(StoreError) in
                tables.append(r.text(0))
            }
            var copy = Report()
            try counts(db, tables: tables, into: &copy)
            guard copy.schemaVersion == snapshot.schemaVersion, copy.rides == snapshot.rides else {
                throw Failure(.checkFailed, "the copy holds schema \(copy.schemaVersion) and \(copy.rides) rides, the store's snapshot \(snapshot.schemaVersion) and \(snapshot.rides)")
            }
        } catch let e as Failure {
            throw e
        } catch {
            throw Failure(.checkFailed, "cannot check the copy: \(error)")
        }
    }

    /// Renames the checked copy over `destination` and makes the rename durable.
    private static func replace(_ destination: String, with partial: String, force: Bool) throws(Failure) {
        // A server on the destination holds its flock (SQLiteStore.lock): replacing a live
        // store's file under it would lose what it writes next, --force or not.
        let fd = open(destination, O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK {
                throw Failure(.destinationExists, "--to \(destination) is in use by a RidePush server; stop it first")
            }
        }
        // An old -wal or -journal beside the destination would be replayed into the new copy
        // by the next opener (and damage it): gone before the rename, or refused.
        for suffix in ["-wal", "-journal", "-shm"] {
            let side = destination + suffix
            guard access(side, F_OK) == 0 else { continue }
            guard force else {
                throw Failure(.destinationExists, "\(side) exists beside --to; remove it or give --force")
            }
            if unlink(side) != 0 && errno != ENOENT {
                throw Failure(.copyFailed, "cannot remove \(side): \(String(cString: strerror(errno)))")
            }
        }
        guard rename(partial, destination) == 0 else {
            throw Failure(.copyFailed, "cannot rename the copy to \(destination): \(String(cString: strerror(errno)))")
        }
        // The rename is an entry in the folder: durable once the folder is synced.
        let dir = open(directory(of: destination), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    private static func syncFile(_ path: String) throws(Failure) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(.copyFailed, "cannot open \(path) to sync it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        if fsync(fd) != 0 {
            let e = errno
            let why = String(cString: strerror(e))
            if e == ENOSPC || e == EDQUOT { throw Failure(.diskFull, "no room to write the copy \(path): \(why)") }
            throw Failure(.copyFailed, "cannot sync the copy \(path): \(why)")
        }
    }

    private static func removeFileAndSidecars(_ path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(path + suffix) }
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func pause(_ d: Duration) {
        let ns = d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        _ = nanosleep(&ts, nil)
    }
}
