import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// Trace checkpoints (issue 28) on every store: written in a group beside journal writes,
/// overwritten, refused for an unknown ride, read back bit for bit after a reopen.
extension RideStoreSemanticsTests {
    func testTraceCheckpointsRoundTripOnEveryStore() throws {
        try forEachStore { open, reopen in
            var store = try open()
            XCTAssertNil(try store.trace("r-t"))
            let first = TraceCheckpoint(ride: "r-t", metres: 0, last: nil, receivedAt: nil)
            // Created and checkpointed in one group, with a checkpoint of an unknown ride refused alone.
            let results = try store.commit([
                .create(NewRide(id: "r-t", planID: "p", owner: "u", limit: nil, startedAt: t0), reply: nil),
                .trace(first),
                .trace(TraceCheckpoint(ride: "nope", metres: 5, last: nil, receivedAt: nil)),
            ])
            XCTAssertEqual(results.count, 3)
            XCTAssertEqual(results[0], .written)
            XCTAssertEqual(results[1], .written)
            XCTAssertEqual((results[2] == .written), false)
            XCTAssertEqual(try store.trace("r-t"), first)
            XCTAssertNil(try store.trace("nope"))
            // Awkward doubles survive exactly: 0.1 + 0.2, a negative longitude, a tiny accuracy.
            let point = TracePoint(lat: 48.862_004_567_891_23, lon: -(0.1 + 0.2), at: t0 + 31_000, accuracy: 4.9e-3)
            let second = TraceCheckpoint(ride: "r-t", metres: 1_234, last: point, receivedAt: t0 + 31_250)
            XCTAssertEqual(try store.commit([
                .append(JournalEntry(ride: "r-t", seq: 2, transition: .pause(at: t0 + 31_200)), reply: nil),
                .trace(second),
            ]), [.written, .written])
            store = try reopen(store)
            XCTAssertEqual(try store.trace("r-t"), second)
            XCTAssertEqual(try store.ride("r-t")?.ride.state, .paused)
            // An ended ride keeps its final trace.
            let last = TraceCheckpoint(ride: "r-t", metres: 2_000, last: TracePoint(lat: 1, lon: 2, at: t0 + 60_000, accuracy: 8),
                                       receivedAt: t0 + 60_100)
            XCTAssertEqual(try store.commit([
                .append(JournalEntry(ride: "r-t", seq: 3, transition: .end(at: t0 + 60_100, reason: .rider, metres: 2_000)), reply: nil),
                .trace(last),
            ]), [.written, .written])
            store = try reopen(store)
            XCTAssertEqual(try store.trace("r-t"), last)
            XCTAssertEqual(try store.ride("r-t")?.ride.metres, 2_000)
            store.close()
        }
    }
}
