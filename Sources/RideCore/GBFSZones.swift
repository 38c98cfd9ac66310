/// Reads GBFS `geofencing_zones.json` (v2.1 to v3.1) into `Geofencing`.
///
/// Both generations of the format are read whatever `version` says, because real feeds mix
/// them (MobilityData's own v3.0 test fixture writes the 2.x `vehicle_type_id`):
/// - rule applicability: `vehicle_type_ids` (3.0) and `vehicle_type_id` (2.x); both: their union;
/// - start/end: `ride_start_allowed` + `ride_end_allowed` (3.0), or 2.x `ride_allowed`, which
///   meant "may start and end here" and sets both (an explicit 3.0 field wins over it);
/// - zone names: a 2.x string or a 3.x array of `{text, language}`;
/// - zone `start`/`end`: 2.x POSIX seconds or a 3.x RFC 3339 string.
/// `global_rules` is required from 3.0 on, as the spec says, and read when a 2.x file has it.
/// Every refusal names the field and its line and column (`ZoneFileError`), so a bad file stops
/// the server at start with a message a person can act on.
public enum GBFSZones {
    /// Bounds that keep a lookup cheap and a mistaken file (a country's coastline) from
    /// loading: far above any city's zones (MobilityData's Paris fixture: 272 zones, 2,613 points).
    public static let maxZones = 10_000
    public static let maxPoints = 1_000_000

    public static func parse(_ text: [UInt8]) throws(ZoneFileError) -> Geofencing {
        let root: JSON
        do {
            root = try JSON.parse(text)
        } catch {
            let (line, column) = JSONLocation.lineColumn(of: error.offset, in: text)
            throw ZoneFileError(line: line, column: column, path: "", reason: "invalid JSON: \(error.reason)")
        }
        var r = Reader(text: text)
        let top = try r.object(root, [])
        guard let v = top["version"] else { throw r.fail([.key("version")], "is required") }
        guard let version = v.string else { throw r.fail([.key("version")], "must be a string (got \(describe(v)))") }
        guard let major = supportedMajor(version) else {
            throw r.fail([.key("version")], "\"\(version)\" is not a GBFS version with geofencing zones (2.1 to 3.1)")
        }
        if let lu = top["last_updated"], lu.string == nil, lu.numberText == nil {
            throw r.fail([.key("last_updated")], "must be a POSIX time or an RFC 3339 string (got \(describe(lu)))")
        }
        guard let dataValue = top["data"] else { throw r.fail([.key("data")], "is required") }
        let data = try r.object(dataValue, [.key("data")])

        let fcPath: [JSONPathStep] = [.key("data"), .key("geofencing_zones")]
        guard let fcValue = data["geofencing_zones"] else { throw r.fail(fcPath, "is required") }
        let fc = try r.object(fcValue, fcPath)
        try r.expectType(fc, fcPath, "FeatureCollection")
        guard let featuresValue = fc["features"] else { throw r.fail(fcPath + [.key("features")], "is required") }
        let features = try r.array(featuresValue, fcPath + [.key("features")])
        guard features.count <= maxZones else {
            throw r.fail(fcPath + [.key("features")], "has \(features.count) zones (at most \(maxZones))")
        }
        var zones: [GeofencingZone] = []
        zones.reserveCapacity(features.count)
        for (i, f) in features.enumerated() {
            zones.append(try r.zone(f, fcPath + [.key("features"), .index(i)]))
        }

        let grPath: [JSONPathStep] = [.key("data"), .key("global_rules")]
        var global: [ZoneRule] = []
        if let g = data["global_rules"] {
            global = try r.rules(g, grPath)
        } else if major >= 3 {
            throw r.fail(grPath, "is required from GBFS 3.0 on (the rules outside every zone)")
        }
        return Geofencing(version: version, zones: zones, globalRules: global)
    }

    /// 2 or 3 for the versions that have geofencing zones (2.1, 2.2, 2.3, 3.0, 3.1 and their
    /// release candidates such as "3.1-RC2"); nil otherwise.
    static func supportedMajor(_ version: String) -> Int? {
        let base = version.split(separator: "-", maxSplits: 1).first.map(String.init) ?? version
        if version.contains("-"), !version.hasPrefix(base + "-RC") { return nil }
        switch base {
        case "2.1", "2.2", "2.3": return 2
        case "3.0", "3.1": return 3
        default: return nil
        }
    }

    struct Reader {
        let text: [UInt8]
        var points = 0

        func fail(_ path: [JSONPathStep], _ reason: String) -> ZoneFileError {
            let (line, column) = JSONLocation.lineColumn(of: JSONLocation.offset(of: path, in: text), in: text)
            return ZoneFileError(line: line, column: column, path: JSONLocation.describe(path), reason: reason)
        }

        func object(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> [String: JSON] {
            guard case .object(let o) = v else { throw fail(path, "must be an object (got \(describe(v)))") }
            return o
        }

        func array(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> [JSON] {
            guard case .array(let a) = v else { throw fail(path, "must be an array (got \(describe(v)))") }
            return a
        }

        func expectType(_ o: [String: JSON], _ path: [JSONPathStep], _ want: String) throws(ZoneFileError) {
            guard let t = o["type"] else { throw fail(path + [.key("type")], "is required (\"\(want)\")") }
            guard t.string == want else { throw fail(path + [.key("type")], "must be \"\(want)\" (got \(describe(t)))") }
        }

        func bool(_ o: [String: JSON], _ key: String, _ path: [JSONPathStep]) throws(ZoneFileError) -> Bool? {
            guard let v = o[key] else { return nil }
            guard let b = v.bool else { throw fail(path + [.key(key)], "must be true or false (got \(describe(v)))") }
            return b
        }

        mutating func zone(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> GeofencingZone {
            let o = try object(v, path)
            try expectType(o, path, "Feature")
            guard let g = o["geometry"] else { throw fail(path + [.key("geometry")], "is required") }
            let polygons = try geometry(g, path + [.key("geometry")])
            let pp = path + [.key("properties")]
            guard let pv = o["properties"] else { throw fail(pp, "is required") }
            let p = try object(pv, pp)
            let names = try self.names(p["name"], pp + [.key("name")])
            let start = try time(p["start"], pp + [.key("start")])
            let end = try time(p["end"], pp + [.key("end")])
            if let start, let end, end <= start {
                throw fail(pp + [.key("end")], "must be after start (the zone would never be active)")
            }
            let rules = try p["rules"].map { v throws(ZoneFileError) in try self.rules(v, pp + [.key("rules")]) } ?? []
            return GeofencingZone(names: names, polygons: polygons, start: start, end: end, rules: rules)
        }

        mutating func geometry(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> [GeoPolygon] {
            let o = try object(v, path)
            guard let t = o["type"] else { throw fail(path + [.key("type")], "is required (\"MultiPolygon\")") }
            let cp = path + [.key("coordinates")]
            guard let c = o["coordinates"] else { throw fail(cp, "is required") }
            switch t.string {
            case "MultiPolygon":
                let items = try array(c, cp)
                guard !items.isEmpty else { throw fail(cp, "must hold at least one polygon") }
                var out: [GeoPolygon] = []
                for (i, item) in items.enumerated() { out.append(try polygon(item, cp + [.index(i)])) }
                return out
            case "Polygon":
                // Not what GBFS says, but unambiguous: one polygon.
                return [try polygon(c, cp)]
            default:
                throw fail(path + [.key("type")], "must be \"MultiPolygon\" (got \(describe(t)))")
            }
        }

        mutating func polygon(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> GeoPolygon {
            let items = try array(v, path)
            guard !items.isEmpty else { throw fail(path, "must hold at least one ring (the boundary)") }
            var rings: [GeoRing] = []
            for (i, item) in items.enumerated() { rings.append(try ring(item, path + [.index(i)])) }
            return GeoPolygon(rings: rings)
        }

        mutating func ring(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> GeoRing {
            let items = try array(v, path)
            guard items.count >= 4 else {
                throw fail(path, "a ring needs at least 4 positions, the last equal to the first (got \(items.count))")
            }
            points += items.count
            guard points <= GBFSZones.maxPoints else { throw fail(path, "the file has over \(GBFSZones.maxPoints) points") }
            var out: [GeoPoint] = []
            out.reserveCapacity(items.count)
            for (i, item) in items.enumerated() { out.append(try position(item, path + [.index(i)])) }
            guard out.first == out.last else {
                throw fail(path + [.index(items.count - 1)], "a ring must end where it starts (RFC 7946 §3.1.6)")
            }
            return GeoRing(out)
        }

        func position(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> GeoPoint {
            let a = try array(v, path)
            guard a.count == 2 || a.count == 3 else {
                throw fail(path, "a position is [longitude, latitude] (got \(a.count) numbers)")
            }
            guard let lonText = a[0].numberText, let lon = Double(lonText), lon.isFinite, abs(lon) <= 180 else {
                throw fail(path + [.index(0)], "longitude must be a number from -180 to 180 (got \(describe(a[0])))")
            }
            guard let latText = a[1].numberText, let lat = Double(latText), lat.isFinite, abs(lat) <= 90 else {
                throw fail(path + [.index(1)], "latitude must be a number from -90 to 90 (got \(describe(a[1])))")
            }
            return GeoPoint(lat: lat, lon: lon)
        }

        func names(_ v: JSON?, _ path: [JSONPathStep]) throws(ZoneFileError) -> [(language: String, text: String)] {
            guard let v else { return [] }
            switch v {
            case .string(let s):
                return [("", s)]
            case .array(let items):
                var out: [(language: String, text: String)] = []
                for (i, e) in items.enumerated() {
                    let ep = path + [.index(i)]
                    let o = try object(e, ep)
                    guard let t = o["text"] else { throw fail(ep + [.key("text")], "is required") }
                    guard let text = t.string else { throw fail(ep + [.key("text")], "must be a string (got \(describe(t)))") }
                    guard let l = o["language"] else { throw fail(ep + [.key("language")], "is required") }
                    guard let lang = l.string, !lang.isEmpty else {
                        throw fail(ep + [.key("language")], "must be a language tag such as \"en\" (got \(describe(l)))")
                    }
                    out.append((lang, text))
                }
                return out
            default:
                throw fail(path, "must be a string or an array of {text, language} (got \(describe(v)))")
            }
        }

        /// 2.x POSIX seconds (the 2.1 schema allows a fraction) or a 3.x RFC 3339 string → Unix ms.
        func time(_ v: JSON?, _ path: [JSONPathStep]) throws(ZoneFileError) -> UnixMillis? {
            guard let v else { return nil }
            switch v {
            case .number(let n):
                guard let s = Double(n), s.isFinite, s >= 0, s < 1e12 else {
                    throw fail(path, "must be a POSIX time in seconds (got \(n))")
                }
                return UnixMillis((s * 1000).rounded())
            case .string(let s):
                guard let ms = RFC3339.millis(s) else {
                    throw fail(path, "\"\(s)\" is not an RFC 3339 time such as 2024-07-18T13:34:13+02:00")
                }
                return ms
            default:
                throw fail(path, "must be an RFC 3339 string or a POSIX time (got \(describe(v)))")
            }
        }

        func rules(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> [ZoneRule] {
            let items = try array(v, path)
            var out: [ZoneRule] = []
            for (i, item) in items.enumerated() { out.append(try rule(item, path + [.index(i)])) }
            return out
        }

        func rule(_ v: JSON, _ path: [JSONPathStep]) throws(ZoneFileError) -> ZoneRule {
            let o = try object(v, path)
            var ids: [String]?
            for key in ["vehicle_type_ids", "vehicle_type_id"] {
                guard let list = o[key] else { continue }
                let kp = path + [.key(key)]
                let items = try array(list, kp)
                guard !items.isEmpty else { throw fail(kp, "must list at least one vehicle type (leave it out for all types)") }
                var got = ids ?? []
                for (i, item) in items.enumerated() {
                    guard let s = item.string, !s.isEmpty else {
                        throw fail(kp + [.index(i)], "must be a vehicle type id string (got \(describe(item)))")
                    }
                    if !got.contains(s) { got.append(s) }
                }
                ids = got
            }
            let both = try bool(o, "ride_allowed", path)
            let start = try bool(o, "ride_start_allowed", path) ?? both
            let end = try bool(o, "ride_end_allowed", path) ?? both
            guard let start else { throw fail(path + [.key("ride_start_allowed")], "is required (or the 2.x ride_allowed)") }
            guard let end else { throw fail(path + [.key("ride_end_allowed")], "is required (or the 2.x ride_allowed)") }
            guard let through = try bool(o, "ride_through_allowed", path) else {
                throw fail(path + [.key("ride_through_allowed")], "is required")
            }
            var speed: Int64?
            if let s = o["maximum_speed_kph"] {
                guard let n = s.int, n >= 0, n <= 1000 else {
                    throw fail(path + [.key("maximum_speed_kph")], "must be a whole number of km/h from 0 to 1000 (got \(describe(s)))")
                }
                speed = n
            }
            return ZoneRule(vehicleTypeIDs: ids, rideStartAllowed: start, rideEndAllowed: end, rideThroughAllowed: through,
                            maximumSpeedKph: speed, stationParking: try bool(o, "station_parking", path))
        }
    }
}

/// Why a zones file was refused, and where: `line 12, column 7: data.geofencing_zones.features[3].properties.rules[0].ride_end_allowed: must be true or false (got "no")`.
public struct ZoneFileError: Error, Equatable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    /// The field, from the document's root; empty for a JSON syntax error.
    public var path: String
    public var reason: String

    public init(line: Int, column: Int, path: String, reason: String) {
        self.line = line
        self.column = column
        self.path = path
        self.reason = reason
    }

    public var description: String {
        path.isEmpty ? "line \(line), column \(column): \(reason)" : "line \(line), column \(column): \(path): \(reason)"
    }
}

/// RFC 3339 date-times (`2023-07-17T13:34:13+02:00`, `2019-07-04T13:33:03.969Z`) → Unix ms.
public enum RFC3339 {
    public static func millis(_ s: String) -> UnixMillis? {
        let b = Array(s.utf8)
        func digits(_ at: Int, _ n: Int) -> Int64? {
            guard at + n <= b.count else { return nil }
            var v: Int64 = 0
            for c in b[at..<at + n] {
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int64(c - 0x30)
            }
            return v
        }
        guard b.count >= 20, let y = digits(0, 4), b[4] == UInt8(ascii: "-"), let mo = digits(5, 2), b[7] == UInt8(ascii: "-"),
              let d = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
              let h = digits(11, 2), b[13] == UInt8(ascii: ":"), let mi = digits(14, 2), b[16] == UInt8(ascii: ":"),
              let sec = digits(17, 2) else { return nil }
        guard (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61 else { return nil }
        var i = 19
        var ms: Int64 = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale: Int64 = 100
            let first = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                ms += Int64(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            guard i > first else { return nil }
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"), let om = digits(i + 4, 2),
                  oh < 24, om < 60 else { return nil }
            offset = (oh * 60 + om) * 60 * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        default:
            return nil
        }
        guard i == b.count else { return nil }
        // Howard Hinnant's days_from_civil.
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let mp = (mo + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86400 + h * 3600 + mi * 60 + min(sec, 59) - offset
        return seconds * 1000 + ms
    }
}

/// A short description of a JSON value for error messages.
fileprivate func describe(_ v: JSON) -> String {
    switch v {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .number(let n): return n
    case .string(let s): return "\"\(s.count > 40 ? String(s.prefix(40)) + "…" : s)\""
    case .array: return "an array"
    case .object: return "an object"
    }
}
