import Foundation
import Synchronization
import XCTest
import RideCore
@testable import RideStore
@testable import RideStoreSQLite

/// `SQLiteBackup` on real files: a copy made while another connection commits, and the
/// refusals that keep a backup from overwriting what it must not.
final class SQLiteBackupTests: StoreDirectoryTestCase {
    var copyPath: String { dir.appendingPathComponent("copy.db").path }

    /// The store is used by one thread at a time (it is not thread-safe): the test's until
    /// the writer thread starts, the writer's after.
    final class Handoff: @unchecked Sendable {
        let store: SQLiteStore
        init(_ store: SQLiteStore) { self.store = store }
    }

    func testACopyMadeWhileAnotherConnectionWritesHoldsEveryRideCommittedBefore() throws {
        let store = try SQLiteStore(path: path)
        // Enough rides (each with two outbox rows) for the copy to take many steps of 2 pages.
        let before = (0..<400).map { "before-\($0)" }
        for chunk in stride(from: 0, to: before.count, by: 50) {
            _ = try store.commit(before[chunk..<min(chunk + 50, before.count)].map { start($0) })
        }
        _ = try store.commit([step("before-0", 2, .pause(at: t0 + 1_000))])

        // Another connection commits in a loop (bounded) while the backup steps.
        let handoff = Handoff(store)
        let committed = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let writerDone = DispatchSemaphore(value: 0)
        let writer = Thread {
            for i in 0..<2_000 where !stop.load(ordering: .relaxed) {
                do {
                    _ = try handoff.store.commit([start("during-\(i)", at: t0 + Int64(i))])
                    committed.add(1, ordering: .relaxed)
                } catch {
                    break  // seen as too few commits below
                }
            }
            writerDone.signal()
        }
        writer.start()

        var options = SQLiteBackup.Options(pagesPerStep: 2)
        options.maxRestarts = 0  // the snapshot held across steps means no restart at all
        var duringBackup = 0
        let report = try SQLiteBackup.run(store: path, to: copyPath, options: options) { progress in
            guard progress.step == 1 else { return }
            // Let the writer commit between steps, so the copy's snapshot is overtaken.
            let at = committed.load(ordering: .relaxed)
            waitUntil(timeout: 5, "20 commits by the writer between two backup steps") { committed.load(ordering: .relaxed) >= at + 20 }
            duringBackup = committed.load(ordering: .relaxed) - at
        }
        stop.store(true, ordering: .relaxed)
        XCTAssertEqual(writerDone.wait(timeout: .now() + 30), .success)
        store.close()

        XCTAssertGreaterThanOrEqual(duringBackup, 20, "the writer committed while the backup was between steps")
        XCTAssertGreaterThan(report.steps, 10)
        XCTAssertEqual(report.restarts, 0)
        XCTAssertGreaterThanOrEqual(report.rides, Int64(before.count))
        XCTAssertLessThan(report.rides, Int64(before.count + committed.load(ordering: .relaxed)),
                          "the copy is the snapshot from before the writes between steps")
        XCTAssertEqual(report.schemaVersion, Schema.current)
        XCTAssertEqual(report.outboxes.first { $0.table == "webhook_outbox" }?.rows, report.rides * 2 + 2)
        XCTAssertFalse(FileManager.default.fileExists(atPath: copyPath + "-wal"), "the copy is one file")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".partial") }, [])

        let copy = try SQLiteStore(path: copyPath)
        defer { copy.close() }
        for id in before {
            XCTAssertNotNil(try copy.ride(id), id)
        }
        XCTAssertEqual(try copy.ride("before-0")?.journal, [.start(at: t0), .pause(at: t0 + 1_000)])
        let inCopy = try copy.rides(.byStart(after: nil), limit: 100_000).count
        XCTAssertEqual(Int64(inCopy), report.rides)
    }

    func testRefusesAnExistingCopyWithoutForceAndReplacesItWithForce() throws {
        let store = try SQLiteStore(path: path)
        _ = try store.commit([start("r-1")])
        try Data("an older backup".utf8).write(to: URL(fileURLWithPath: copyPath))

        XCTAssertEqual(refusal(path, copyPath), .destinationExists)
        XCTAssertEqual(try String(contentsOfFile: copyPath, encoding: .utf8), "an older backup", "left untouched")

        let report = try SQLiteBackup.run(store: path, to: copyPath, options: .init(force: true))
        XCTAssertEqual(report.rides, 1)
        store.close()
        let copy = try SQLiteStore(path: copyPath)
        XCTAssertNotNil(try copy.ride("r-1"))
        copy.close()
    }

    func testNeverReplacesTheStoreItselfNorAFileAServerHolds() throws {
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        _ = try store.commit([start("r-1")])
        XCTAssertEqual(refusal(path, path, force: true), .destinationExists)
        XCTAssertEqual(refusal(path, path + "-wal", force: true), .destinationExists)

        // Another store, open (as a server would hold it): --force must not swap its file.
        let live = try SQLiteStore(path: copyPath)
        defer { live.close() }
        XCTAssertEqual(refusal(path, copyPath, force: true), .destinationExists)
        XCTAssertNil(try live.ride("r-1"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".partial") }, [])
    }

    func testRefusesAMissingStoreAndFilesThatAreNotRidePushStores() throws {
        XCTAssertEqual(refusal(path, copyPath), .noStore)

        try Data("just some text, not a database at all".utf8).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(refusal(path, copyPath), .notAStore)

        try FileManager.default.removeItem(atPath: path)
        let other = try SQLiteConnection(path: path)
        try other.exec("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)")
        other.close()
        XCTAssertEqual(refusal(path, copyPath), .notAStore)

        XCTAssertFalse(FileManager.default.fileExists(atPath: copyPath))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".partial") }, [])
    }

    /// The kind of failure a backup of `store` to `to` ends in; nil (a test failure) if it succeeds.
    func refusal(_ store: String, _ to: String, force: Bool = false,
                 file: StaticString = #filePath, line: UInt = #line) -> SQLiteBackup.Failure.Kind? {
        do throws(SQLiteBackup.Failure) {
            let r = try SQLiteBackup.run(store: store, to: to, options: .init(force: force))
            XCTFail("backup succeeded (\(r.rides) rides) but should have been refused", file: file, line: line)
            return nil
        } catch {
            return error.kind
        }
    }
}
