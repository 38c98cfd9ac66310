import Testing
@testable import RideCore

// RideGeo: one ride's trace, zone rules and start/end decisions. Time is an input everywhere
// (the fixes' `at` and the server's `now`); nothing here sleeps or reads a clock.
//
// The zones are the shape of the GBFS spec's overlap examples (polygon A before polygon B, areas
// a, ab, b and g outside both), shrunk to 222 m squares near Null Island so a scooter crosses
// them in a minute: A is a no-parking zone (no start, no end, riding through allowed), B a
// no-go zone at 20 km/h, and the global rules allow everything at 25 km/h. All rules are for
// vehicle type "scooter", so in ab A decides start/end/through and B's 20 km/h falls through.

fileprivate let zoneA = square(0, 0, 0.002, 0.002)
fileprivate let zoneB = square(0.001, 0.001, 0.003, 0.003)

fileprivate let fencing = Geofencing(
    zones: [GeofencingZone(names: [("en", "A")], polygons: [zoneA],
                           rules: [ZoneRule(vehicleTypeIDs: ["scooter"], rideStartAllowed: false, rideEndAllowed: false,
                                            rideThroughAllowed: true)]),
            GeofencingZone(names: [("en", "B")], polygons: [zoneB],
                           rules: [ZoneRule(vehicleTypeIDs: ["scooter"], rideStartAllowed: true, rideEndAllowed: true,
                                            rideThroughAllowed: false, maximumSpeedKph: 20)])],
    globalRules: [ZoneRule(vehicleTypeIDs: ["scooter"], rideStartAllowed: true, rideEndAllowed: true, rideThroughAllowed: true,
                           maximumSpeedKph: 25)])

/// What subscribers see in a `zone` message: name, start, end, through, speed.
fileprivate struct Seen: Equatable, CustomStringConvertible {
    var zone: String?, start: Bool, end: Bool, through: Bool, speed: Int64?
    init(_ zone: String?, _ start: Bool, _ end: Bool, _ through: Bool, _ speed: Int64?) {
        (self.zone, self.start, self.end, self.through, self.speed) = (zone, start, end, through, speed)
    }
    init(_ d: ZoneDecision) {
        self.init(d.name, d.rules.rideStartAllowed, d.rules.rideEndAllowed, d.rules.rideThroughAllowed, d.rules.maximumSpeedKph)
    }
    var description: String { "\(zone ?? "null") s\(start) e\(end) t\(through) \(speed.map(String.init) ?? "-")" }
}

fileprivate let outside = Seen(nil, true, true, true, 25)
fileprivate let inA = Seen("A", false, false, true, 25)
fileprivate let inAB = Seen("A", false, false, true, 20)
fileprivate let inB = Seen("B", true, true, false, 20)

fileprivate let t0: UnixMillis = 1_764_430_000_000
/// The server's clock runs 150 ms behind the fixes' reception: `now` and `at` are different clocks.
fileprivate let lag: UnixMillis = 150

/// Fix k of the scripted ride: along the diagonal lat = lon from -0.00045° in steps of 0.0001°
/// (15.7 m), one every 2 s (28 km/h). Never on a zone edge: every coordinate ends in 5.
fileprivate func fix(_ k: Int) -> TracePoint {
    let c = -0.00045 + 0.0001 * Double(k)
    return TracePoint(lat: c, lon: c, at: t0 + 2000 * UnixMillis(k + 1), accuracy: 5)
}

fileprivate let startPoint = GeoPoint(lat: -0.0005, lon: -0.0005)

@Suite struct RideGeoTests {
    @Test func aScriptedRideAcrossOverlappingZones() {
        #expect(RideGeo.canStart(at: startPoint, vehicleType: "scooter", zones: fencing, now: t0) == .allowed)
        var geo = RideGeo(zones: fencing, vehicleType: "scooter", start: startPoint, now: t0)
        #expect(geo.current.map(Seen.init) == outside)

        var pushes: [Seen] = []
        var warnings: [Seen] = []
        var checkpoints: [UnixMillis] = []
        var accepted: [TracePoint] = []
        func send(_ p: TracePoint, _ now: UnixMillis) -> RideGeo.Outcome {
            let o = geo.report(p, now: now)
            if let z = o.zoneChange { pushes.append(Seen(z)) }
            if let w = o.fleetWarning { warnings.append(Seen(w.zone)) }
            if o.accepted { accepted.append(p) }
            if o.checkpointDue {
                checkpoints.append(now)
                geo.checkpointed(at: now)
            }
            return o
        }

        // g, then into a (fix 5), where the ride stops.
        for k in 0...9 { #expect(send(fix(k), fix(k).at + lag).accepted, "fix \(k)") }
        #expect(pushes == [inA])
        let inANow = fix(9).at + lag + 5000
        #expect(geo.canEnd(now: inANow, force: false, isOps: false) == .refused(.endNotAllowed(zone: "A")))
        // force means nothing from the rider's token; an ops token ends anyway and it shows.
        #expect(geo.canEnd(now: inANow, force: true, isOps: false) == .refused(.endNotAllowed(zone: "A")))
        #expect(geo.canEnd(now: inANow, force: true, isOps: true) == .forced(.endNotAllowed(zone: "A")))
        #expect(geo.canEnd(now: inANow, force: false, isOps: true) == .refused(.endNotAllowed(zone: "A")))

        // A 5 km jump one second later: dropped, no zone change, no distance.
        let before = geo.metres
        let jump = TracePoint(lat: fix(9).point.lat + 0.045, lon: fix(9).point.lon, at: fix(9).at + 1000, accuracy: 5)
        let j = send(jump, jump.at + lag)
        #expect(j.verdict == .dropped(.tooFast))
        #expect(j.zoneChange == nil && j.fleetWarning == nil)
        #expect(geo.metres == before)
        #expect(geo.position == fix(9))

        // On through ab (fix 15: A still decides, speed from B), b (fix 25) and out (fix 35).
        for k in 10...40 { #expect(send(fix(k), fix(k).at + lag).accepted, "fix \(k)") }
        #expect(pushes == [inA, inAB, inB, outside])
        #expect(warnings == [inB])
        #expect(geo.current.map(Seen.init) == outside)
        let lastNow = fix(40).at + lag
        #expect(geo.canEnd(now: lastNow + 1000, force: false, isOps: false) == .allowed)

        // Checkpoints: the start is one (t0); then the first report 30 s after it (fix 14,
        // t0 + 30.15 s) and 30 s after that (fix 29). The dropped jump changed nothing.
        #expect(checkpoints == [t0 + 30_150, t0 + 60_150])
        #expect(!geo.checkpointDue(now: lastNow))                 // 22 s after the last one
        #expect(geo.checkpointDue(now: t0 + 90_150))              // changed since, and 30 s on
        geo.checkpointed(at: t0 + 90_150)
        #expect(!geo.checkpointDue(now: t0 + 500_000))            // nothing moved since

        // Distance: every one of the 41 fixes counted; the path is straight, so the haversine
        // sum of the steps is the straight line from the first fix to the last within a metre.
        #expect(accepted == (0...40).map(fix))
        let sum = zip(accepted, accepted.dropFirst()).reduce(0.0) { $0 + Geo.haversineMetres($1.0.point, $1.1.point) }
        #expect(abs(Double(geo.metres) - sum) <= 1)
        let straight = Geo.haversineMetres(fix(0).point, fix(40).point)
        #expect(abs(Double(geo.metres) - straight) <= 1)
        #expect(geo.metres == 629)
        #expect(geo.billedMetres(clientDistance: 99_999) == 629)

        // Silence: a minute after the last fix the end still stands; a millisecond more and a
        // position is required (an ops token may force it).
        #expect(geo.canEnd(now: lastNow + 60_000, force: false, isOps: false) == .allowed)
        #expect(geo.canEnd(now: lastNow + 60_001, force: false, isOps: false) == .refused(.positionRequired))
        #expect(geo.canEnd(now: lastNow + 60_001, force: true, isOps: true) == .forced(.positionRequired))
    }

    @Test func startIsRefusedWhereTheRulesSayAndNamesTheZone() {
        func start(_ lat: Double, _ lon: Double, _ type: String? = "scooter") -> GeoVerdict {
            RideGeo.canStart(at: GeoPoint(lat: lat, lon: lon), vehicleType: type, zones: fencing, now: t0)
        }
        #expect(start(0.0005, 0.0005) == .refused(.startNotAllowed(zone: "A")))     // a
        #expect(start(0.0015, 0.0015) == .refused(.startNotAllowed(zone: "A")))     // ab: A first
        #expect(start(0.0025, 0.0025) == .allowed)                                  // b
        #expect(start(0.0005, 0.0025) == .allowed)                                  // g
        #expect(start(0.0005, 0.0005, "bike") == .allowed)                          // the rules are for scooters
        #expect(RideGeo.canStart(at: nil, vehicleType: "scooter", zones: fencing, now: t0) == .allowed)
        #expect(RideGeo.canStart(at: GeoPoint(lat: 0.0005, lon: 0.0005), vehicleType: "scooter", zones: nil, now: t0) == .allowed)
        // Global rules that refuse: no zone to name.
        let closed = Geofencing(zones: [], globalRules: [ZoneRule(rideStartAllowed: false, rideEndAllowed: false, rideThroughAllowed: true)])
        #expect(RideGeo.canStart(at: startPoint, vehicleType: nil, zones: closed, now: t0) == .refused(.startNotAllowed(zone: nil)))
    }

    @Test func refusalsReadAsTheProtocolExamplesWriteThem() {
        // protocol/examples/zones/server/error.*.json
        #expect(GeoRefusal.startNotAllowed(zone: "Trocadéro + Jardins").message(ride: "r-42")
            == "rides may not start in zone \"Trocadéro + Jardins\"")
        #expect(GeoRefusal.endNotAllowed(zone: "Trocadéro + Jardins").message(ride: "r-42")
            == "rides may not end in zone \"Trocadéro + Jardins\"")
        #expect(GeoRefusal.positionRequired.message(ride: "r-42") == "no position from ride \"r-42\" in the last 60 s")
        #expect(GeoRefusal.endNotAllowed(zone: nil).message(ride: "r-1") == "rides may not end here (global rules)")
        #expect([GeoRefusal.startNotAllowed(zone: nil), .endNotAllowed(zone: nil), .positionRequired].map(\.code)
            == ["start_not_allowed", "end_not_allowed", "position_required"])
    }

    @Test func theFirstFixPushesTheRulesAndWarnsInsideANoGoZone() {
        var geo = RideGeo(zones: fencing, vehicleType: "scooter", start: nil, now: t0)
        #expect(geo.current == nil)
        #expect(geo.canEnd(now: t0, force: false, isOps: false) == .refused(.positionRequired))
        let o = geo.report(TracePoint(lat: 0.0025, lon: 0.0025, at: t0, accuracy: 3), now: t0)
        #expect(o.zoneChange.map(Seen.init) == inB)
        #expect(o.fleetWarning.map { Seen($0.zone) } == inB)
        // Staying inside: nothing new to push or warn about.
        let p = geo.report(TracePoint(lat: 0.00252, lon: 0.0025, at: t0 + 1000, accuracy: 3), now: t0 + 1000)
        #expect(p.accepted && p.zoneChange == nil && p.fleetWarning == nil)
        #expect(geo.canEnd(now: t0 + 1000, force: false, isOps: false) == .allowed)   // B allows ends
    }

    @Test func droppedFixesChangeNothingButAreCountedAsSent() {
        var geo = RideGeo(zones: fencing, vehicleType: "scooter", start: startPoint, now: t0)
        #expect(geo.billedMetres(clientDistance: 1234) == 1234)    // no position sent: the client's distance
        let bad = geo.report(TracePoint(lat: 0.0005, lon: 0.0005, at: t0, accuracy: 80), now: t0)
        #expect(bad.verdict == .dropped(.inaccurate))
        #expect(bad.zoneChange == nil && !bad.checkpointDue)
        #expect(geo.place == startPoint && geo.position == nil)
        #expect(geo.billedMetres(clientDistance: 1234) == 0)       // it sent one: the trace (empty) is billed
        #expect(geo.trace.drops[.inaccurate] == 1)
        _ = geo.report(TracePoint(lat: -0.0005, lon: -0.0004, at: t0 + 5000, accuracy: 5), now: t0 + 5000)
        #expect(geo.report(TracePoint(lat: -0.0005, lon: -0.0003, at: t0 + 4000, accuracy: 5), now: t0 + 6000).verdict == .dropped(.stale))
        #expect(geo.report(TracePoint(lat: -0.0005, lon: -0.0003, at: t0 + 5500, accuracy: 5), now: t0 + 6000).verdict == .dropped(.tooSoon))
        #expect(geo.metres == 0)
    }

    @Test func withoutZonesEverythingIsAllowedAndNothingIsPushed() {
        var geo = RideGeo(zones: nil, vehicleType: nil, start: startPoint, now: t0)
        #expect(geo.current == nil)
        #expect(geo.canEnd(now: t0 + 3_600_000, force: false, isOps: false) == .allowed)
        let o = geo.report(fix(5), now: fix(5).at)
        #expect(o.accepted && o.zoneChange == nil && o.fleetWarning == nil)
        #expect(geo.billedMetres(clientDistance: nil) == 0)
        #expect(RideGeo(zones: nil, vehicleType: nil, start: nil, now: t0).billedMetres(clientDistance: nil) == 0)
    }

    @Test func aTickCarriesThePositionOnlyWhenItChanged() {
        var geo = RideGeo(zones: nil, vehicleType: nil, start: nil, now: t0)
        #expect(geo.positionForTick() == nil)
        _ = geo.report(fix(0), now: fix(0).at)
        #expect(geo.positionForTick() == fix(0))
        #expect(geo.positionForTick() == nil)
        _ = geo.report(fix(0), now: fix(0).at + 10)       // replay: stale, unchanged
        #expect(geo.positionForTick() == nil)
        _ = geo.report(fix(1), now: fix(1).at)
        #expect(geo.positionForTick() == fix(1))
    }

    @Test func aResumedRideGoesOnFromItsCheckpoint() {
        let last = TracePoint(lat: 0.0025, lon: 0.0025, at: t0, accuracy: 5)
        var geo = RideGeo(zones: fencing, vehicleType: "scooter", metres: 500, last: last, receivedAt: nil, now: t0 + 20_000)
        #expect(geo.metres == 500 && geo.position == last)
        #expect(geo.current.map(Seen.init) == inB)
        #expect(!geo.checkpointDue(now: t0 + 100_000))                // nothing new since the checkpoint
        #expect(geo.positionForTick() == nil)                          // subscribers had it before
        // When the checkpointed position arrived is unknown: the end waits for a fresh one.
        #expect(geo.canEnd(now: t0 + 20_000, force: false, isOps: false) == .refused(.positionRequired))
        #expect(geo.billedMetres(clientDistance: 9) == 500)
        // The next fix is judged against the checkpointed one: 5 km in 30 s is too fast.
        #expect(geo.report(TracePoint(lat: 0.0475, lon: 0.0025, at: t0 + 30_000, accuracy: 5), now: t0 + 30_000).verdict == .dropped(.tooFast))
        let o = geo.report(TracePoint(lat: 0.0029, lon: 0.0025, at: t0 + 31_000, accuracy: 5), now: t0 + 31_000)
        #expect(o.accepted && o.zoneChange == nil)                      // still in b
        #expect(geo.metres == 500 + Geo.distanceMetres(last.point, GeoPoint(lat: 0.0029, lon: 0.0025)))
        #expect(!o.checkpointDue)                                       // changed, but 11 s after the resume
        #expect(geo.checkpointDue(now: t0 + 50_000))                    // 30 s after it
        #expect(geo.canEnd(now: t0 + 31_000, force: false, isOps: false) == .allowed)
    }

    @Test func zoneActivityFollowsTheServerClock() {
        // A no-parking zone active only for the first hour: the same parked position may not
        // end inside the hour and may after it (the rules are re-read at the end's time).
        let hour: UnixMillis = 3_600_000
        let timed = Geofencing(zones: [GeofencingZone(names: [("en", "Market")], polygons: [zoneA], start: t0, end: t0 + hour,
                                                      rules: [ZoneRule(rideEndAllowed: false, rideThroughAllowed: true)])],
                               globalRules: [])
        var geo = RideGeo(zones: timed, vehicleType: nil, start: nil, now: t0)
        _ = geo.report(TracePoint(lat: 0.0005, lon: 0.0005, at: t0 + hour - 10_000, accuracy: 5), now: t0 + hour - 10_000)
        #expect(geo.canEnd(now: t0 + hour - 1, force: false, isOps: false) == .refused(.endNotAllowed(zone: "Market")))
        #expect(geo.canEnd(now: t0 + hour, force: false, isOps: false) == .allowed)
    }
}
