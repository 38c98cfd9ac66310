import XCTest
import RideAuth
import RideCore
import RideProtocol
import RideStore
@testable import RideService

/// What a rider controlling their own device could do with positions (issue 36, findings 4–6),
/// against the store worker's desk with a ManualClock advanced by hand: the server's clock is
/// `clock`, the device's is whatever `at` the fixes carry.
///
/// The zones are GeoDeskTests': A (0…0.002° lat) no end, B (0.004…0.006° lat) no riding through.
final class GeoAdversaryTests: XCTestCase {
    static let t0: UnixMillis = 1_764_430_000_000
    let clock = ManualClock(GeoAdversaryTests.t0)
    var desk: GeoDesk!

    override func setUp() {
        desk = GeoDesk(zones: GeoDeskTests.fencing, clock: clock)
    }

    func load() -> TraceCheckpoint? { nil }

    /// A fix at (lat, 0.001) stamped `at` by the device.
    func fix(_ lat: Double, at: UnixMillis) -> TracePoint {
        TracePoint(lat: lat, lon: 0.001, at: at, accuracy: 5)
    }

    @discardableResult
    func report(_ ride: String, _ p: TracePoint) throws -> GeoDesk.Report {
        try desk.report(ride, p) { () throws(StoreError) in nil }
    }

    func drops() -> [String: Int] {
        Dictionary(uniqueKeysWithValues: desk.counters.drops().map { ($0.reason.rawValue, $0.count) })
    }

    let ride = Ride(id: "r", planID: "default", owner: "alice", limit: nil, startedAt: GeoAdversaryTests.t0)

    /// `{"type":"position",…}` as the worker gets it: the step it publishes.
    func position(_ lat: Double, at: UnixMillis, access: Access? = nil) -> GeoStep {
        let p = PositionReport(ride: "r", lat: lat, lon: 0.001, at: at, accuracy: 5)
        return desk.position(p, ride: ride, access: access, id: nil, to: (shard: 0, session: 1), prefix: 0) { () throws(StoreError) in nil }.step
    }

    func errorCode(_ step: GeoStep) -> String? {
        step.error.flatMap { try? JSON.parse($0) }?["code"]?.string
    }

    // MARK: 4. server time decides

    /// Twenty fixes stamped a second apart but sent within one second: the device claims 19 s
    /// of riding (285 m at 54 km/h, out of A where it may not end) that took 1 s of real time.
    func testFixesCannotArriveFasterThanRealTime() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        try report("r", fix(0.001, at: clock.now()))
        let start = clock.now()
        for i in Int64(1)...19 {
            clock.advance(millis: 50)
            try report("r", fix(0.001 + 0.000135 * Double(i), at: start + i * 1000))  // 15 m further each
        }
        // At most the 5 s a fast phone clock may run ahead (75 m at 54 km/h), not 285 m; here
        // the rate limit leaves 4 of the 19 to be judged (TraceFilterTests has the filter alone).
        XCTAssertLessThanOrEqual(desk.trace("r")!.metres, 75)
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false) { () throws(StoreError) in nil },
                       .refused(.endNotAllowed(zone: "A")))

        // The same fixes sent as they are made travel the whole way, and the ride may end there.
        let honest = GeoDesk(zones: GeoDeskTests.fencing, clock: clock)
        _ = honest.started(ride: "h", fields: ZoneFields(vehicleType: "scooter"))
        let base = clock.now()
        _ = try honest.report("h", fix(0.001, at: base)) { () throws(StoreError) in nil }
        for i in Int64(1)...19 {
            clock.advance(seconds: 1)
            _ = try honest.report("h", fix(0.001 + 0.000135 * Double(i), at: base + i * 1000)) { () throws(StoreError) in nil }
        }
        XCTAssertEqual(honest.trace("h")!.metres, 285)
        XCTAssertEqual(try honest.canEnd("h", force: false, isOps: false) { () throws(StoreError) in nil }, .allowed)
    }

    /// One fix dated 2100 is dropped (and counted as from the future); the honest fixes after
    /// it count, the distance grows, and the rider can end a minute later.
    func testAFixFromTheFutureIsDroppedAndTheHonestOnesAfterItCount() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        try report("r", fix(0.003, at: clock.now()))
        clock.advance(seconds: 1)
        let year2100: UnixMillis = 4_102_444_800_000
        XCTAssertFalse(try report("r", fix(0.003, at: year2100)).outcome.accepted)
        XCTAssertEqual(drops()["future"], 1)
        var accepted = 0
        for i in 1...69 {
            clock.advance(seconds: 1)
            if try report("r", fix(0.003 + 0.00001 * Double(i), at: clock.now())).outcome.accepted { accepted += 1 }
        }
        XCTAssertEqual(accepted, 69)
        XCTAssertEqual(desk.trace("r")?.metres, 77)  // 69 × 1.11 m
        XCTAssertEqual(desk.trace("r")?.position?.at, clock.now())
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false) { () throws(StoreError) in nil }, .allowed)
        // A few seconds ahead is a clock that runs fast, not a forgery: counted.
        clock.advance(seconds: 1)
        XCTAssertTrue(try report("r", fix(0.00371, at: clock.now() + 4_000)).outcome.accepted)
        clock.advance(seconds: 1)
        XCTAssertFalse(try report("r", fix(0.00372, at: clock.now() + 6_000)).outcome.accepted)
        XCTAssertEqual(drops()["future"], 2)
    }

    /// Freshness for `end` is when the server got the fix, not what the device stamped on it: a
    /// device whose clock is two minutes slow still ends where it is.
    func testFreshnessIsTheServersReceiptTime() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        try report("r", fix(0.003, at: clock.now() - 120_000))
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false) { () throws(StoreError) in nil }, .allowed)
        clock.advance(seconds: 61)
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false) { () throws(StoreError) in nil }, .refused(.positionRequired))
    }

    // MARK: 5. positions rate-limited, warnings coalesced

    /// Over five reports a second of one ride are dropped and counted; the sender is told
    /// `rate_limited` once per burst, not once per message (that would be its own flood).
    func testPositionsAreRateLimitedPerRideAndTheSenderToldOnce() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        var told = 0
        for i in 0..<12 {
            clock.advance(millis: 10)
            let step = position(0.003, at: clock.now() - 5_000 + Int64(i) * 1_000)
            if errorCode(step) == "rate_limited" { told += 1 }
        }
        XCTAssertEqual(drops()["rate_limited"], 7)
        XCTAssertEqual(told, 1)
        // The next second is a new window: five more are judged, and a new burst is told again.
        clock.advance(seconds: 1)
        for i in 0..<7 {
            clock.advance(millis: 10)
            if errorCode(position(0.003, at: clock.now() + Int64(i))) == "rate_limited" { told += 1 }
        }
        XCTAssertEqual(drops()["rate_limited"], 9)
        XCTAssertEqual(told, 2)
    }

    /// Positions alternating across B's edge, one a second (each accepted): every entry into B
    /// used to warn the operators. Now at most one warning per ride per 5 s reaches the feed,
    /// and the zone entered last is what the next one names.
    func testFleetWarningsAreCoalescedPerRide() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        var warnedAt: [UnixMillis] = []
        for i in 0..<30 {
            clock.advance(seconds: 1)
            let step = position(i % 2 == 0 ? 0.00395 : 0.00405, at: clock.now())  // 11 m apart, B on the odd ones
            if let w = step.warning {
                XCTAssertEqual(try JSON.parse(w)["zone"]?.string, "B")
                warnedAt.append(clock.now())
            }
        }
        XCTAssertGreaterThanOrEqual(warnedAt.count, 5, "the operators still hear of it")
        XCTAssertLessThanOrEqual(warnedAt.count, 6, "\(warnedAt.map { ($0 - Self.t0) / 1000 })")
        for (a, b) in zip(warnedAt, warnedAt.dropFirst()) { XCTAssertGreaterThanOrEqual(b - a, 5_000) }
    }

    // MARK: 6. the operator's word wins

    /// An ops token's `end` with a distance bills that distance even after the app sent
    /// positions; a rider's `end` distance still counts only for a ride that sent none.
    func testAnOperatorsEndDistanceIsBilledAfterPositions() throws {
        let plain = GeoDesk(zones: nil, clock: clock)
        desk = plain
        _ = plain.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        _ = position(0.003, at: clock.now())
        let ops = Access(TokenClaims(sub: "ops-1", scope: .control, ops: true))
        let rider = Access(TokenClaims(sub: "alice", scope: .control))
        func end(_ access: Access?, metres: Int64?) -> GeoGate {
            plain.gate(.command(.end, ride: "r", metres: metres), geo: nil, access: access, id: nil, ride: ride) { () throws(StoreError) in nil }
        }
        XCTAssertEqual(end(ops, metres: 5_000), .proceed(.command(.end, ride: "r", metres: 5_000), forced: false))
        XCTAssertEqual(end(rider, metres: 5_000), .proceed(.command(.end, ride: "r", metres: 0), forced: false))
        XCTAssertEqual(end(ops, metres: nil), .proceed(.command(.end, ride: "r", metres: 0), forced: false))
    }
}
