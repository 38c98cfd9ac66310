import Foundation
import Synchronization
import XCTest
import RideCore
@testable import RideStore

/// The worker thread's group commit, with a store whose commit blocks until the test lets it
/// go (bounded waits, no sleeps): what queues while a commit is in flight is the next group.
final class StoreWorkerTests: XCTestCase {
    /// Commits wait on `gate`; each commit's size is recorded.
    final class GatedStore: RideStore {
        let inner = MemoryStore()
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        var sizes: [Int] = []
        var failWith: StoreError?
        func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
            entered.signal()
            gate.wait()
            sizes.append(batch.count)
            if let e = failWith { throw e }
            return try inner.commit(batch)
        }
        func openRides() throws(StoreError) -> [StoredRide] { try inner.openRides() }
        func ride(_ id: String) throws(StoreError) -> StoredRide? { try inner.ride(id) }
        func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? { try inner.reply(for: key) }
        func prune(repliesBefore instant: UnixMillis) throws(StoreError) {}
        func close() { inner.close() }
    }

    /// Each job starts one ride; `finish` reports what happened to each group.
    final class Starter: GroupCommitClient {
        typealias Job = String
        let finished = DispatchSemaphore(value: 0)
        let log = Mutex<[String]>([])
        private var group: [String] = []
        func prepare(_ jobs: [String], store: RideStore) -> [StoreWrite] {
            group = jobs
            return jobs.map { .create(NewRide(id: $0, planID: "p", owner: nil, limit: nil, startedAt: 1), reply: nil) }
        }
        func finish(_ outcome: Result<[WriteResult], StoreError>, store: RideStore) {
            let line: String
            switch outcome {
            case .success(let r): line = group.joined(separator: ",") + ": " + r.map { $0 == .written ? "w" : "r" }.joined()
            case .failure(let e): line = group.joined(separator: ",") + ": " + e.kind.rawValue
            }
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
        let fatal = DispatchSemaphore(value: 0)
        let fatalKind = Mutex<StoreError.Kind?>(nil)
        let worker = StoreWorker(store: store, client: client) { e in
            fatalKind.withLock { $0 = e.kind }
            fatal.signal()
        }
        worker.start()
        store.failWith = StoreError(.unavailable, "disk full")
        worker.submit("a")
        store.gate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: unavailable"])
        store.failWith = StoreError(.commitFailed, "fsync: I/O error")
        worker.submit("b")
        store.gate.signal()
        XCTAssertEqual(fatal.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fatalKind.withLock { $0 }, .commitFailed)
        XCTAssertEqual(client.log.withLock { $0 }.count, 1, "no one is answered after a commit of unknown fate")
    }
}
