import RideCore

// ride.v1's position and zone messages (docs/zones.md, protocol/examples/zones/):
//   client → server  {"type":"position","ride":"r-42","lat":37.5665,"lon":126.978,"at":<unix ms>,"accuracy":8}
//                    `start` may add "lat", "lon" and "vehicle_type"; `end` may add "force": true.
//   server → client  {"type":"zone","ride":"r-42","zone":<name or null>,"rules":{…the four rules…}}
// Kept in one file so the other message files stay as they were: ClientCodec and ServerCodec
// call in here from their decode switches and encoders.

/// `{"type":"position",…}`: one fix from the device. Not answered unless invalid.
public struct PositionReport: Sendable, Equatable {
    public var ride: String
    public var lat: Double
    public var lon: Double
    /// Unix milliseconds of the fix (the device's clock, as its location API stamps it).
    public var at: Int64
    /// Metres (68 % radius); the trace filter drops fixes over 50 m.
    public var accuracy: Double

    public init(ride: String, lat: Double, lon: Double, at: Int64, accuracy: Double) {
        self.ride = ride
        self.lat = lat
        self.lon = lon
        self.at = at
        self.accuracy = accuracy
    }

    /// What the trace filter reads.
    public var tracePoint: TracePoint { TracePoint(lat: lat, lon: lon, at: at, accuracy: accuracy) }
}

/// What `start` and `end` may carry for zones: where a start happens and with which GBFS
/// vehicle type, and an operator's forced end. Nil on an envelope whose message carries none.
public struct ZoneFields: Sendable, Equatable {
    /// `start`: where the vehicle is (both `lat` and `lon`, or neither).
    public var position: GeoPoint?
    /// `start`: a GBFS `vehicle_type_id`, matched against zone rules' `vehicle_type_ids`.
    public var vehicleType: String?
    /// `end`: end even where `ride_end_allowed` is false or no recent position is known
    /// (honoured for ops tokens only; the receipt says so).
    public var force: Bool

    public init(position: GeoPoint? = nil, vehicleType: String? = nil, force: Bool = false) {
        self.position = position
        self.vehicleType = vehicleType
        self.force = force
    }
}

/// `{"type":"zone",…}`: pushed to a ride's subscribers whenever the effective rules at its
/// position change. `zone` is the deciding zone's name, null where only `global_rules` (or
/// nothing) apply.
public struct ZoneUpdate: Sendable, Equatable {
    public var ride: String
    public var zone: String?
    public var rideStartAllowed: Bool
    public var rideEndAllowed: Bool
    public var rideThroughAllowed: Bool
    public var maximumSpeedKph: Int64?

    public init(ride: String, zone: String?, rideStartAllowed: Bool, rideEndAllowed: Bool, rideThroughAllowed: Bool,
                maximumSpeedKph: Int64?) {
        self.ride = ride
        self.zone = zone
        self.rideStartAllowed = rideStartAllowed
        self.rideEndAllowed = rideEndAllowed
        self.rideThroughAllowed = rideThroughAllowed
        self.maximumSpeedKph = maximumSpeedKph
    }

    public init(ride: String, _ d: ZoneDecision) {
        self.init(ride: ride, zone: d.name, rideStartAllowed: d.rules.rideStartAllowed, rideEndAllowed: d.rules.rideEndAllowed,
                  rideThroughAllowed: d.rules.rideThroughAllowed, maximumSpeedKph: d.rules.maximumSpeedKph)
    }
}

// MARK: - Client side

extension ClientCodec {
    /// Longest `vehicle_type` accepted: GBFS IDs are short; this only bounds what is stored.
    public static let maxVehicleTypeLength = 64
    /// Largest `accuracy` accepted, in metres: anything above is not a position fix.
    public static let maxAccuracy = 100_000.0
    /// Latest fix time accepted: 9999-12-31T23:59:59.999Z, the last RFC 3339 instant.
    public static let maxFixTime: Int64 = 253_402_300_799_999

    static func position(_ o: [String: JSON]) throws(ProtocolError) -> PositionReport {
        let ride = try rideID(o)!
        let (lat, lon) = try coordinates(o, required: true)!
        guard let atValue = o["at"], atValue != .null else {
            throw ProtocolError(.badRequest, "\"at\" is required (Unix milliseconds of the fix)")
        }
        guard let at = atValue.int, at >= 0, at <= maxFixTime else {
            throw ProtocolError(.badRequest, "\"at\" must be Unix milliseconds (a whole number from 0 to \(maxFixTime))")
        }
        guard let a = o["accuracy"] else { throw ProtocolError(.badRequest, "\"accuracy\" is required (metres)") }
        guard let accuracy = number(a), accuracy >= 0, accuracy <= maxAccuracy else {
            throw ProtocolError(.badRequest, "\"accuracy\" must be a number of metres from 0 to \(Int(maxAccuracy))")
        }
        return PositionReport(ride: ride, lat: lat, lon: lon, at: at, accuracy: accuracy)
    }

    /// The zone fields of a `start` or `end` (nil when it has none; other types have none).
    /// Public: the server API's create and end read them by the same rules.
    public static func zoneFields(_ o: [String: JSON], type: String) throws(ProtocolError) -> ZoneFields? {
        switch type {
        case "start":
            let place = try coordinates(o, required: false)
            var vehicle: String?
            if let v = o["vehicle_type"], v != .null {
                guard let s = v.string, !s.isEmpty, s.utf8.count <= maxVehicleTypeLength,
                      s.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                    throw ProtocolError(.badRequest, "\"vehicle_type\" must be a GBFS vehicle type id (1-\(maxVehicleTypeLength) printable ASCII characters, no spaces)")
                }
                vehicle = s
            }
            guard place != nil || vehicle != nil else { return nil }
            return ZoneFields(position: place.map { GeoPoint(lat: $0.0, lon: $0.1) }, vehicleType: vehicle)
        case "end":
            guard let f = o["force"], f != .null else { return nil }
            guard let force = f.bool else { throw ProtocolError(.badRequest, "\"force\" must be true or false") }
            return force ? ZoneFields(force: true) : nil
        default:
            return nil
        }
    }

    /// `lat` and `lon` together, in range; nil when both are absent and not required.
    static func coordinates(_ o: [String: JSON], required: Bool) throws(ProtocolError) -> (Double, Double)? {
        let latValue = o["lat"].flatMap { $0 == .null ? nil : $0 }
        let lonValue = o["lon"].flatMap { $0 == .null ? nil : $0 }
        guard latValue != nil || lonValue != nil else {
            if required { throw ProtocolError(.badRequest, "\"lat\" and \"lon\" are required (degrees, WGS 84)") }
            return nil
        }
        guard let latValue, let lonValue else { throw ProtocolError(.badRequest, "\"lat\" and \"lon\" go together") }
        guard let lat = number(latValue), abs(lat) <= 90 else {
            throw ProtocolError(.badRequest, "\"lat\" must be a number of degrees from -90 to 90")
        }
        guard let lon = number(lonValue), abs(lon) <= 180 else {
            throw ProtocolError(.badRequest, "\"lon\" must be a number of degrees from -180 to 180")
        }
        return (lat, lon)
    }

    static func number(_ v: JSON) -> Double? {
        guard let text = v.numberText, let d = Double(text), d.isFinite else { return nil }
        return d
    }

    /// The position message's fields after `type` and `id`.
    static func encodePosition(_ w: inout JSONWriter, _ p: PositionReport) {
        w.field("ride", p.ride)
        w.key("lat")
        writeNumber(&w, p.lat)
        w.key("lon")
        writeNumber(&w, p.lon)
        w.field("at", p.at)
        w.key("accuracy")
        writeNumber(&w, p.accuracy)
    }

    /// A start's or end's zone fields, after its own.
    static func encodeZoneFields(_ w: inout JSONWriter, _ z: ZoneFields?) {
        guard let z else { return }
        if let p = z.position {
            w.key("lat")
            writeNumber(&w, p.lat)
            w.key("lon")
            writeNumber(&w, p.lon)
        }
        if let v = z.vehicleType { w.field("vehicle_type", v) }
        if z.force {
            w.key("force")
            w.bool(true)
        }
    }
}

/// A double as JSON: whole values as integers (`8`, not `8.0`), others in Swift's shortest
/// form that reads back to the same double (`37.5665`), so decode → encode keeps the bytes.
func writeNumber(_ w: inout JSONWriter, _ d: Double) {
    if d == d.rounded(), abs(d) < 1e15 {
        w.int(Int64(d))
    } else {
        w.raw(Array(d.description.utf8))
    }
}

// MARK: - Server side

extension ServerMessages {
    /// `{"type":"zone",…}` for `ride` from the decision at its position.
    public static func zone(ride: String, _ d: ZoneDecision, prefix: Int = 0) -> [UInt8] {
        zone(ZoneUpdate(ride: ride, d), prefix: prefix)
    }

    public static func zone(_ z: ZoneUpdate, prefix: Int = 0) -> [UInt8] {
        ServerCodec.encode(.zone(z), prefix: prefix)
    }
}

extension ServerCodec {
    /// The zone message's fields after `type`.
    static func zoneFields(_ w: inout JSONWriter, _ z: ZoneUpdate) {
        w.field("ride", z.ride)
        w.key("zone")
        if let name = z.zone { w.string(name) } else { w.null() }
        w.key("rules")
        w.beginObject()
        w.key("ride_start_allowed")
        w.bool(z.rideStartAllowed)
        w.key("ride_end_allowed")
        w.bool(z.rideEndAllowed)
        w.key("ride_through_allowed")
        w.bool(z.rideThroughAllowed)
        w.field("maximum_speed_kph", z.maximumSpeedKph)
        w.endObject()
    }
}

extension ServerCodec {
    static func zone(_ f: Fields) throws(ProtocolError) -> ZoneUpdate {
        let rules = try f.object("rules")
        guard f.has("zone") else { throw ProtocolError(.badRequest, "missing \"zone\"") }
        return ZoneUpdate(ride: try f.string("ride"), zone: try f.optionalString("zone"),
                          rideStartAllowed: try flag(rules, "ride_start_allowed"), rideEndAllowed: try flag(rules, "ride_end_allowed"),
                          rideThroughAllowed: try flag(rules, "ride_through_allowed"),
                          maximumSpeedKph: try rules.nullableInt("maximum_speed_kph"))
    }

    static func flag(_ f: Fields, _ k: String) throws(ProtocolError) -> Bool {
        guard let v = f.o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let b = v.bool else { throw ProtocolError(.badRequest, "\"\(k)\" must be true or false") }
        return b
    }
}
