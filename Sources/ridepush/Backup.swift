import Foundation
import RideOptions
import RideStoreSQLite

/// `ridepush backup`'s options, parsed and printed by `--help` from this table.
let backupOptions = OptionTable(usage: "usage: ridepush backup --store PATH --to FILE [--force] [--pages N]", about: """
    Copies a SQLite store to FILE while a server may be running on it: one consistent snapshot
    (SQLite's online backup API, N pages per step; the server's writes go on meanwhile), the
    webhook outbox with it. The copy is checked (SQLite's integrity check, the RidePush schema,
    the ride count) and renamed into place only then. Restore: docs/operations.md.
    """, options: [
    .string("--store", placeholder: "PATH", env: "RIDEPUSH_STORE", default: "./ridepush.db", help: "the SQLite store to copy (a PostgreSQL store is backed up with pg_dump or pgBackRest, docs/operations.md)"),
    .string("--to", placeholder: "FILE", help: "the copy; written beside it as FILE.PID.partial first, then renamed"),
    .flag("--force", help: "replace FILE if it exists (never the store itself, nor a file a running server holds)"),
    .int("--pages", range: 1...65536, default: 256, help: "pages copied per step"),
], footer: """
    exit status: 0 copied and checked; 1 the copy failed (I/O error, disk full, failed check;
    FILE untouched); 2 usage; 3 FILE exists (without --force) or a server holds it; 4 the store
    is missing or not a RidePush store.
    """)

func backupCommand(_ args: [String]) -> Int32 {
    let o: ParsedOptions
    do { o = try backupOptions.parse(args, environment: ProcessInfo.processInfo.environment) } catch {
        return usageFailure("ridepush backup", error)
    }
    if o.help { print(backupOptions.help, terminator: ""); return 0 }
    if let stray = o.positional.first { return usageFailure("ridepush backup", .unexpectedArgument(stray)) }
    let store = o.string("--store")!
    guard let to = o.string("--to") else { return fail("ridepush backup: give the copy's file with --to FILE") }
    if store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") {
        return fail("ridepush backup: --store is a PostgreSQL store; back it up with pg_dump or pgBackRest (docs/operations.md)")
    }
    if store == "memory" { return fail("ridepush backup: --store memory has nothing on disk to copy") }

    let options = SQLiteBackup.Options(pagesPerStep: Int32(o.int("--pages")!), force: o.flag("--force"))
    let r: SQLiteBackup.Report
    do {
        r = try SQLiteBackup.run(store: store, to: to, options: options)
    } catch {
        FileHandle.standardError.write(Data("ridepush backup: \(error.message)\n".utf8))
        return backupExitStatus(error.kind)
    }
    print(backupSummary(store: store, to: to, r))
    return 0
}

func backupExitStatus(_ kind: SQLiteBackup.Failure.Kind) -> Int32 {
    switch kind {
    case .copyFailed, .diskFull, .checkFailed: return 1
    case .destinationExists: return 3
    case .noStore, .notAStore, .newerSchema: return 4
    }
}

/// `ridepush backup: copied ./ridepush.db to b.db: 310 pages × 4096 B = 1.3 MB in 0.05 s (2 steps, …)`,
/// then what the copy holds: the figures a person checks a backup by.
func backupSummary(store: String, to: String, _ r: SQLiteBackup.Report) -> String {
    let mb = String(format: "%.1f MB", Double(r.bytes) / 1_000_000)
    let secs = String(format: "%.2f s", r.seconds)
    let outboxes = r.outboxes.map { "\($0.table) \($0.rows) rows" }.joined(separator: ", ")
    return """
        ridepush backup: copied \(store) to \(to): \(r.pages) pages × \(r.pageSize) B, \(mb) on disk, in \(secs) \
        (\(r.steps) steps, \(r.busyWaits) busy waits, \(r.restarts) restarts)
        ridepush backup: the copy holds schema \(r.schemaVersion), \(r.rides) rides (\(r.openRides) open)\
        \(outboxes.isEmpty ? "" : ", " + outboxes); integrity ok
        """
}
