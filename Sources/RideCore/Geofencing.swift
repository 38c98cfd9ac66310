/// GBFS geofencing: zones with rules, the global rules, and the effective rules at a point
/// (docs/zones.md). Loaded from `geofencing_zones.json` by `GBFSZones`; pure, no I/O.

/// One GBFS Rule object. A field left out is nil and falls through to the next rule in
/// precedence order (GBFS "Geofencing Rule Precedence": the spec's first overlap example takes
/// `maximum_speed_kph` from a later polygon because the earlier one does not set it).
public struct ZoneRule: Sendable, Equatable {
    /// The vehicle types it applies to; nil: every vehicle type.
    public var vehicleTypeIDs: [String]?
    public var rideStartAllowed: Bool?
    public var rideEndAllowed: Bool?
    public var rideThroughAllowed: Bool?
    public var maximumSpeedKph: Int64?
    public var stationParking: Bool?

    public init(vehicleTypeIDs: [String]? = nil, rideStartAllowed: Bool? = nil, rideEndAllowed: Bool? = nil,
                rideThroughAllowed: Bool? = nil, maximumSpeedKph: Int64? = nil, stationParking: Bool? = nil) {
        self.vehicleTypeIDs = vehicleTypeIDs
        self.rideStartAllowed = rideStartAllowed
        self.rideEndAllowed = rideEndAllowed
        self.rideThroughAllowed = rideThroughAllowed
        self.maximumSpeedKph = maximumSpeedKph
        self.stationParking = stationParking
    }

    /// A ride without a vehicle type is matched only by rules for every vehicle type.
    public func applies(to vehicleType: String?) -> Bool {
        guard let ids = vehicleTypeIDs else { return true }
        guard let vehicleType else { return false }
        return ids.contains(vehicleType)
    }

    var setsAnything: Bool {
        rideStartAllowed != nil || rideEndAllowed != nil || rideThroughAllowed != nil
            || maximumSpeedKph != nil || stationParking != nil
    }
}

/// The rules in force at a point, every field decided. Where no rule says anything, GBFS's
/// "no restrictions apply" holds: everything allowed, no speed limit, parking anywhere.
public struct ZoneRules: Sendable, Equatable {
    public var rideStartAllowed: Bool
    public var rideEndAllowed: Bool
    public var rideThroughAllowed: Bool
    public var maximumSpeedKph: Int64?
    public var stationParking: Bool

    public init(rideStartAllowed: Bool = true, rideEndAllowed: Bool = true, rideThroughAllowed: Bool = true,
                maximumSpeedKph: Int64? = nil, stationParking: Bool = false) {
        self.rideStartAllowed = rideStartAllowed
        self.rideEndAllowed = rideEndAllowed
        self.rideThroughAllowed = rideThroughAllowed
        self.maximumSpeedKph = maximumSpeedKph
        self.stationParking = stationParking
    }

    public static let unrestricted = ZoneRules()
}

/// The answer for one point and vehicle type: the rules, and the zone that decided them.
public struct ZoneDecision: Sendable, Equatable {
    /// Index in the file's `features` of the first zone containing the point whose applicable
    /// rules set any field; nil when only `global_rules` (or nothing) applied.
    public var zone: Int?
    /// That zone's public name (its first localized text), or `features[i]` for an unnamed zone.
    public var name: String?
    public var rules: ZoneRules

    public init(zone: Int?, name: String?, rules: ZoneRules) {
        self.zone = zone
        self.name = name
        self.rules = rules
    }
}

/// One ring of a polygon as `[lon0, lat0, lon1, lat1, …]`, closed (last point = first), with
/// its bounding box: flat doubles keep the crossing test a tight loop over one array.
public struct GeoRing: Sendable, Equatable {
    public let coordinates: [Double]
    public let box: GeoBox

    public init(_ points: [GeoPoint]) {
        var c: [Double] = []
        c.reserveCapacity(points.count * 2)
        for p in points { c.append(p.lon); c.append(p.lat) }
        coordinates = c
        box = GeoBox(points)
    }

    public var points: [GeoPoint] {
        stride(from: 0, to: coordinates.count, by: 2).map { GeoPoint(lat: coordinates[$0 + 1], lon: coordinates[$0]) }
    }

    /// Even-odd crossing test of a ray towards +lon. Half-open on edges, so a point on an edge
    /// shared by two adjacent zones lands in exactly one of them.
    public func contains(_ p: GeoPoint) -> Bool {
        guard box.contains(p) else { return false }
        let x = p.lon, y = p.lat
        var inside = false
        let c = coordinates
        var j = c.count - 2
        var i = 0
        while i < c.count {
            let xi = c[i], yi = c[i + 1], xj = c[j], yj = c[j + 1]
            if (yi > y) != (yj > y), x < (xj - xi) * (y - yi) / (yj - yi) + xi { inside.toggle() }
            j = i
            i += 2
        }
        return inside
    }
}

/// A GeoJSON polygon: the first ring bounds it, every later ring is a hole (RFC 7946 §3.1.6).
/// Ring orientation is not read: GBFS 2.x gave clockwise/counterclockwise a meaning that
/// contradicts RFC 7946, and 3.0 dropped it (docs/zones.md).
public struct GeoPolygon: Sendable, Equatable {
    public let rings: [GeoRing]

    public init(rings: [GeoRing]) { self.rings = rings }

    public var box: GeoBox { rings[0].box }

    public func contains(_ p: GeoPoint) -> Bool {
        guard rings[0].contains(p) else { return false }
        for hole in rings.dropFirst() where hole.contains(p) { return false }
        return true
    }
}

/// A longitude/latitude bounding box. Zones crossing the antimeridian are not supported
/// (none of the operators' feeds have one; docs/zones.md).
public struct GeoBox: Sendable, Equatable {
    public var minLon, minLat, maxLon, maxLat: Double

    public init(minLon: Double, minLat: Double, maxLon: Double, maxLat: Double) {
        self.minLon = minLon
        self.minLat = minLat
        self.maxLon = maxLon
        self.maxLat = maxLat
    }

    init(_ points: [GeoPoint]) {
        var b = GeoBox(minLon: .infinity, minLat: .infinity, maxLon: -.infinity, maxLat: -.infinity)
        for p in points { b.add(p) }
        self = b
    }

    mutating func add(_ p: GeoPoint) {
        minLon = min(minLon, p.lon)
        maxLon = max(maxLon, p.lon)
        minLat = min(minLat, p.lat)
        maxLat = max(maxLat, p.lat)
    }

    mutating func add(_ b: GeoBox) {
        minLon = min(minLon, b.minLon)
        maxLon = max(maxLon, b.maxLon)
        minLat = min(minLat, b.minLat)
        maxLat = max(maxLat, b.maxLat)
    }

    public func contains(_ p: GeoPoint) -> Bool {
        p.lon >= minLon && p.lon <= maxLon && p.lat >= minLat && p.lat <= maxLat
    }
}

/// One feature of the file: where, when, and its rules.
public struct GeofencingZone: Sendable, Equatable {
    /// Language → text, in file order; a GBFS 2.x plain string has language "".
    public var names: [(language: String, text: String)]
    public var polygons: [GeoPolygon]
    /// Unix milliseconds; the zone counts only in [start, end).
    public var start: UnixMillis?
    public var end: UnixMillis?
    public var rules: [ZoneRule]
    public let box: GeoBox

    public init(names: [(language: String, text: String)] = [], polygons: [GeoPolygon], start: UnixMillis? = nil,
                end: UnixMillis? = nil, rules: [ZoneRule]) {
        self.names = names
        self.polygons = polygons
        self.start = start
        self.end = end
        self.rules = rules
        var b = GeoBox(minLon: .infinity, minLat: .infinity, maxLon: -.infinity, maxLat: -.infinity)
        for p in polygons { b.add(p.box) }
        box = b
    }

    public var name: String? { names.first?.text }

    public func isActive(at t: UnixMillis) -> Bool {
        (start.map { t >= $0 } ?? true) && (end.map { t < $0 } ?? true)
    }

    public func contains(_ p: GeoPoint) -> Bool {
        guard box.contains(p) else { return false }
        for polygon in polygons where polygon.contains(p) { return true }
        return false
    }

    public static func == (a: GeofencingZone, b: GeofencingZone) -> Bool {
        a.names.elementsEqual(b.names, by: { $0 == $1 }) && a.polygons == b.polygons && a.start == b.start
            && a.end == b.end && a.rules == b.rules
    }
}

/// A loaded `geofencing_zones.json`: zones in file order, the global rules, and the grid that
/// finds the zones around a point.
public struct Geofencing: Sendable {
    public let version: String
    public let zones: [GeofencingZone]
    public let globalRules: [ZoneRule]
    public let index: ZoneIndex

    public init(version: String = "3.0", zones: [GeofencingZone], globalRules: [ZoneRule]) {
        self.version = version
        self.zones = zones
        self.globalRules = globalRules
        self.index = ZoneIndex(zones)
    }

    /// The effective rules at `point` for `vehicleType` at time `at`, by GBFS precedence:
    /// field by field, the first value set wins, reading the active zones that contain the
    /// point in file order (each zone's applicable rules in order), then `global_rules`.
    public func decide(at point: GeoPoint, vehicleType: String?, time at: UnixMillis) -> ZoneDecision {
        var acc = Accumulator()
        var decided: Int?
        for entry in index.entries(point) {
            let i = Int(entry >> 1)
            let zone = zones[i]
            guard zone.isActive(at: at), entry & 1 == 1 || zone.contains(point) else { continue }
            for rule in zone.rules where rule.applies(to: vehicleType) && rule.setsAnything {
                if decided == nil { decided = i }
                acc.fill(rule)
            }
            if acc.complete { break }
        }
        if !acc.complete {
            for rule in globalRules where rule.applies(to: vehicleType) { acc.fill(rule) }
        }
        let name = decided.map { zones[$0].name ?? "features[\($0)]" }
        return ZoneDecision(zone: decided, name: name, rules: acc.rules)
    }

    /// The indices of the active zones containing `point`, in file order (for maps and tests).
    public func zonesContaining(_ point: GeoPoint, time at: UnixMillis) -> [Int] {
        index.entries(point).compactMap { e in
            let i = Int(e >> 1)
            return zones[i].isActive(at: at) && (e & 1 == 1 || zones[i].contains(point)) ? i : nil
        }
    }

    struct Accumulator {
        var start: Bool?, end: Bool?, through: Bool?, speed: Int64?, parking: Bool?

        var complete: Bool { start != nil && end != nil && through != nil && speed != nil && parking != nil }

        mutating func fill(_ r: ZoneRule) {
            if start == nil { start = r.rideStartAllowed }
            if end == nil { end = r.rideEndAllowed }
            if through == nil { through = r.rideThroughAllowed }
            if speed == nil { speed = r.maximumSpeedKph }
            if parking == nil { parking = r.stationParking }
        }

        var rules: ZoneRules {
            ZoneRules(rideStartAllowed: start ?? true, rideEndAllowed: end ?? true, rideThroughAllowed: through ?? true,
                      maximumSpeedKph: speed, stationParking: parking ?? false)
        }
    }
}
