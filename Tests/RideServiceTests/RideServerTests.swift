import RideCore
import RideServiceTesting
import RideStore
import RideStoreTesting
@testable import RideService
import XCTest

/// RideServer, the face the adapter reaches: admission per address, the drain, and the
/// /healthz, /metrics and /plans documents it answers with, without a socket or a thread
/// (the store worker is made but never started).
final class RideServerTests: XCTestCase {
    private func server(_ configure: (inout ServerConfig) -> Void = { _ in }) -> RideServer {
        var config = ServerConfig()
        configure(&config)
        let clock = ManualClock(1_700_000_000_000)
        let metrics = Metrics(), ops = OpsFeed(threads: 2, pre: EmbeddedService.headroom)
        let registry = RideRegistry(plans: config.plans, shards: 2, clock: clock, metrics: metrics, ops: ops, pre: EmbeddedService.headroom)
        let coordinator = StoreCoordinator(book: RideBook(plans: config.plans), registry: registry, clock: clock, metrics: metrics) { _, _ in }
        let worker = StoreWorker(store: FlakyStore(), client: coordinator) { _ in XCTFail("not fatal") }
        return RideServer(config: config, clock: clock, metrics: metrics, registry: registry, ops: ops, verifier: nil, signer: nil,
                          publicDir: "/srv/public", webhookDesk: nil, worker: worker,
                          parts: RideServer.Parts(geoCounters: GeoDesk(zones: nil, clock: clock).counters), threads: 2,
                          build: ("9.9.9", "abc123"))
    }

    func testEachAddressIsAdmittedUpToItsLimitAndReleasedOneByOne() {
        let s = server { $0.maxConnectionsPerIP = 2 }
        XCTAssertTrue(s.admit("10.0.0.1"))
        XCTAssertTrue(s.admit("10.0.0.1"))
        XCTAssertFalse(s.admit("10.0.0.1"), "the third from one address")
        XCTAssertTrue(s.admit("10.0.0.2"), "another address has its own count")
        s.release("10.0.0.1")
        XCTAssertTrue(s.admit("10.0.0.1"), "a place freed is taken again")
        XCTAssertFalse(s.admit("10.0.0.1"))
        s.release("10.0.0.9")  // never admitted: nothing to give back, nothing goes negative
        XCTAssertTrue(s.admit("10.0.0.9"))
    }

    func testTheDrainBeginsOnceAndHealthSaysSo() throws {
        let s = server()
        XCTAssertEqual(try JSON.parse(s.health().json)["version"]?.string, "9.9.9")
        XCTAssertTrue(s.beginDrain(seconds: 30))
        XCTAssertFalse(s.beginDrain(seconds: 5), "a second call changes nothing")
        XCTAssertEqual(s.drainMillis.load(ordering: .relaxed), 30_000)
        let (ok, json) = s.health()
        XCTAssertFalse(ok)
        XCTAssertEqual(try JSON.parse(json)["status"]?.string, "draining")
    }

    func testAStalledTickerOrThreadIsNotHealthy() throws {
        let s = server()
        s.lastTick.store(monotonicMillis() - 60_000, ordering: .relaxed)
        XCTAssertFalse(s.health().ok, "the ticker has not ticked for a minute")
        s.lastTick.store(monotonicMillis(), ordering: .relaxed)
        s.threads[1].lastLoop.store(monotonicMillis() - 60_000, ordering: .relaxed)
        XCTAssertFalse(s.health().ok, "thread 1 has not looped for a minute")
        s.threads[1].connections.store(3, ordering: .relaxed)
        XCTAssertEqual(try JSON.parse(s.health().json)["connections_per_thread"]?.array?.compactMap(\.int), [0, 3])
    }

    func testMetricsTextCarriesTheBuildAndOnlyTheProcessFiguresRead() {
        let s = server()
        let read = s.metricsText(process: ProcessFigures(openFiles: 12, maxFiles: nil, residentBytes: 4096, startTime: nil))
        XCTAssertTrue(read.contains("ridepush_build_info{version=\"9.9.9\",commit=\"abc123\"} 1"), read)
        XCTAssertTrue(read.contains("process_open_fds 12"), read)
        XCTAssertTrue(read.contains("process_resident_memory_bytes 4096"), read)
        XCTAssertFalse(read.contains("process_max_fds"), "omitted, not faked, where it could not be read")
        XCTAssertFalse(read.contains("ridepush_store_up"), "no shared store: no store or listener gauges")
    }

    func testThePlansDocumentIsGBFSAndTheTimersFollowTheConfig() throws {
        let s = server { $0.keepalive = 40 }
        let plans = try JSON.parse(s.plansDocument())
        XCTAssertEqual(plans["last_updated"]?.string, "2023-11-14T22:13:20Z", "the clock at start, RFC 3339 as GBFS v3 wants")
        XCTAssertNotNil(plans["data"]?["plans"]?.array)
        XCTAssertEqual(s.connectionTimers.keepaliveMillis, 40_000)
        XCTAssertFalse(s.connectionTimers.authRequired, "no verifier: auth off")
    }
}
