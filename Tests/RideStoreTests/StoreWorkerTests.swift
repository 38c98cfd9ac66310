import Foundation
import Synchronization
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite
import RideStoreTesting

/// The worker thread's group commit, with a store whose commit blocks until the test lets it
/// go (bounded waits, no sleeps): what queues while a commit is in flight is the next group.
final class StoreWorkerTests: XCTestCase {
    /// Each job starts one ride; `finish` records each group's outcome (`settled`), `publish`
    /// reports it (`log`, `finished`). A job "?x" writes nothing and asks whether ride x exists.
    final class Starter: GroupCommitClient {
        typealias Job = String
        let finished = DispatchSemaphore(value: 0)
        let log = Mutex<[String]>([])
        let settled = Mutex<[String]>([])
        let settledOne = DispatchSemaphore(value: 0)
        private var group: [String] = []
        private var seen: [String] = []
        func prepare(_ jobs: [String], store: RideStore) -> [StoreWrite] {
            group = jobs
            seen = jobs.filter { $0.hasPrefix("?") }.map { q in
                let id = String(q.dropFirst())
                return "\(q)=\((try? store.ride(id)) != nil ? "yes" : "no")"
            }
            return jobs.filter { !$0.hasPrefix("?") }.map { .create(NewRide(id: $0, planID: "p", owner: nil, limit: nil, startedAt: 1), reply: nil) }
        }
        func finish(_ outcome: Result<[WriteResult], StoreError>, store: RideStore) -> String {
            let line: String
            switch outcome {
            case .success(let r) where r.isEmpty: line = seen.joined(separator: ",")
            case .success(let r): line = group.joined(separator: ",") + ": " + r.map { $0 == .written ? "w" : "r" }.joined()
            case .failure(let e): line = group.joined(separator: ",") + ": " + e.kind.rawValue
            }
            settled.withLock { $0.append(line) }
            settledOne.signal()
            return line
        }
        func publish(_ line: String) {
            log.withLock { $0.append(line) }
            finished.signal()
        }
    }

    func testWhatQueuesDuringACommitGoesIntoTheNextOneTogether() throws {
        let store = GatedStore()
        let client = Starter()
        let worker = StoreWorker(store: store, client: client) { _ in XCTFail("not fatal") }
        worker.start()
        worker.submit("a")
        XCTAssertEqual(store.entered.wait(timeout: .now() + 10), .success)  // "a" is committing
        worker.submit(["b", "c"])
        worker.submit("d")
        worker.submit("a")  // refused by the store alone: the others still commit
        store.gate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(store.entered.wait(timeout: .now() + 10), .success)
        store.gate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: w", "b,c,d,a: wwwr"])
        XCTAssertEqual(store.sizes, [1, 4])
        XCTAssertEqual(worker.commits.load(ordering: .relaxed), 2)
        XCTAssertEqual(worker.writes.load(ordering: .relaxed), 5)
        XCTAssertEqual(try store.inner.openRides().map(\.id), ["a", "b", "c", "d"])
        worker.stop()
    }

    func testAFailedCommitIsReportedAndAnUnknownOneIsFatal() throws {
        let store = GatedStore()
        let client = Starter()
        let fatal = FatalProbe()
        let worker = StoreWorker(store: store, client: client, fatal: fatal.record)
        worker.start()
        store.failWith = StoreError(.unavailable, "disk full")
        worker.submit("a")
        store.gate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: unavailable"])
        store.failWith = StoreError(.commitFailed, "fsync: I/O error")
        worker.submit("b")
        store.gate.signal()
        XCTAssertEqual(fatal.hit.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fatal.kind.withLock { $0 }, .commitFailed)
        XCTAssertEqual(client.log.withLock { $0 }.count, 1, "no one is answered after a commit of unknown fate")
    }

    func testTheSyncRunsBesideTheNextGroupsAndNobodyIsToldBeforeIt() throws {
        let store = DeferringStore()
        let client = Starter()
        let worker = StoreWorker(store: store, client: client) { _ in XCTFail("not fatal") }
        worker.start()
        worker.submit("a")
        XCTAssertEqual(store.written.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(store.syncEntered.wait(timeout: .now() + 10), .success)  // a's sync is in flight
        // Written and decided while that sync waits; a group that only reads sees a (written,
        // not yet durable) but must wait its turn too.
        worker.submit(["b", "c"])
        XCTAssertEqual(store.written.wait(timeout: .now() + 10), .success)
        worker.submit("?a")
        for _ in 0..<3 { XCTAssertEqual(client.settledOne.wait(timeout: .now() + 10), .success) }
        XCTAssertEqual(client.settled.withLock { $0 }, ["a: w", "b,c: ww", "?a=yes"])
        XCTAssertEqual(client.log.withLock { $0 }, [], "nothing is told before its sync")
        store.syncGate.signal()  // a is durable
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: w"])
        XCTAssertEqual(store.syncEntered.wait(timeout: .now() + 10), .success)  // one sync for b,c (and ?a behind it)
        store.syncGate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: w", "b,c: ww", "?a=yes"])
        XCTAssertEqual(store.sizes, [1, 2])
        XCTAssertEqual(worker.syncs.load(ordering: .relaxed), 2)
        // Nothing written since the last sync: a read-only group is published without one.
        worker.submit("?z")
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0.last }, "?z=no")
        XCTAssertEqual(worker.syncs.load(ordering: .relaxed), 2)
        worker.stop()
    }

    func testAFailedSyncIsFatalAndNobodyIsTold() throws {
        let store = DeferringStore()
        let client = Starter()
        let fatal = FatalProbe()
        let worker = StoreWorker(store: store, client: client, fatal: fatal.record)
        worker.start()
        store.syncFailure.withLock { $0 = StoreError(.commitFailed, "fdatasync: EIO") }
        worker.submit("a")
        XCTAssertEqual(store.syncEntered.wait(timeout: .now() + 10), .success)
        store.syncGate.signal()
        XCTAssertEqual(fatal.hit.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fatal.kind.withLock { $0 }, .commitFailed)
        XCTAssertEqual(client.settled.withLock { $0 }, ["a: w"])
        XCTAssertEqual(client.log.withLock { $0 }, [], "a group whose sync failed is told to nobody")
    }

    /// A `fatal` handler that records the error's kind.
    final class FatalProbe: Sendable {
        let hit = DispatchSemaphore(value: 0)
        let kind = Mutex<StoreError.Kind?>(nil)
        func record(_ e: StoreError) {
            kind.withLock { $0 = e.kind }
            hit.signal()
        }
    }
}
