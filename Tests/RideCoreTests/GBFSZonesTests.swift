import Testing
@testable import RideCore

// geofencing_zones.json in: both GBFS generations, and refusals that name the line and column.

fileprivate func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

fileprivate func refusal(_ s: String) -> String? {
    do {
        _ = try GBFSZones.parse(bytes(s))
        return nil
    } catch {
        return error.description
    }
}

/// The spec's v3.1-RC example (gbfs.md "Geofencing Examples"), as published.
fileprivate let specExample = """
{
  "last_updated": "2023-07-17T13:34:13+02:00",
  "ttl": 300,
  "version": "3.1-RC",
  "data": {
    "geofencing_zones": {
      "type": "FeatureCollection",
      "features": [
        {
          "type": "Feature",
          "geometry": {
            "type": "MultiPolygon",
            "coordinates": [[[[-122.578067, 45.562982], [-122.661838, 45.562741], [-122.661151, 45.504542],
                              [-122.578926, 45.5046625], [-122.578067, 45.562982]]]]
          },
          "properties": {
            "name": [{"text": "NE 24th/NE Knott", "language": "en"}],
            "start": "2023-07-17T13:34:13+02:00",
            "end": "2024-07-18T13:34:13+02:00",
            "rules": [
              {
                "vehicle_type_ids": ["moped1", "car1"],
                "ride_start_allowed": true,
                "ride_end_allowed": true,
                "ride_through_allowed": true,
                "maximum_speed_kph": 10,
                "station_parking": true
              }
            ]
          }
        }
      ]
    },
    "global_rules": [
      {
        "ride_start_allowed": false,
        "ride_end_allowed": false,
        "ride_through_allowed": true
      }
    ]
  }
}
"""

/// A v3 document with one zone whose single rule is `rule` (the text of the object).
fileprivate func v3(rule: String, global: String = #"[{"ride_start_allowed":true,"ride_end_allowed":true,"ride_through_allowed":true}]"#) -> String {
    """
    {"version": "3.0", "last_updated": "2024-01-01T00:00:00Z", "ttl": 60,
     "data": {
      "geofencing_zones": {"type": "FeatureCollection", "features": [
       {"type": "Feature",
        "geometry": {"type": "MultiPolygon", "coordinates": [[[[0,0],[1,0],[1,1],[0,1],[0,0]]]]},
        "properties": {"rules": [
          \(rule)
        ]}}]},
      "global_rules": \(global)}}
    """
}

@Suite struct GBFSZonesTests {
    @Test func theSpecsExampleLoadsWithItsTimeRangeAndRules() throws {
        let g = try GBFSZones.parse(bytes(specExample))
        #expect(g.version == "3.1-RC")
        #expect(g.zones.count == 1)
        let z = g.zones[0]
        #expect(z.name == "NE 24th/NE Knott")
        #expect(z.start == 1_689_593_653_000)  // 2023-07-17T11:34:13Z
        #expect(z.end == 1_721_302_453_000)    // 2024-07-18T11:34:13Z
        #expect(z.rules == [ZoneRule(vehicleTypeIDs: ["moped1", "car1"], rideStartAllowed: true, rideEndAllowed: true,
                                     rideThroughAllowed: true, maximumSpeedKph: 10, stationParking: true)])
        #expect(g.globalRules == [ZoneRule(rideStartAllowed: false, rideEndAllowed: false, rideThroughAllowed: true)])
        let inside = GeoPoint(lat: 45.53, lon: -122.62)
        let active: UnixMillis = 1_700_000_000_000
        let moped = g.decide(at: inside, vehicleType: "moped1", time: active)
        #expect(moped == ZoneDecision(zone: 0, name: "NE 24th/NE Knott",
                                      rules: ZoneRules(maximumSpeedKph: 10, stationParking: true)))
        // A bike is not in the zone's rule: the global rules hold, and so they do once the zone ends.
        #expect(g.decide(at: inside, vehicleType: "bike", time: active).rules.rideStartAllowed == false)
        #expect(g.decide(at: inside, vehicleType: "moped1", time: z.end!).rules.rideStartAllowed == false)
        #expect(g.decide(at: GeoPoint(lat: 45.6, lon: -122.62), vehicleType: "moped1", time: active).zone == nil)
    }

    @Test func aVersion2FileWithRideAllowedAndTheSingularVehicleTypeID() throws {
        let doc = """
        {"last_updated": 1640887163, "ttl": 60, "version": "2.2",
         "data": {"geofencing_zones": {"type": "FeatureCollection", "features": [
           {"type": "Feature",
            "geometry": {"type": "MultiPolygon", "coordinates": [[[[0,0],[2,0],[2,2],[0,2],[0,0]]]]},
            "properties": {"name": "Park", "start": 1640887163, "end": 1672423163,
              "rules": [{"vehicle_type_id": ["scooter"], "ride_allowed": false, "ride_through_allowed": true,
                         "maximum_speed_kph": 8}]}}]}}}
        """
        let g = try GBFSZones.parse(bytes(doc))
        #expect(g.globalRules.isEmpty)
        #expect(g.zones[0].names.map(\.language) == [""])
        #expect(g.zones[0].start == 1_640_887_163_000)
        let d = g.decide(at: GeoPoint(lat: 1, lon: 1), vehicleType: "scooter", time: 1_650_000_000_000)
        #expect(d == ZoneDecision(zone: 0, name: "Park",
                                  rules: ZoneRules(rideStartAllowed: false, rideEndAllowed: false, maximumSpeedKph: 8)))
    }

    @Test func explicitStartAndEndWinOverRideAllowedAndBothTypeListsAreRead() throws {
        let g = try GBFSZones.parse(bytes(v3(rule: #"{"vehicle_type_ids": ["a"], "vehicle_type_id": ["b", "a"], "ride_allowed": false, "ride_end_allowed": true, "ride_through_allowed": true}"#)))
        #expect(g.zones[0].rules == [ZoneRule(vehicleTypeIDs: ["a", "b"], rideStartAllowed: false, rideEndAllowed: true,
                                              rideThroughAllowed: true)])
    }

    @Test func aGeoJSONPolygonIsReadAsOnePolygon() throws {
        let doc = v3(rule: #"{"ride_start_allowed": false, "ride_end_allowed": true, "ride_through_allowed": true}"#)
            .replacingOccurrences(of: #""MultiPolygon", "coordinates": [[[[0,0],[1,0],[1,1],[0,1],[0,0]]]]"#,
                                  with: #""Polygon", "coordinates": [[[0,0],[1,0],[1,1],[0,1],[0,0]]]"#)
        let g = try GBFSZones.parse(bytes(doc))
        #expect(g.decide(at: GeoPoint(lat: 0.5, lon: 0.5), vehicleType: nil, time: 0).rules.rideStartAllowed == false)
    }

    @Test func refusalsNameTheLineColumnAndField() {
        // Line 7 is the rule: a bad value is pointed at itself, a missing field at the rule object
        // (column 7). Every position here was checked against a separate substring search in Python.
        #expect(refusal(v3(rule: #"{"ride_start_allowed": true, "ride_end_allowed": "no", "ride_through_allowed": true}"#))
            == #"line 7, column 56: data.geofencing_zones.features[0].properties.rules[0].ride_end_allowed: must be true or false (got "no")"#)
        #expect(refusal(v3(rule: #"{"ride_start_allowed": true, "ride_end_allowed": true}"#))
            == "line 7, column 7: data.geofencing_zones.features[0].properties.rules[0].ride_through_allowed: is required")
        #expect(refusal(v3(rule: #"{"ride_end_allowed": true, "ride_through_allowed": true}"#))
            == "line 7, column 7: data.geofencing_zones.features[0].properties.rules[0].ride_start_allowed: is required (or the 2.x ride_allowed)")
        #expect(refusal(v3(rule: #"{"ride_allowed": true, "ride_through_allowed": true, "maximum_speed_kph": 12.5}"#))
            == "line 7, column 81: data.geofencing_zones.features[0].properties.rules[0].maximum_speed_kph: must be a whole number of km/h from 0 to 1000 (got 12.5)")
        #expect(refusal(v3(rule: #"{"vehicle_type_ids": [], "ride_allowed": true, "ride_through_allowed": true}"#))
            == "line 7, column 28: data.geofencing_zones.features[0].properties.rules[0].vehicle_type_ids: must list at least one vehicle type (leave it out for all types)")
    }

    @Test func refusalsOfGeometry() {
        let ok = #"{"ride_allowed": true, "ride_through_allowed": true}"#
        func geometry(_ g: String) -> String? {
            refusal(v3(rule: ok).replacingOccurrences(of: #"[[[[0,0],[1,0],[1,1],[0,1],[0,0]]]]"#, with: g))
        }
        #expect(geometry("[[[[0,0],[1,0],[1,1],[0,1],[0,0.5]]]]")
            == "line 5, column 84: data.geofencing_zones.features[0].geometry.coordinates[0][0][4]: a ring must end where it starts (RFC 7946 §3.1.6)")
        #expect(geometry("[[[[0,0],[1,0],[0,0]]]]")
            == "line 5, column 59: data.geofencing_zones.features[0].geometry.coordinates[0][0]: a ring needs at least 4 positions, the last equal to the first (got 3)")
        #expect(geometry("[[[[0,0],[1,0],[1,91],[0,1],[0,0]]]]")
            == "line 5, column 75: data.geofencing_zones.features[0].geometry.coordinates[0][0][2][1]: latitude must be a number from -90 to 90 (got 91)")
        #expect(geometry("[[[[0,0],[1,0],[1,1],[\"0\",1],[0,0]]]]")
            == #"line 5, column 79: data.geofencing_zones.features[0].geometry.coordinates[0][0][3][0]: longitude must be a number from -180 to 180 (got "0")"#)
        #expect(geometry("[]") == "line 5, column 57: data.geofencing_zones.features[0].geometry.coordinates: must hold at least one polygon")
    }

    @Test func refusalsOfTheDocument() {
        #expect(refusal(#"{"version": "2.0", "data": {}}"#)
            == #"line 1, column 13: version: "2.0" is not a GBFS version with geofencing zones (2.1 to 3.1)"#)
        #expect(refusal(#"{"data": {}}"#) == "line 1, column 1: version: is required")
        #expect(refusal("{\"version\": \"3.0\",\n \"data\": {\"geofencing_zones\": {\"type\": \"FeatureCollection\", \"features\": []}}}")
            == "line 2, column 10: data.global_rules: is required from GBFS 3.0 on (the rules outside every zone)")
        #expect(refusal("{\"version\": \"3.0\",\n \"data\": {\"geofencing_zones\": {\"type\": \"Feature\", \"features\": []}, \"global_rules\": []}}")
            == #"line 2, column 40: data.geofencing_zones.type: must be "FeatureCollection" (got "Feature")"#)
        #expect(refusal("{\"version\": \"3.0\",\n  \"data\": [1,\n 2") == "line 3, column 3: invalid JSON: unexpected end")
        #expect(refusal(v3(rule: #"{"ride_allowed": true, "ride_through_allowed": true}"#)
            .replacingOccurrences(of: #""properties": {"#, with: #""properties": {"start": "2024-13-01T00:00:00Z", "#))
            == #"line 6, column 29: data.geofencing_zones.features[0].properties.start: "2024-13-01T00:00:00Z" is not an RFC 3339 time such as 2024-07-18T13:34:13+02:00"#)
        #expect(refusal(v3(rule: #"{"ride_allowed": true, "ride_through_allowed": true}"#)
            .replacingOccurrences(of: #""properties": {"#, with: #""properties": {"start": 1700000000, "end": 1600000000, "#))
            == "line 6, column 48: data.geofencing_zones.features[0].properties.end: must be after start (the zone would never be active)")
    }

    @Test func versions() {
        for v in ["2.1", "2.2", "2.3", "3.0", "3.1", "3.1-RC", "3.1-RC2", "3.1-RC3"] { #expect(GBFSZones.supportedMajor(v) != nil, "\(v)") }
        for v in ["2.0", "1.1", "3.2", "3.1-beta", "3", ""] { #expect(GBFSZones.supportedMajor(v) == nil, "\(v)") }
    }

    @Test func rfc3339() {
        #expect(RFC3339.millis("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.millis("2019-07-04T13:33:03.969Z") == 1_562_247_183_969)
        #expect(RFC3339.millis("2023-07-17T13:34:13+02:00") == 1_689_593_653_000)
        #expect(RFC3339.millis("2023-07-17T06:04:13-05:30") == 1_689_593_653_000)
        #expect(RFC3339.millis("2024-02-29t00:00:00z") == 1_709_164_800_000)
        for bad in ["2023-07-17", "2023-07-17T13:34:13", "2023-07-17T25:00:00Z", "2023-07-17T13:34:13+0200", "2023-07-17T13:34:13.Z"] {
            #expect(RFC3339.millis(bad) == nil, "\(bad)")
        }
    }

    @Test func locationsOfKeysAndElements() {
        let text = bytes("{\"a\": [1, {\"b\\u0020c\": true}],\n \"a\": [null, {\"x\": [[2]]}]}")
        // A repeated key resolves to the last one, as the parser keeps it.
        #expect(JSONLocation.offset(of: [.key("a"), .index(1), .key("x"), .index(0), .index(0)], in: text) == 52)
        // Past the end of an array: the array itself.
        #expect(JSONLocation.offset(of: [.key("a"), .index(5)], in: text) == 37)
        #expect(JSONLocation.lineColumn(of: 52, in: text) == (2, 22))
        let escaped = bytes("{\"b\\u0020c\": [true]}")
        #expect(JSONLocation.offset(of: [.key("b c"), .index(0)], in: escaped) == 14)
    }
}
