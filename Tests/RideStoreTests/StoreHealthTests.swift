import Foundation
import Synchronization
import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite
import RideStoreTesting

/// The store's own record of itself (StoreHealth): staleness of a group or sync in flight,
/// and the worker's probe of a failing store on a backoff, all on a clock stepped by hand.
final class StoreHealthTests: XCTestCase {
    func testStalledOnlyPastTheBoundFailingUntilTheNextSuccess() {
        var r = StoreHealthReport()
        XCTAssertEqual(r.state(now: 10_000, stallMillis: 5_000), .ok)
        r.commitSince = 4_000
        XCTAssertEqual(r.state(now: 9_000, stallMillis: 5_000), .ok, "in flight exactly 5 s is not yet a stall")
        XCTAssertEqual(r.state(now: 9_001, stallMillis: 5_000), .stalled)
        r.commitSince = nil
        r.syncSince = 1_000
        XCTAssertEqual(r.state(now: 6_001, stallMillis: 5_000), .stalled)
        r.syncSince = nil
        r.failing = true
        XCTAssertEqual(r.state(now: 300, stallMillis: 5_000), .failing)
        r.failing = false
        XCTAssertEqual(r.state(now: 300, stallMillis: 5_000), .ok)
        // A stall outranks a failure: the store is not even answering.
        r.failing = true
        r.commitSince = 0
        XCTAssertEqual(r.state(now: 6_000, stallMillis: 5_000), .stalled)
    }

    func testAFailingStoreIsProbedOnABackoffAndHealthyAgainWithoutAnyWrite() {
        let clock = ManualClock(0)
        let changes = HealthChanges()
        let health = StoreHealth(clock: { clock.now() }, changed: changes.signal)
        let store = FlakyStore()
        let client = StoreWorkerTests.Starter()
        let worker = StoreWorker(store: store, client: client, health: health) { _ in XCTFail("not fatal") }
        worker.start()
        defer { worker.stop() }
        XCTAssertEqual(health.state(stallMillis: 5_000), .ok)
        store.commitFails.store(true, ordering: .sequentiallyConsistent)
        worker.submit("a")
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(health.state(stallMillis: 5_000), .failing)
        XCTAssertEqual(health.snapshot.lastFailureMessage, "disk full")
        XCTAssertEqual(worker.probes.load(ordering: .relaxed), 0, "no probe before the first backoff passed")

        // 250 ms: the first probe, which fails; the next is due 500 ms later.
        clock.advance(millis: StoreWorker<StoreWorkerTests.Starter>.firstProbeMillis)
        worker.nudge()
        XCTAssertEqual(store.probed.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(worker.probes.load(ordering: .relaxed), 1)
        XCTAssertTrue(changes.wait { health.snapshot.lastFailureMessage == "still down" })
        XCTAssertEqual(health.state(stallMillis: 5_000), .failing)
        clock.advance(millis: 499)
        worker.nudge()
        XCTAssertEqual(store.probed.wait(timeout: .now() + 0.3), .timedOut, "not before its backoff")
        // The store is back: the probe due at +500 sees it, and no client wrote anything.
        store.probeFails.store(false, ordering: .sequentiallyConsistent)
        clock.advance(millis: 1)
        worker.nudge()
        XCTAssertEqual(store.probed.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(worker.probes.load(ordering: .relaxed), 2)
        XCTAssertTrue(changes.wait { health.state(stallMillis: 5_000) == .ok })
        XCTAssertEqual(worker.commits.load(ordering: .relaxed), 0)
        // Healthy: no more probes however long it idles.
        clock.advance(millis: 60_000)
        worker.nudge()
        XCTAssertEqual(store.probed.wait(timeout: .now() + 0.3), .timedOut)
    }

    func testAGroupInFlightPastTheBoundIsStalledAndOkOnceItReturns() {
        let clock = ManualClock(0)
        let health = StoreHealth { clock.now() }
        let faults = ScriptedFaults()
        let client = StoreWorkerTests.Starter()
        let worker = StoreWorker(store: FlakyStore(), client: client, faults: faults, health: health) { _ in XCTFail("not fatal") }
        worker.start()
        defer { worker.stop() }
        faults.holdCommits(true)
        worker.submit("a")
        XCTAssertEqual(faults.commitHeld.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(health.snapshot.commitSince, 0)
        clock.advance(millis: 5_000)
        XCTAssertEqual(health.state(stallMillis: 5_000), .ok)
        clock.advance(millis: 1)
        XCTAssertEqual(health.state(stallMillis: 5_000), .stalled)
        faults.holdCommits(false)
        faults.releaseCommit()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(client.log.withLock { $0 }, ["a: w"])
        XCTAssertEqual(health.state(stallMillis: 5_000), .ok)
        XCTAssertNil(health.snapshot.commitSince)
        XCTAssertEqual(health.snapshot.lastSuccess, 5_001)
    }

    func testAnInjectedCommitFailureIsFatalAndTellsNobody() {
        let faults = ScriptedFaults()
        let client = StoreWorkerTests.Starter()
        let fatal = StoreWorkerTests.FatalProbe()
        let worker = StoreWorker(store: FlakyStore(), client: client, faults: faults, fatal: fatal.record)
        worker.start()
        faults.failCommits(with: StoreError(.commitFailed, "injected"))
        worker.submit("a")
        XCTAssertEqual(fatal.hit.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fatal.kind.withLock { $0 }, .commitFailed)
        XCTAssertEqual(client.log.withLock { $0 }, [])
    }

    func testEnvironmentFaultsAreOffUnlessAskedForAndFollowTheirFile() throws {
        XCTAssertNil(StoreFaults.fromEnvironment([:]))
        #if !DEBUG
        throw XCTSkip("release builds read no faults from the environment")
        #endif
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("faults-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let gate = dir.appendingPathComponent("fail").path
        let f = try XCTUnwrap(StoreFaults.fromEnvironment(["RIDEPUSH_TEST_FAIL_SYNCS_WHILE": gate]))
        XCTAssertNil(f.syncFailure())
        XCTAssertTrue(FileManager.default.createFile(atPath: gate, contents: nil))
        XCTAssertEqual(f.syncFailure()?.kind, .commitFailed)
        XCTAssertNil(f.commitFailure())
    }

    func testASyncInFlightPastTheBoundIsStalled() {
        let clock = ManualClock(0)
        let health = StoreHealth { clock.now() }
        let store = DeferringStore()
        let client = StoreWorkerTests.Starter()
        let worker = StoreWorker(store: store, client: client, health: health) { _ in XCTFail("not fatal") }
        worker.start()
        defer { worker.stop() }
        worker.submit("a")
        XCTAssertEqual(store.syncEntered.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(health.snapshot.syncSince, 0)
        XCTAssertNil(health.snapshot.commitSince, "the group itself is written; only its sync waits")
        clock.advance(millis: 5_001)
        XCTAssertEqual(health.state(stallMillis: 5_000), .stalled)
        store.syncGate.signal()
        XCTAssertEqual(client.finished.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(health.state(stallMillis: 5_000), .ok)
    }

}

/// The worker records a probe's verdict just after the store answered it (and signalled the
/// test): the test waits for that change on a condition the health signals after each change.
final class HealthChanges: @unchecked Sendable {  // no state of its own beyond the condition
    private let condition = NSCondition()

    var signal: @Sendable () -> Void {
        { [condition] in
            condition.lock()
            condition.broadcast()
            condition.unlock()
        }
    }

    /// True once `holds` is true, checked after each change; false if 10 s pass without.
    func wait(_ holds: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: 10)
        condition.lock()
        defer { condition.unlock() }
        while !holds() {
            guard condition.wait(until: deadline) else { return holds() }
        }
        return true
    }
}
