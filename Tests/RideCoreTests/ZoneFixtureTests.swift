import Foundation
import Testing
@testable import RideCore

// MobilityData's official GBFS 3.0 test fixture (tests/fixtures/gbfs/README.md): 272 Paris zones.
// Points are derived from the file itself, never typed in, and every "inside" is confirmed by a
// second, independent test (winding number) besides the code under test (even-odd crossings).

fileprivate let fixtureURL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("tests/fixtures/gbfs/geofencing_zones.v3.0.json")

fileprivate func loadFixture() throws -> Geofencing {
    try GBFSZones.parse(Array(try Data(contentsOf: fixtureURL)))
}

/// Winding number of `ring` around `p` (Sunday's algorithm): non-zero inside.
fileprivate func winding(_ ring: [GeoPoint], _ p: GeoPoint) -> Int {
    func side(_ a: GeoPoint, _ b: GeoPoint) -> Double { (b.lon - a.lon) * (p.lat - a.lat) - (p.lon - a.lon) * (b.lat - a.lat) }
    var w = 0
    for (a, b) in zip(ring, ring.dropFirst()) {
        if a.lat <= p.lat {
            if b.lat > p.lat, side(a, b) > 0 { w += 1 }
        } else if b.lat <= p.lat, side(a, b) < 0 {
            w -= 1
        }
    }
    return w
}

/// Inside by winding numbers: in the outer ring, in no hole.
fileprivate func insideByWinding(_ polygon: GeoPolygon, _ p: GeoPoint) -> Bool {
    let rings = polygon.rings.map(\.points)
    return winding(rings[0], p) != 0 && rings.dropFirst().allSatisfy { winding($0, p) == 0 }
}

/// A point inside `polygon`: on the horizontal line through the middle of its box, the
/// midpoint between the first two edge crossings (over all its rings) lies inside it.
fileprivate func interiorPoint(_ polygon: GeoPolygon) -> GeoPoint {
    let lat = (polygon.box.minLat + polygon.box.maxLat) / 2
    var xs: [Double] = []
    for ring in polygon.rings {
        let pts = ring.points
        for (a, b) in zip(pts, pts.dropFirst()) where (a.lat > lat) != (b.lat > lat) {
            xs.append(a.lon + (lat - a.lat) / (b.lat - a.lat) * (b.lon - a.lon))
        }
    }
    xs.sort()
    return GeoPoint(lat: lat, lon: (xs[0] + xs[1]) / 2)
}

fileprivate let now: UnixMillis = 1_764_430_000_000

@Suite struct ZoneFixtureTests {
    @Test func theFixtureLoads() throws {
        let g = try loadFixture()
        #expect(g.version == "3.0")
        #expect(g.zones.count == 272)
        var points = 0
        for zone in g.zones { for polygon in zone.polygons { for ring in polygon.rings { points += ring.coordinates.count / 2 } } }
        #expect(points == 2613)
        #expect(g.globalRules == [ZoneRule(vehicleTypeIDs: ["ebicycle_paris", "escooter_paris"], rideStartAllowed: false,
                                           rideEndAllowed: false, rideThroughAllowed: false)])
        #expect(g.zones.filter { $0.polygons.contains { $0.rings.count > 1 } }.count == 1)
        print("zones fixture: \(g.zones.count) zones, grid \(g.index.columns)×\(g.index.rows), \(g.index.entries) cell entries")
    }

    @Test func aStartInsideTrocaderoPlusJardinsIsRefused() throws {
        let g = try loadFixture()
        let matches = g.zones.indices.filter { g.zones[$0].name == "Trocadéro + Jardins" }
        #expect(matches.count == 1)
        let i = try #require(matches.first)
        let polygon = g.zones[i].polygons[0]
        let p = interiorPoint(polygon)
        #expect(insideByWinding(polygon, p))
        #expect(polygon.contains(p))
        #expect(g.zonesContaining(p, time: now).contains(i))
        // An e-scooter: the first zone here whose rules name e-scooters is this one.
        let scooter = g.decide(at: p, vehicleType: "escooter_paris", time: now)
        #expect(scooter == ZoneDecision(zone: i, name: "Trocadéro + Jardins",
                                        rules: ZoneRules(rideStartAllowed: false, rideEndAllowed: false,
                                                         rideThroughAllowed: false, maximumSpeedKph: 2)))
        // An e-bike, by the same precedence: the file lists the e-bike operating area "BA Nov 23"
        // first, which allows everything and sets no speed, so it decides the three booleans and
        // the speed limit falls through to this zone's 2 km/h.
        let first = try #require(g.zonesContaining(p, time: now).first)
        #expect(first < i)
        #expect(g.zones[first].name == "BA Nov 23")
        let bike = g.decide(at: p, vehicleType: "ebicycle_paris", time: now)
        #expect(bike == ZoneDecision(zone: first, name: "BA Nov 23", rules: ZoneRules(maximumSpeedKph: 2)))
        // A ride without a vehicle type: every rule in this file names its types, so none applies.
        #expect(g.decide(at: p, vehicleType: nil, time: now) == ZoneDecision(zone: nil, name: nil, rules: .unrestricted))
    }

    @Test func theHoleOfTheOuterZoneIsParisItself() throws {
        let g = try loadFixture()
        let outer = try #require(g.zones.firstIndex { $0.name == "PARIS-outer-constrained#1" })
        let polygon = g.zones[outer].polygons.first { $0.rings.count > 1 }!
        // Between the outer ring and the hole: in the zone.
        let ring = interiorPoint(polygon)
        #expect(insideByWinding(polygon, ring))
        #expect(g.zones[outer].contains(ring))
        // Inside the hole: outside the zone, though inside its outer ring.
        let hole = GeoPolygon(rings: [polygon.rings[1]])
        let centre = interiorPoint(hole)
        #expect(winding(polygon.rings[0].points, centre) != 0)
        #expect(!insideByWinding(polygon, centre))
        #expect(!g.zones[outer].contains(centre))
        #expect(!g.zonesContaining(centre, time: now).contains(outer))
    }

    @Test func theGridAgreesWithABruteForceScanAcrossParis() throws {
        let g = try loadFixture()
        var rng = SplitMix(seed: 2024)
        let b = g.index.box
        var inSome = 0
        for _ in 0..<5000 {
            let p = GeoPoint(lat: b.minLat - 0.01 + Double(rng.next() % 100_000) / 100_000 * (b.maxLat - b.minLat + 0.02),
                             lon: b.minLon - 0.01 + Double(rng.next() % 100_000) / 100_000 * (b.maxLon - b.minLon + 0.02))
            let brute = g.zones.indices.filter { g.zones[$0].contains(p) }
            #expect(g.zonesContaining(p, time: now) == brute)
            if !brute.isEmpty { inSome += 1 }
        }
        // The sample reaches zones at all (the operating area covers most of the box).
        #expect(inSome > 1000)
    }

    /// Not a timed test: prints what a lookup costs here, for the notes; asserts only that the
    /// lookups ran and found something.
    @Test func lookupCostIsPrinted() throws {
        let g = try loadFixture()
        var rng = SplitMix(seed: 99)
        let b = g.index.box
        let points = (0..<2000).map { _ in
            GeoPoint(lat: b.minLat + Double(rng.next() % 100_000) / 100_000 * (b.maxLat - b.minLat),
                     lon: b.minLon + Double(rng.next() % 100_000) / 100_000 * (b.maxLon - b.minLon))
        }
        let rounds = 50
        var refused = 0
        let clock = ContinuousClock()
        let grid = clock.measure {
            for _ in 0..<rounds {
                for p in points where !g.decide(at: p, vehicleType: "escooter_paris", time: now).rules.rideEndAllowed { refused += 1 }
            }
        }
        var bruteRefused = 0
        let brute = clock.measure {
            for p in points {
                var acc = Geofencing.Accumulator()
                for z in g.zones where z.contains(p) { for r in z.rules where r.applies(to: "escooter_paris") { acc.fill(r) } }
                for r in g.globalRules where r.applies(to: "escooter_paris") { acc.fill(r) }
                if !acc.rules.rideEndAllowed { bruteRefused += 1 }
            }
        }
        #expect(refused == bruteRefused * rounds)
        let n = Double(points.count * rounds)
        let perLookup = Double(grid.components.attoseconds) / 1e9 / n + Double(grid.components.seconds) * 1e9 / n
        let perBrute = Double(brute.components.attoseconds) / 1e9 / Double(points.count) + Double(brute.components.seconds) * 1e9 / Double(points.count)
        print("zones fixture lookup (debug build): grid \(Int(perLookup)) ns, scan of all 272 zones \(Int(perBrute)) ns per point")
    }
}
