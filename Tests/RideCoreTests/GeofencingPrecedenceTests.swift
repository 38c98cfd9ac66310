import Testing
@testable import RideCore

// GBFS "Geofencing Rule Precedence", with the spec's own "Polygon Overlap Examples"
// (MobilityData/gbfs gbfs.md, geofencing_zones.json): polygons A and B overlap; area a is in A
// only, ab in both, b in B only, g in neither. Rules are written exactly as the spec's examples
// write them (only the fields they show), and the expected values are the spec's tables.

/// An axis-aligned square ring from (lon0, lat0) to (lon1, lat1), closed.
func square(_ lon0: Double, _ lat0: Double, _ lon1: Double, _ lat1: Double) -> GeoPolygon {
    GeoPolygon(rings: [GeoRing([GeoPoint(lat: lat0, lon: lon0), GeoPoint(lat: lat0, lon: lon1), GeoPoint(lat: lat1, lon: lon1),
                                GeoPoint(lat: lat1, lon: lon0), GeoPoint(lat: lat0, lon: lon0)])])
}

/// A = [0,2]², B = [1,3]² (degrees, near Null Island: only the shapes matter).
fileprivate let polygonA = square(0, 0, 2, 2)
fileprivate let polygonB = square(1, 1, 3, 3)

fileprivate enum Area: String, CaseIterable {
    case a, ab, b, g, gFar
    var point: GeoPoint {
        switch self {
        case .a: return GeoPoint(lat: 0.5, lon: 0.5)
        case .ab: return GeoPoint(lat: 1.5, lon: 1.5)
        case .b: return GeoPoint(lat: 2.5, lon: 2.5)
        case .g: return GeoPoint(lat: 0.5, lon: 2.5)      // inside the zones' joint box, in neither polygon
        case .gFar: return GeoPoint(lat: 37.5, lon: 127)  // outside the grid altogether
        }
    }
}

fileprivate func fencing(a: [ZoneRule], b: [ZoneRule], global: [ZoneRule]) -> Geofencing {
    Geofencing(zones: [GeofencingZone(names: [("en", "A")], polygons: [polygonA], rules: a),
                       GeofencingZone(names: [("en", "B")], polygons: [polygonB], rules: b)],
               globalRules: global)
}

fileprivate let t: UnixMillis = 1_764_430_000_000

@Suite struct GeofencingPrecedenceTests {
    @Test func theAreasAreWhereTheExamplesSayTheyAre() {
        let g = fencing(a: [], b: [], global: [])
        #expect(g.zonesContaining(Area.a.point, time: t) == [0])
        #expect(g.zonesContaining(Area.ab.point, time: t) == [0, 1])
        #expect(g.zonesContaining(Area.b.point, time: t) == [1])
        #expect(g.zonesContaining(Area.g.point, time: t) == [])
        #expect(g.zonesContaining(Area.gFar.point, time: t) == [])
    }

    /// "Partially Overlapping Polygons with Same Vehicle Types".
    @Test func sameVehicleTypes() {
        let g = fencing(a: [ZoneRule(vehicleTypeIDs: ["bike"], rideThroughAllowed: true)],
                        b: [ZoneRule(vehicleTypeIDs: ["bike"], rideThroughAllowed: false, maximumSpeedKph: 20)],
                        global: [ZoneRule(vehicleTypeIDs: ["bike"], rideThroughAllowed: false, maximumSpeedKph: 10)])
        let table: [(Area, Bool, Int64, String?)] = [
            (.a, true, 10, "A"), (.ab, true, 20, "A"), (.b, false, 20, "B"), (.g, false, 10, nil), (.gFar, false, 10, nil),
        ]
        for (area, through, speed, zone) in table {
            let d = g.decide(at: area.point, vehicleType: "bike", time: t)
            #expect(d.rules.rideThroughAllowed == through, "\(area)")
            #expect(d.rules.maximumSpeedKph == speed, "\(area)")
            #expect(d.name == zone, "\(area)")
        }
    }

    /// "Partially Overlapping Polygons with Different Vehicle Types": A does not mention
    /// scooters, so it is not considered for them in ab.
    @Test func differentVehicleTypes() {
        let g = fencing(a: [ZoneRule(vehicleTypeIDs: ["bike"], rideThroughAllowed: true)],
                        b: [ZoneRule(vehicleTypeIDs: ["scooter"], rideThroughAllowed: false)],
                        global: [ZoneRule(vehicleTypeIDs: ["bike"], rideThroughAllowed: false),
                                 ZoneRule(vehicleTypeIDs: ["scooter"], rideThroughAllowed: true)])
        let table: [(Area, String, Bool, String?)] = [
            (.a, "bike", true, "A"), (.ab, "bike", true, "A"), (.b, "bike", false, nil), (.g, "bike", false, nil),
            (.a, "scooter", true, nil), (.ab, "scooter", false, "B"), (.b, "scooter", false, "B"), (.g, "scooter", true, nil),
        ]
        for (area, type, through, zone) in table {
            let d = g.decide(at: area.point, vehicleType: type, time: t)
            #expect(d.rules.rideThroughAllowed == through, "\(area) \(type)")
            #expect(d.name == zone, "\(area) \(type)")
        }
    }

    /// "Partially Overlapping Polygons with Some Overlapping Vehicle Types". One row differs
    /// from the spec's table, which gives scooter in area a as "fales": A's rule names scooters
    /// with ride_through_allowed true, and "the rules from the polygon take precedence" over
    /// global_rules in its area, as the same table shows for scooter in ab (A is the only
    /// polygon in a, so nothing else could override it there). The rules' text wins over the
    /// typo'd row; docs/zones.md says so.
    @Test func someOverlappingVehicleTypes() {
        let g = fencing(a: [ZoneRule(vehicleTypeIDs: ["bike", "scooter"], rideThroughAllowed: true)],
                        b: [ZoneRule(vehicleTypeIDs: ["scooter"], rideThroughAllowed: false)],
                        global: [ZoneRule(rideThroughAllowed: false)])
        let table: [(Area, String, Bool)] = [
            (.a, "bike", true), (.ab, "bike", true), (.b, "bike", false), (.g, "bike", false),
            (.a, "scooter", true), (.ab, "scooter", true), (.b, "scooter", false), (.g, "scooter", false),
        ]
        for (area, type, through) in table {
            #expect(g.decide(at: area.point, vehicleType: type, time: t).rules.rideThroughAllowed == through, "\(area) \(type)")
        }
    }

    @Test func theFourRulesFallThroughFieldByFieldAndDefaultToNoRestriction() {
        let g = fencing(a: [ZoneRule(rideEndAllowed: false)],
                        b: [ZoneRule(rideStartAllowed: false, rideEndAllowed: true, maximumSpeedKph: 15, stationParking: true)],
                        global: [ZoneRule(rideThroughAllowed: false)])
        #expect(g.decide(at: Area.ab.point, vehicleType: nil, time: t)
            == ZoneDecision(zone: 0, name: "A", rules: ZoneRules(rideStartAllowed: false, rideEndAllowed: false,
                                                                 rideThroughAllowed: false, maximumSpeedKph: 15, stationParking: true)))
        #expect(g.decide(at: Area.a.point, vehicleType: nil, time: t)
            == ZoneDecision(zone: 0, name: "A", rules: ZoneRules(rideEndAllowed: false, rideThroughAllowed: false)))
        // No zone, no global rules: GBFS's "no restrictions apply".
        let none = fencing(a: [], b: [], global: [])
        #expect(none.decide(at: Area.ab.point, vehicleType: "bike", time: t) == ZoneDecision(zone: nil, name: nil, rules: .unrestricted))
    }

    @Test func withinOneArrayTheEarlierApplicableRuleWins() {
        let g = fencing(a: [ZoneRule(vehicleTypeIDs: ["scooter"], rideEndAllowed: false),
                            ZoneRule(rideEndAllowed: true, maximumSpeedKph: 12),
                            ZoneRule(vehicleTypeIDs: ["bike"], maximumSpeedKph: 8)],
                        b: [], global: [])
        let scooter = g.decide(at: Area.a.point, vehicleType: "scooter", time: t).rules
        #expect(!scooter.rideEndAllowed && scooter.maximumSpeedKph == 12)
        let bike = g.decide(at: Area.a.point, vehicleType: "bike", time: t).rules
        #expect(bike.rideEndAllowed && bike.maximumSpeedKph == 12)
        // A ride with no vehicle type: only the rule for every type applies.
        let untyped = g.decide(at: Area.a.point, vehicleType: nil, time: t).rules
        #expect(untyped.rideEndAllowed && untyped.maximumSpeedKph == 12)
    }

    @Test func aZoneWhoseRulesDoNotApplyDoesNotDecide() {
        let g = fencing(a: [ZoneRule(vehicleTypeIDs: ["bike"], rideStartAllowed: false)],
                        b: [ZoneRule(rideStartAllowed: true)], global: [])
        #expect(g.decide(at: Area.ab.point, vehicleType: "moped", time: t).name == "B")
        #expect(g.decide(at: Area.ab.point, vehicleType: "bike", time: t).name == "A")
        #expect(g.decide(at: Area.a.point, vehicleType: "moped", time: t).name == nil)
    }

    @Test func inactiveZonesAreLeftOutOfPrecedence() {
        let start = t, end = t + 3_600_000
        let g = Geofencing(zones: [GeofencingZone(names: [("en", "market")], polygons: [polygonA], start: start, end: end,
                                                  rules: [ZoneRule(rideThroughAllowed: false)]),
                                   GeofencingZone(names: [("en", "B")], polygons: [polygonB], rules: [ZoneRule(rideThroughAllowed: true)])],
                           globalRules: [])
        #expect(g.decide(at: Area.ab.point, vehicleType: nil, time: start - 1).name == "B")
        #expect(g.decide(at: Area.ab.point, vehicleType: nil, time: start).name == "market")
        #expect(g.decide(at: Area.ab.point, vehicleType: nil, time: end - 1).rules.rideThroughAllowed == false)
        #expect(g.decide(at: Area.ab.point, vehicleType: nil, time: end).rules.rideThroughAllowed == true)
    }

    @Test func anUnnamedZoneIsNamedByItsPlaceInTheFile() {
        let g = Geofencing(zones: [GeofencingZone(polygons: [polygonA], rules: [ZoneRule(rideEndAllowed: false)])], globalRules: [])
        #expect(g.decide(at: Area.a.point, vehicleType: nil, time: t).name == "features[0]")
    }
}

@Suite struct PolygonTests {
    /// A 4×4 square with a 2×2 hole in the middle.
    let donut = GeoPolygon(rings: square(0, 0, 4, 4).rings + square(1, 1, 3, 3).rings)

    @Test func holesAreNotInside() {
        #expect(donut.contains(GeoPoint(lat: 0.5, lon: 0.5)))
        #expect(donut.contains(GeoPoint(lat: 2, lon: 3.5)))
        #expect(!donut.contains(GeoPoint(lat: 2, lon: 2)))
        #expect(!donut.contains(GeoPoint(lat: 5, lon: 2)))
    }

    @Test func aConcaveRing() {
        // A "U": the notch between the arms is outside.
        let u = GeoRing([GeoPoint(lat: 0, lon: 0), GeoPoint(lat: 0, lon: 3), GeoPoint(lat: 3, lon: 3), GeoPoint(lat: 3, lon: 2),
                         GeoPoint(lat: 1, lon: 2), GeoPoint(lat: 1, lon: 1), GeoPoint(lat: 3, lon: 1), GeoPoint(lat: 3, lon: 0),
                         GeoPoint(lat: 0, lon: 0)])
        #expect(u.contains(GeoPoint(lat: 2, lon: 0.5)))
        #expect(u.contains(GeoPoint(lat: 2, lon: 2.5)))
        #expect(!u.contains(GeoPoint(lat: 2, lon: 1.5)))
        #expect(u.contains(GeoPoint(lat: 0.5, lon: 1.5)))
    }

    @Test func aPointOnASharedEdgeIsInExactlyOneOfTwoNeighbours() {
        let left = square(0, 0, 1, 1), right = square(1, 0, 2, 1)
        let edge = GeoPoint(lat: 0.5, lon: 1)
        #expect(left.contains(edge) != right.contains(edge))
    }

    @Test func theGridFindsTheSameZonesAsTestingEveryZone() {
        // 400 overlapping squares of assorted sizes plus one covering all; 20,000 points.
        var rng = SplitMix(seed: 7)
        func unit() -> Double { Double(rng.next() % 1_000_000) / 1_000_000 }
        var zones: [GeofencingZone] = [GeofencingZone(polygons: [square(-0.1, -0.1, 10.1, 10.1)], rules: [])]
        for _ in 0..<400 {
            let x = unit() * 10, y = unit() * 10, w = 0.05 + unit() * 0.8, h = 0.05 + unit() * 0.8
            zones.append(GeofencingZone(polygons: [square(x, y, x + w, y + h)], rules: []))
        }
        let g = Geofencing(zones: zones, globalRules: [])
        #expect(g.index.columns == ZoneIndex.side(for: 401))
        // The covering square is settled at build time in the cells its border misses.
        #expect(g.index.entries(GeoPoint(lat: 5, lon: 5)).first == Int32(1))  // zone 0, certain
        #expect(g.index.entries(GeoPoint(lat: 0, lon: 0)).first == Int32(0))  // zone 0, to test
        for _ in 0..<20_000 {
            let p = GeoPoint(lat: unit() * 11 - 0.5, lon: unit() * 11 - 0.5)
            let brute = zones.indices.filter { zones[$0].contains(p) }
            #expect(g.zonesContaining(p, time: t) == brute)
        }
    }

    @Test func anEmptyIndexHasNoCandidates() {
        let g = Geofencing(zones: [], globalRules: [ZoneRule(rideEndAllowed: false)])
        #expect(g.index.candidates(GeoPoint(lat: 1, lon: 1)).isEmpty)
        #expect(g.decide(at: GeoPoint(lat: 1, lon: 1), vehicleType: nil, time: t).rules.rideEndAllowed == false)
    }
}
