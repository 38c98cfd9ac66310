import RideCore
import RideStore

// Trace checkpoints (schema 8): one row per ride, overwritten by each checkpoint, written in
// the group's transaction beside the journal writes (never a transaction of their own).
extension SQLiteStore {
    /// Writes `t` over the ride's previous checkpoint; false when the ride is unknown.
    func writeTrace(_ t: TraceCheckpoint) throws(StoreError) -> Bool {
        let p = t.last
        try db.run("""
            INSERT INTO traces (ride, metres, lat, lon, at, accuracy, received_at, vehicle_type)
            SELECT n, ?, ?, ?, ?, ?, ?, ? FROM rides WHERE id = ?
            ON CONFLICT (ride) DO UPDATE SET metres = excluded.metres, lat = excluded.lat, lon = excluded.lon,
                at = excluded.at, accuracy = excluded.accuracy, received_at = excluded.received_at, vehicle_type = excluded.vehicle_type
            """, [.int(t.metres), .text(p.map { TraceText.text($0.point.lat) }), .text(p.map { TraceText.text($0.point.lon) }),
                  .int(p?.at), .text(p.map { TraceText.text($0.accuracy) }), .int(t.receivedAt), .text(t.vehicleType), .text(t.ride)])
        return db.changes > 0
    }

    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? {
        var out: TraceCheckpoint?
        try db.query("""
            SELECT t.metres, t.lat, t.lon, t.at, t.accuracy, t.received_at, t.vehicle_type FROM traces t JOIN rides r ON r.n = t.ride WHERE r.id = ?
            """, [.text(ride)]) { (r: SQLRow) throws(StoreError) in
            var last: TracePoint?
            if let lat = TraceText.double(r.optionalText(1)), let lon = TraceText.double(r.optionalText(2)), let at = r.optionalInt(3),
               let accuracy = TraceText.double(r.optionalText(4)) {
                last = TracePoint(lat: lat, lon: lon, at: at, accuracy: accuracy)
            }
            out = TraceCheckpoint(ride: ride, metres: r.int(0), last: last, receivedAt: r.optionalInt(5), vehicleType: r.optionalText(6))
        }
        return out
    }
}
