@testable import RideService
import Glibc
import XCTest
import RideCore
import RideProtocol

/// The tick batch as the registry builds it (issue 29: written in place by `TickFrame`) against
/// the one encoder of a tick, ride by ride, and the memory it is written into.
final class TickBatchTests: XCTestCase {
    private let eur = FarePlan(id: "eu", names: ["en": "City"], currency: Currency(code: "EUR")!, price: 100,
                               perMinute: [FareSegment(start: 0, rate: 25, interval: 1)], perKm: [FareSegment(start: 0, rate: 40, interval: 1)],
                               cap: FareCap(duration: 60, price: 1_500), billing: .started, maxPauseSeconds: 120)

    /// 400 rides of two plans, riding and paused, with and without limits (some past theirs, so
    /// they end instead of ticking), some with a trace and a position; two in three watched.
    func testEveryWatchedRidesTickAsTheOneEncoderWritesIt() throws {
        let clock = ManualClock()
        let t0 = clock.now()
        let registry = RideRegistry(plans: [.standard, eur], shards: 2, clock: clock, metrics: Metrics(), pre: 16)
        var watched: Set<String> = []
        var traced: [String: LiveTrace] = [:]
        registry.publishing { v in
            for i in 0..<400 {
                let id = i % 50 == 0 ? "ride-\(i)-with-a-rather-long-id:\(String(repeating: "x", count: i % 40))" : "r-\(i)"
                var ride = Ride(id: id, planID: i % 3 == 0 ? "eu" : "default", owner: i % 2 == 0 ? "rider-\(i)" : nil,
                                limit: i % 4 == 0 ? Int64(30 + i) : nil, startedAt: t0 - Int64(i) * 1_000)
                if i % 5 == 1, case .success((_, let paused)) = ride.step(.pause, at: t0 - Int64(i % 200) * 1_000) { ride = paused }
                let live = registry.add(ride, &v)
                if i % 3 != 2 {
                    live.subscriberCount.wrappingAdd(1, ordering: .relaxed)
                    watched.insert(id)
                }
                if i % 7 == 0 {
                    let trace = LiveTrace()
                    trace.update(metres: Int64(i) * 37, position: TracePoint(lat: 48.85 + Double(i) / 1000, lon: 2.35, at: t0 - 500, accuracy: 5))
                    live.trace = trace
                    traced[id] = trace
                }
            }
        }
        var autoEnded: Set<String> = []
        for seq in Int64(1)...3 {
            clock.advance(seconds: 1)
            let at = clock.now()
            // Which rides carry their position this tick: the ones it changed for since the last.
            let positions = traced.compactMapValues { $0.positionUnsent ? $0.position.map(RidePosition.init) : nil }
            let (batch, _, ends) = registry.tick(seq: seq, at: at) { _, _ in }
            for case .autoEnd(let id, _) in ends { autoEnded.insert(id) }
            XCTAssertEqual(Set(batch.ends.map(\.live.id)), watched.subtracting(autoEnded), "seq \(seq)")
            var all: [UInt8] = []
            for (k, e) in batch.ends.enumerated() {
                var expected: [UInt8] = []
                ServerMessages.tick(into: &expected, ride: e.live.ride, plan: e.live.plan, seq: seq, at: at, prefix: 0,
                                    distance: traced[e.live.id]?.metres, position: positions[e.live.id])
                XCTAssertEqual(String(decoding: batch.frame(k, pre: 0), as: UTF8.self), String(decoding: expected, as: UTF8.self))
                XCTAssertEqual(batch.frame(k, pre: 3), [0, 0, 0] + expected)
                all += expected
            }
            XCTAssertEqual(Array(UnsafeBufferPointer(start: batch.frames.base, count: batch.frames.count)), all, "seq \(seq): back to back")
            if seq == 2 {
                // A new position for some: the next tick carries it, once.
                registry.publishing { _ in
                    for (i, trace) in traced.values.enumerated() where i % 2 == 0 {
                        trace.update(metres: trace.metres + 10, position: TracePoint(lat: -33.8688, lon: 151.2093, at: at, accuracy: 3))
                    }
                }
            }
        }
        XCTAssertFalse(autoEnded.isEmpty, "some limits passed")
        XCTAssertTrue(autoEnded.isSubset(of: Set(registry.view.withLock { $0.rides.keys })))
    }

    /// Room for the batch is reserved once: the first batch (no size known yet) and the next
    /// never grow (nor copy) their memory, and the next has the last one's pages in already.
    func testEachBatchIsReservedUpFront() {
        let clock = ManualClock()
        let registry = RideRegistry(plans: [.standard], shards: 1, clock: clock, metrics: Metrics(), pre: 16)
        func addWatched(_ ids: Range<Int>) {
            registry.publishing { v in
                for i in ids {
                    registry.add(Ride(id: "r-\(i)", planID: "default", owner: nil, limit: nil, startedAt: clock.now()), &v)
                        .subscriberCount.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
        addWatched(0..<3_000)
        clock.advance(seconds: 1)
        let first = registry.tick(seq: 1, at: clock.now()) { _, _ in }.0
        clock.advance(seconds: 1)
        let second = registry.tick(seq: 2, at: clock.now()) { _, _ in }.0
        XCTAssertEqual(second.ends.count, 3_000)
        XCTAssertGreaterThanOrEqual(second.frames.capacity, second.frames.count)
        XCTAssertEqual(first.frames.grown, 0, "the first batch reserved for every open ride")
        XCTAssertEqual(second.frames.grown, 0, "reserved up front")
        XCTAssertEqual(first.frames.count, second.frames.count)
        // Many more watched rides than the last batch had: still no growth.
        addWatched(3_000..<9_000)
        clock.advance(seconds: 1)
        let third = registry.tick(seq: 3, at: clock.now()) { _, _ in }.0
        XCTAssertEqual(third.ends.count, 9_000)
        XCTAssertEqual(third.frames.grown, 0)
    }

    // MARK: the batch's memory

    func testPrefaultedPagesAreInBeforeAnythingIsWritten() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let memory = TickMemory(reserving: 64 * page, prefault: 8 * page)
        var resident = [UInt8](repeating: 0, count: 64)
        XCTAssertEqual(mincore(memory.base, 64 * page, &resident), 0)
        try XCTSkipIf(resident[0] & 1 == 0, "no MADV_POPULATE_WRITE on this kernel (before Linux 5.14)")
        XCTAssertEqual(resident[..<8].filter { $0 & 1 != 0 }.count, 8, "the prefaulted pages")
        XCTAssertEqual(resident[8...].filter { $0 & 1 != 0 }.count, 0, "the rest is address space only")
    }

    func testTheMemoryGrowsPastItsReservationAndKeepsWhatItHolds() {
        let memory = TickMemory(reserving: 1)
        XCTAssertEqual(memory.capacity, 4096, "a page")
        var expected: [UInt8] = []
        for i in 0..<3_000 {
            let frame = Array("{\"frame\":\(i)}".utf8) + Array(repeating: UInt8(truncatingIfNeeded: i), count: i % 97)
            if i % 3 == 0 {
                memory.append(frame)
            } else {
                // In place, in more room than it takes.
                let room = frame.count + i % 50
                let p = memory.room(room)
                p.update(from: frame, count: frame.count)
                memory.wrote(upTo: p + frame.count, room: room)
            }
            expected += frame
            XCTAssertEqual(memory.count, expected.count)
        }
        XCTAssertGreaterThan(memory.grown, 3, "grew several times")
        XCTAssertGreaterThanOrEqual(memory.capacity, expected.count)
        XCTAssertEqual(Array(UnsafeBufferPointer(start: memory.base, count: memory.count)), expected)
        // Room asked for and not used costs nothing: the count moves by what was written.
        memory.wrote(upTo: memory.room(1_000_000), room: 1_000_000)
        XCTAssertEqual(memory.count, expected.count)
    }
}
