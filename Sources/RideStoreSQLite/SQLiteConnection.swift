import CSQLite
import Foundation
import RideStore

/// A value bound to a statement parameter.
enum SQLValue {
    case int(Int64)
    case text(String)
    case blob([UInt8])
    case null

    static func int(_ v: Int64?) -> SQLValue { v.map { .int($0) } ?? .null }
    static func text(_ v: String?) -> SQLValue { v.map { .text($0) } ?? .null }
}

/// One result row, valid only inside the `query` callback that received it.
struct SQLRow {
    let stmt: OpaquePointer
    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }
    func int(_ i: Int32) -> Int64 { sqlite3_column_int64(stmt, i) }
    func optionalInt(_ i: Int32) -> Int64? { isNull(i) ? nil : int(i) }
    func text(_ i: Int32) -> String {
        // By length, not C string: a text value may hold a NUL.
        guard let p = sqlite3_column_text(stmt, i) else { return "" }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
    func optionalText(_ i: Int32) -> String? { isNull(i) ? nil : text(i) }
    func blob(_ i: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(stmt, i))  // call after _blob per the SQLite docs
        guard n > 0, let p = sqlite3_column_blob(stmt, i) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}

/// A statement prepared once and kept by its user (the connection still owns and finalizes
/// it): run through `query(_:bind:row:)` without looking its SQL text up each time.
struct SQLStatement {
    fileprivate let stmt: OpaquePointer
    let sql: String
}

/// Binds a statement's parameters in order (1, 2, 3…) straight from the caller's values, with
/// no array of `SQLValue`s built per run. Texts and blobs are copied by SQLite (TRANSIENT).
struct SQLBinder {
    fileprivate let stmt: OpaquePointer
    fileprivate var next: Int32 = 1
    /// The first failure, reported by `query` after `bind` returns.
    fileprivate var rc: Int32 = SQLITE_OK

    mutating func int(_ v: Int64) { done(sqlite3_bind_int64(stmt, next, v)) }
    mutating func int(_ v: Int64?) { if let v { int(v) } else { null() } }
    mutating func null() { done(sqlite3_bind_null(stmt, next)) }
    mutating func text(_ v: String?) {
        guard var s = v else { return null() }
        // By length (a value may hold a NUL); no copy for a native string. An empty buffer
        // may have no address, and a NULL pointer would bind NULL.
        let i = next
        done(s.isEmpty ? csqlite_bind_text(stmt, i, "", 0)
             : s.withUTF8 { buf in csqlite_bind_text(stmt, i, buf.baseAddress, Int32(buf.count)) })
    }
    mutating func blob(_ b: [UInt8]) {
        let i = next
        // An empty array must still bind a (zero-length) blob, not NULL.
        done(b.isEmpty ? sqlite3_bind_zeroblob(stmt, i, 0)
             : b.withUnsafeBytes { csqlite_bind_blob(stmt, i, $0.baseAddress, Int32($0.count)) })
    }

    private mutating func done(_ r: Int32) {
        if rc == SQLITE_OK { rc = r }
        next += 1
    }
}

/// A thin SQLite connection: prepared statements are cached by their SQL text (prepared once,
/// reset after each use), and every failure becomes a `StoreError` naming the file.
/// Single-threaded (opened with SQLITE_OPEN_NOMUTEX), like the store that owns it.
final class SQLiteConnection {
    let path: String
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// Keeps the WAL hook's closure alive while SQLite holds a pointer to it.
    private var logHook: LogHook?
    /// Whether the latest failure was an I/O error (an fsync that failed, a bad sector), which
    /// at COMMIT leaves the transaction's fate unknown.
    private(set) var lastFailureWasIO = false

    /// Opens (creating if missing) the file read-write. Fails on a directory, an unwritable
    /// location or a file SQLite can only open read-only. `readOnly` opens an existing file
    /// for reading only (the backup's source: it must never write to a live store).
    init(path: String, readOnly: Bool = false) throws(StoreError) {
        self.path = path
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
            throw StoreError(.unavailable, "ride store \(path): is a directory, not a database file")
        }
        _ = Self.configured
        var handle: OpaquePointer?
        let flags = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        let rc = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw StoreError(.unavailable, "ride store \(path): cannot open (\(msg)); check that the directory exists and is writable")
        }
        db = handle
        sqlite3_extended_result_codes(handle, 1)
        // SQLite's default pool (40 slots of 1,200 bytes) runs out inside one multi-row
        // statement of a group; past it every cursor and value goes to malloc.
        _ = csqlite_db_lookaside(handle, 1200, 512)
        // SQLite silently falls back to read-only when the file is not writable; every write
        // would then fail later, so refuse now, at start.
        if !readOnly && sqlite3_db_readonly(handle, "main") == 1 {
            close()
            throw StoreError(.unavailable, "ride store \(path): file is not writable")
        }
    }

    deinit { close() }

    /// Once per process, before the first open (a failure only means someone configured first).
    private static let configured: Void = { _ = csqlite_config_no_memstatus() }()

    var isOpen: Bool { db != nil }

    /// The sqlite3 handle, for the calls this wrapper does not cover (the backup API); nil once closed.
    var rawHandle: OpaquePointer? { db }

    func close() {
        if let db, logHook != nil { sqlite3_wal_hook(db, nil, nil) }
        logHook = nil
        for (_, s) in statements { sqlite3_finalize(s) }
        statements = [:]
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// Copies what it can of the WAL into the database file without blocking any writer or
    /// reader (PASSIVE), and returns how many frames the log held and how many of them are now
    /// in the file. Busy (another checkpoint running) is not a failure: that one copies.
    @discardableResult
    func checkpoint() throws(StoreError) -> (log: Int32, copied: Int32) {
        let db = try handle()
        var log: Int32 = 0, copied: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
        if rc != SQLITE_OK && rc & 0xff != SQLITE_BUSY {
            throw error(rc, currentMessage(rc), doing: "checkpoint")
        }
        return (log, copied)
    }

    /// Calls `body` with the log's size in pages after every commit, on the committing thread.
    /// Replaces SQLite's own autocheckpoint (which is that hook).
    func onCommit(_ body: @escaping (Int32) -> Void) throws(StoreError) {
        let db = try handle()
        let hook = LogHook(body)
        logHook = hook
        sqlite3_wal_hook(db, { ctx, _, _, pages in
            Unmanaged<LogHook>.fromOpaque(ctx!).takeUnretainedValue().body(pages)
            return SQLITE_OK
        }, Unmanaged.passUnretained(hook).toOpaque())
    }

    private final class LogHook {
        let body: (Int32) -> Void
        init(_ body: @escaping (Int32) -> Void) { self.body = body }
    }

    /// Runs SQL text that may hold several statements, no parameters (pragmas, DDL, BEGIN…).
    func exec(_ sql: String) throws(StoreError) {
        let db = try handle()
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(err)
            throw error(rc, msg, doing: sql)
        }
    }

    /// Runs one statement, calling `row` for each result row.
    func query(_ sql: String, _ binds: [SQLValue] = [], row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        let stmt = try prepared(sql)
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        try bind(binds, to: stmt, sql: sql)
        try steps(stmt, sql: sql, row: row)
    }

    /// The statement for `sql`, prepared now or taken from the cache.
    func statement(_ sql: String) throws(StoreError) -> SQLStatement {
        SQLStatement(stmt: try prepared(sql), sql: sql)
    }

    /// Runs a kept statement: `bind` sets its parameters, `row` sees each result row.
    func query(_ s: SQLStatement, bind: (inout SQLBinder) -> Void, row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        _ = try handle()  // closed: the statement is finalized
        let stmt = s.stmt
        defer { sqlite3_reset(stmt) }
        var binder = SQLBinder(stmt: stmt)
        bind(&binder)
        if binder.rc != SQLITE_OK { throw error(binder.rc, currentMessage(binder.rc), doing: s.sql) }
        try steps(stmt, sql: s.sql, row: row)
    }

    /// Steps a bound statement to its end, calling `row` for each result row.
    private func steps(_ stmt: OpaquePointer, sql: String, row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_ROW {
                try row(SQLRow(stmt: stmt))
            } else if rc == SQLITE_DONE {
                return
            } else {
                throw error(rc, currentMessage(rc), doing: sql)
            }
        }
    }

    /// Runs one statement that returns no rows (or whose rows don't matter).
    func run(_ sql: String, _ binds: [SQLValue] = []) throws(StoreError) {
        try query(sql, binds) { (_: SQLRow) throws(StoreError) in }
    }

    /// Rows the latest INSERT/UPDATE/DELETE changed (0 when ON CONFLICT DO NOTHING skipped it).
    var changes: Int32 {
        guard let db else { return 0 }
        return sqlite3_changes(db)
    }

    /// The first column of the first row, as text (pragma results).
    func scalarText(_ sql: String) throws(StoreError) -> String? {
        var out: String?
        try query(sql) { (r: SQLRow) throws(StoreError) in if out == nil { out = r.optionalText(0) } }
        return out
    }

    /// Whether the connection is outside any transaction (SQLite rolls some failures back
    /// itself, e.g. SQLITE_FULL in some cases, after which ROLLBACK would be an error).
    var inTransaction: Bool {
        guard let db else { return false }
        return sqlite3_get_autocommit(db) == 0
    }

    /// The `StoreError` for a failed call: the kind the server acts on, and a message naming
    /// the file, what failed and SQLite's own words.
    func error(_ rc: Int32, _ message: String, doing sql: String) -> StoreError {
        lastFailureWasIO = rc & 0xff == SQLITE_IOERR
        let kind: StoreError.Kind
        switch rc & 0xff {
        case SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_FORMAT: kind = .corrupt
        case SQLITE_CONSTRAINT: kind = .conflict
        default: kind = .unavailable  // FULL, IOERR, CANTOPEN, READONLY, BUSY, LOCKED, NOMEM, …
        }
        let what = sql.split(whereSeparator: \.isWhitespace).prefix(3).joined(separator: " ")
        return StoreError(kind, "ride store \(path): \(message) (SQLite code \(rc), during \(what))")
    }

    // MARK: private

    private func handle() throws(StoreError) -> OpaquePointer {
        guard let db else { throw StoreError(.unavailable, "ride store \(path): closed") }
        return db
    }

    private func currentMessage(_ rc: Int32) -> String {
        guard let db else { return String(cString: sqlite3_errstr(rc)) }
        return String(cString: sqlite3_errmsg(db))
    }

    private func prepared(_ sql: String) throws(StoreError) -> OpaquePointer {
        if let s = statements[sql] { return s }
        let db = try handle()
        var stmt: OpaquePointer?
        // PERSISTENT: these live for the whole connection, so let SQLite allocate accordingly.
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            throw error(rc, currentMessage(rc), doing: sql)
        }
        statements[sql] = stmt
        return stmt
    }

    private func bind(_ values: [SQLValue], to stmt: OpaquePointer, sql: String) throws(StoreError) {
        for (n, v) in values.enumerated() {
            let i = Int32(n + 1)
            let rc: Int32
            switch v {
            case .int(let x): rc = sqlite3_bind_int64(stmt, i, x)
            case .null: rc = sqlite3_bind_null(stmt, i)
            case .text(var s):
                // By length (a value may hold a NUL); no copy for a native string.
                // An empty buffer may have no address, and a NULL pointer would bind NULL.
                rc = s.isEmpty ? csqlite_bind_text(stmt, i, "", 0)
                    : s.withUTF8 { buf in csqlite_bind_text(stmt, i, buf.baseAddress, Int32(buf.count)) }
            case .blob(let b):
                // An empty array must still bind a (zero-length) blob, not NULL.
                rc = b.isEmpty ? sqlite3_bind_zeroblob(stmt, i, 0)
                    : b.withUnsafeBytes { csqlite_bind_blob(stmt, i, $0.baseAddress, Int32($0.count)) }
            }
            if rc != SQLITE_OK { throw error(rc, currentMessage(rc), doing: sql) }
        }
    }
}
