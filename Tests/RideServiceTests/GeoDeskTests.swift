import XCTest
import RideCore
import RideProtocol
import RideStore
@testable import RideService

/// The store worker's desk of positions: which reports count, what is owed to subscribers and
/// the store, start and end decisions. The clock is a ManualClock advanced by hand; the fixes'
/// own `at` is the device's clock and runs separately.
///
/// Zones near Null Island (222 m squares): A (0…0.002°) is no-parking (no start, no end),
/// B (0.004…0.006° lat) may not be ridden through, at 20 km/h. Everything else: global rules,
/// all allowed.
final class GeoDeskTests: XCTestCase {
    static func square(_ lat0: Double, _ lon0: Double, _ lat1: Double, _ lon1: Double) -> GeoPolygon {
        GeoPolygon(rings: [GeoRing([GeoPoint(lat: lat0, lon: lon0), GeoPoint(lat: lat0, lon: lon1), GeoPoint(lat: lat1, lon: lon1),
                                    GeoPoint(lat: lat1, lon: lon0), GeoPoint(lat: lat0, lon: lon0)])])
    }

    static let fencing = Geofencing(
        zones: [GeofencingZone(names: [("en", "A")], polygons: [square(0, 0, 0.002, 0.002)],
                               rules: [ZoneRule(rideStartAllowed: false, rideEndAllowed: false, rideThroughAllowed: true)]),
                GeofencingZone(names: [("en", "B")], polygons: [square(0.004, 0, 0.006, 0.002)],
                               rules: [ZoneRule(rideStartAllowed: true, rideEndAllowed: true, rideThroughAllowed: false,
                                                maximumSpeedKph: 20)])],
        globalRules: [])

    let clock = ManualClock(1_764_430_000_000)
    var desk: GeoDesk!
    /// The store's checkpoints, as `load` reads them; `loads` counts the reads.
    var stored: [String: TraceCheckpoint] = [:]
    var loads = 0

    override func setUp() {
        desk = GeoDesk(zones: Self.fencing, clock: clock)
    }

    func load(_ ride: String) -> () throws(StoreError) -> TraceCheckpoint? {
        { () throws(StoreError) -> TraceCheckpoint? in
            self.loads += 1
            return self.stored[ride]
        }
    }

    /// A fix at (lat, 0.001), `second` seconds into the device's clock, received now.
    func fix(_ lat: Double, _ second: Int64, accuracy: Double = 5) -> TracePoint {
        TracePoint(lat: lat, lon: 0.001, at: 1_764_430_000_000 + second * 1000, accuracy: accuracy)
    }

    @discardableResult
    func report(_ ride: String, _ p: TracePoint) throws -> GeoDesk.Report {
        try desk.report(ride, p, load: load(ride))
    }

    func drops() -> [String: Int] {
        Dictionary(uniqueKeysWithValues: desk.counters.drops().map { ($0.reason.rawValue, $0.count) })
    }

    func testReportsAreFilteredCountedAndMeasured() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(position: GeoPoint(lat: 0.003, lon: 0.001)))
        clock.advance(seconds: 1)
        // Reports 0.3 s of server time apart (under the rate of 5 a second), each fix at most
        // 2 s ahead of the server's clock: the device's times decide among them.
        func next(_ p: TracePoint) throws {
            try report("r", p)
            clock.advance(millis: 300)
        }
        try next(fix(0.003, 0))                 // first fix: 0 m
        try next(fix(0.0031, 2))                // +11.1 m in 2 s
        try next(fix(0.0032, 2))                // same instant: stale
        try next(fix(0.0032, 1))                // older: stale
        try next(fix(0.0032, 2, accuracy: 5).with(at: 2_500))  // 0.5 s later: too soon
        try next(fix(0.0032, 3, accuracy: 51))  // over 50 m: inaccurate
        try next(fix(0.0482, 4))                // 5 km in 1 s: too fast, the last good point stays
        let r = try report("r", fix(0.0032, 5))        // +11.1 m from 0.0031 (not from the jump)
        XCTAssertTrue(r.outcome.accepted)
        let expected = Geo.haversineMetres(GeoPoint(lat: 0.003, lon: 0.001), GeoPoint(lat: 0.0031, lon: 0.001))
            + Geo.haversineMetres(GeoPoint(lat: 0.0031, lon: 0.001), GeoPoint(lat: 0.0032, lon: 0.001))
        XCTAssertEqual(r.metres, Int64(expected.rounded()))
        XCTAssertEqual(r.metres, 22)
        XCTAssertEqual(r.position, fix(0.0032, 5))
        XCTAssertEqual(desk.counters.value(desk.counters.accepted), 3)
        XCTAssertEqual(drops(), ["future": 0, "stale": 2, "too_soon": 1, "inaccurate": 1, "too_fast": 1, "rate_limited": 0])
        // A lookup for the start and one per accepted fix; none for the dropped ones.
        XCTAssertEqual(desk.counters.value(desk.counters.zoneLookups), 4)
        XCTAssertEqual(desk.trace("r")?.metres, 22)
        XCTAssertEqual(loads, 0, "a ride started here is never read from the store")
    }

    func testCheckpointsAreOwedEvery30SecondsWhileTheTraceChangesAndNeverPerPosition() throws {
        _ = desk.started(ride: "r", fields: ZoneFields(vehicleType: "scooter"))
        var written: [UnixMillis] = []
        for s in Int64(1)...95 {
            clock.advance(seconds: 1)
            if let c = try report("r", fix(0.003 + 0.0001 * Double(s), s)).checkpoint {
                XCTAssertEqual(c.last, fix(0.003 + 0.0001 * Double(s), s))
                XCTAssertEqual(c.receivedAt, clock.now())
                written.append(clock.now() - 1_764_430_000_000)
            }
        }
        // 95 accepted positions, 3 checkpoints: at 30, 60 and 90 s after the start.
        XCTAssertEqual(written, [30_000, 60_000, 90_000])
        XCTAssertEqual(desk.counters.value(desk.counters.checkpoints), 3)
        // The reports stop; what changed after the last checkpoint is swept once it is 30 s old.
        clock.advance(seconds: 20)
        XCTAssertEqual(desk.dueCheckpoints(), [])
        clock.advance(seconds: 10)
        let swept = desk.dueCheckpoints()
        XCTAssertEqual(swept.map(\.ride), ["r"])
        XCTAssertEqual(swept.first?.metres, desk.trace("r")?.metres)
        XCTAssertEqual(swept.first?.last, fix(0.003 + 0.0095, 95))
        // Nothing changed since: nothing more owed, however long.
        clock.advance(seconds: 600)
        XCTAssertEqual(desk.dueCheckpoints(), [])
        // A transition writes one whatever the interval, and resets it.
        clock.advance(seconds: 1)
        try report("r", fix(0.0127, 726))
        XCTAssertEqual(desk.transition("r")?.last, fix(0.0127, 726))
        clock.advance(seconds: 29)
        XCTAssertEqual(desk.dueCheckpoints(), [])
        XCTAssertNil(desk.transition("unknown"))
    }

    func testZonesDecideStartEndAndWhatSubscribersAndOperatorsAreTold() throws {
        // No start in A.
        XCTAssertEqual(desk.canStart(ZoneFields(position: GeoPoint(lat: 0.001, lon: 0.001))), .refused(.startNotAllowed(zone: "A")))
        XCTAssertEqual(desk.canStart(ZoneFields(position: GeoPoint(lat: 0.003, lon: 0.001))), .allowed)
        XCTAssertEqual(desk.canStart(nil), .allowed)
        let start = desk.started(ride: "r", fields: ZoneFields(position: GeoPoint(lat: 0.003, lon: 0.001), vehicleType: "scooter"))
        XCTAssertEqual(start.rules?.name, nil)
        XCTAssertEqual(start.checkpoint?.vehicleType, "scooter")
        // Into A: a zone change, no warning (riding through is allowed).
        clock.advance(seconds: 10)
        var r = try report("r", fix(0.0015, 10))
        XCTAssertEqual(r.outcome.zoneChange?.name, "A")
        XCTAssertNil(r.outcome.fleetWarning)
        // Deeper into A: the rules are the same, nothing to push.
        clock.advance(seconds: 5)
        r = try report("r", fix(0.0012, 15))
        XCTAssertNil(r.outcome.zoneChange)
        // End refused in A; an ops token may force it; a rider's force changes nothing.
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false, load: load("r")), .refused(.endNotAllowed(zone: "A")))
        XCTAssertEqual(try desk.canEnd("r", force: true, isOps: false, load: load("r")), .refused(.endNotAllowed(zone: "A")))
        XCTAssertEqual(try desk.canEnd("r", force: true, isOps: true, load: load("r")), .forced(.endNotAllowed(zone: "A")))
        // Out of A (to the north, past it), then into B: a change each, and B warns the operators once.
        clock.advance(seconds: 20)
        r = try report("r", fix(0.0030, 35))
        XCTAssertEqual(r.outcome.zoneChange.map { $0.name == nil && $0.rules.rideEndAllowed }, true)
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false, load: load("r")), .allowed)
        clock.advance(seconds: 20)
        r = try report("r", fix(0.0045, 55))
        XCTAssertEqual(r.outcome.zoneChange?.rules.maximumSpeedKph, 20)
        XCTAssertEqual(r.outcome.fleetWarning?.zone.name, "B")
        clock.advance(seconds: 5)
        XCTAssertNil(try report("r", fix(0.0048, 60)).outcome.fleetWarning)
        // No position for over 60 s: the end asks for one.
        clock.advance(seconds: 61)
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false, load: load("r")), .refused(.positionRequired))
        XCTAssertEqual(loads, 0)
    }

    func testARideFromTheStoreResumesFromItsCheckpointOnce() throws {
        // The server's clock 110 s in: the checkpoint's fix was made at 100 s, received 10 s ago.
        clock.set(1_764_430_000_000 + 110_000)
        let last = fix(0.0030, 100)
        stored["r"] = TraceCheckpoint(ride: "r", metres: 1_500, last: last, receivedAt: clock.now() - 10_000, vehicleType: "scooter")
        XCTAssertFalse(desk.holds("r"))
        // Received 10 s ago by the node that wrote it: fresh enough to end outside every zone.
        XCTAssertEqual(try desk.canEnd("r", force: false, isOps: false, load: load("r")), .allowed)
        XCTAssertEqual(loads, 1)
        clock.advance(seconds: 2)
        let r = try report("r", fix(0.0031, 102))
        XCTAssertEqual(r.metres, 1_500 + 11)
        // Billed from the trace; the client's figure only for a ride that sent no positions.
        XCTAssertEqual(try desk.billedMetres("r", clientDistance: 99_999, load: load("r")), 1_511)
        XCTAssertEqual(try desk.billedMetres("quiet", clientDistance: 700, load: load("quiet")), 700)
        XCTAssertEqual(try desk.billedMetres("quiet2", clientDistance: nil, load: load("quiet2")), 0)
        XCTAssertEqual(loads, 3)
        desk.forget("r")
        XCTAssertFalse(desk.holds("r"))
    }

    func testWithoutZonesNothingIsRefusedAndNothingLookedUp() throws {
        let plain = GeoDesk(zones: nil, clock: clock)
        XCTAssertEqual(plain.canStart(ZoneFields(position: GeoPoint(lat: 0.001, lon: 0.001))), .allowed)
        _ = plain.started(ride: "r", fields: nil)
        XCTAssertEqual(try plain.canEnd("r", force: false, isOps: false, load: load("r")), .allowed)
        XCTAssertNil(try plain.report("r", fix(0.001, 1), load: load("r")).outcome.zoneChange)
        XCTAssertEqual(plain.counters.value(plain.counters.zoneLookups), 0)
    }
}

extension TracePoint {
    /// The same fix at another device time (milliseconds after the test's epoch).
    func with(at millis: Int64) -> TracePoint {
        TracePoint(lat: point.lat, lon: point.lon, at: 1_764_430_000_000 + millis, accuracy: accuracy)
    }
}
