import RideCore

// What `state` and `tick` say about where a ride is (issue 28): `distance` (whole metres from
// the trace) and `position` (`{lat, lon, at}`, the last accepted fix). Both are optional so a
// client keeps working against servers that send neither.

/// The ride's last accepted position as the server reports it.
public struct RidePosition: Sendable, Equatable {
    public var lat: Double
    public var lon: Double
    /// Unix milliseconds of the fix; nil when a tick's compact form leaves it out.
    public var at: Int64?

    public init(lat: Double, lon: Double, at: Int64?) {
        self.lat = lat
        self.lon = lon
        self.at = at
    }
}

extension ServerCodec {
    /// `distance` when present (null or absent: nil).
    static func traceDistance(_ f: Fields) throws(ProtocolError) -> Int64? {
        guard let d = try f.optionalInt("distance") else { return nil }
        guard d >= 0 else { throw ProtocolError(.badRequest, "\"distance\" must be a whole number of metres ≥ 0") }
        return d
    }

    /// `position` as `{"lat","lon","at"}` or, compactly, `[lat, lon]` / `[lat, lon, at]`
    /// (the tick's form is the server's to choose); null or absent: nil.
    static func tracePosition(_ f: Fields) throws(ProtocolError) -> RidePosition? {
        guard let v = f.o["position"], v != .null else { return nil }
        let bad = ProtocolError(.badRequest, "\"position\" must be {\"lat\",\"lon\",\"at\"} or [lat, lon, at] with lat -90..90, lon -180..180")
        var lat: Double?, lon: Double?, at: Int64?
        if let o = v.object {
            lat = o["lat"].flatMap(ClientCodec.number)
            lon = o["lon"].flatMap(ClientCodec.number)
            if let a = o["at"], a != .null {
                guard let n = a.int else { throw bad }
                at = n
            }
        } else if let a = v.array, a.count == 2 || a.count == 3 {
            lat = ClientCodec.number(a[0])
            lon = ClientCodec.number(a[1])
            if a.count == 3 {
                guard let n = a[2].int else { throw bad }
                at = n
            }
        }
        guard let lat, let lon, abs(lat) <= 90, abs(lon) <= 180 else { throw bad }
        return RidePosition(lat: lat, lon: lon, at: at)
    }

    /// Writes what `traceDistance`/`tracePosition` read (the object form), when set.
    /// `compact`: `[lat, lon, at]` (a tick's form, ~20 bytes shorter a tick).
    static func encodeTrace(_ w: inout JSONWriter, distance: Int64?, position: RidePosition?, compact: Bool = false) {
        if let d = distance { w.field("distance", d) }
        guard let p = position else { return }
        w.key("position")
        if compact {
            w.beginArray()
            writeNumber(&w, p.lat)
            writeNumber(&w, p.lon)
            if let at = p.at { w.int(at) }
            w.endArray()
            return
        }
        w.beginObject()
        w.key("lat")
        writeNumber(&w, p.lat)
        w.key("lon")
        writeNumber(&w, p.lon)
        if let at = p.at { w.field("at", at) }
        w.endObject()
    }
}

extension RidePosition {
    /// A trace fix as the server reports it.
    public init(_ p: TracePoint) { self.init(lat: p.point.lat, lon: p.point.lon, at: p.at) }
}
