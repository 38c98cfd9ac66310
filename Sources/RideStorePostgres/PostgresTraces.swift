import RideCore
import RideStore

// Trace checkpoints (schema 5): one row per ride, overwritten by each checkpoint, written in
// the group's transaction beside the journal writes.
extension PostgresJournal {
    /// Overwrites the ride's checkpoint; one row back when the ride exists, none otherwise.
    /// `strict` (the group's one-round-trip path): a ride that is not there fails the statement
    /// (division by zero), so the group rolls back and the checked path words the refusal.
    static func traceStatement(_ t: TraceCheckpoint, strict: Bool = false) -> (sql: String, params: [PGValue]) {
        let plain = traceStatement(t)
        return strict ? ("WITH t AS (\(plain.sql)) SELECT 1 / (SELECT count(*)::integer FROM t)", plain.params) : plain
    }

    private static func traceStatement(_ t: TraceCheckpoint) -> (sql: String, params: [PGValue]) {
        let p = t.last
        return ("""
            INSERT INTO ridepush.traces (ride_id, metres, lat, lon, at, accuracy, received_at, vehicle_type)
            SELECT id, $2::bigint, $3::float8, $4::float8, $5::bigint, $6::float8, $7::bigint, $8::text FROM ridepush.rides WHERE id = $1::text
            ON CONFLICT (ride_id) DO UPDATE SET metres = excluded.metres, lat = excluded.lat, lon = excluded.lon,
                at = excluded.at, accuracy = excluded.accuracy, received_at = excluded.received_at, vehicle_type = excluded.vehicle_type
            RETURNING 1
            """, [.text(t.ride), .int(t.metres), .text(p.map { TraceText.text($0.point.lat) }),
                  .text(p.map { TraceText.text($0.point.lon) }), .int(p?.at), .text(p.map { TraceText.text($0.accuracy) }),
                  .int(t.receivedAt), .text(t.vehicleType)])
    }

    static func traceOutcome(_ r: PGResult) -> Outcome { r.count > 0 ? .written : .stale }

    static func writeTrace(_ c: PostgresConnection, _ t: TraceCheckpoint) throws(PostgresError) -> Outcome {
        let st = traceStatement(t)
        return traceOutcome(try c.query(st.sql, st.params))
    }

    static func trace(_ c: PostgresConnection, _ ride: String) throws(PostgresError) -> TraceCheckpoint? {
        // float8 as text is its shortest round-tripping form (extra_float_digits ≥ 1, the default since PostgreSQL 12).
        let r = try c.query("SELECT metres, lat::text, lon::text, at, accuracy::text, received_at, vehicle_type FROM ridepush.traces WHERE ride_id = $1::text",
                            [.text(ride)])
        guard r.count > 0 else { return nil }
        return traceRow(r, 0, ride: ride, offset: 0)
    }

    /// A checkpoint from row `i`, its columns (metres, lat, lon, at, accuracy, received_at,
    /// vehicle_type, as `trace` selects them) from column `offset` on.
    static func traceRow(_ r: PGResult, _ i: Int, ride: String, offset o: Int) -> TraceCheckpoint {
        var last: TracePoint?
        if let lat = TraceText.double(r.optionalText(i, o + 1)), let lon = TraceText.double(r.optionalText(i, o + 2)),
           let at = r.int(i, o + 3), let accuracy = TraceText.double(r.optionalText(i, o + 4)) {
            last = TracePoint(lat: lat, lon: lon, at: at, accuracy: accuracy)
        }
        return TraceCheckpoint(ride: ride, metres: r.int(i, o) ?? 0, last: last, receivedAt: r.int(i, o + 5),
                               vehicleType: r.optionalText(i, o + 6))
    }

    /// The checkpoints of `ids` that have one, in one statement (a group's read-ahead).
    static func tracesStatement(_ ids: [String]) -> (sql: String, params: [PGValue]) {
        ("""
            SELECT t.ride_id, t.metres, t.lat::text, t.lon::text, t.at, t.accuracy::text, t.received_at, t.vehicle_type
            FROM unnest($1::text[]) k(id)
            CROSS JOIN LATERAL (SELECT * FROM ridepush.traces WHERE ride_id = k.id OFFSET 0) t
            """, [.text(arrayLiteral(ids))])
    }
}

extension PostgresStore {
    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? {
        if let cached = prefetchedTraces?[ride] { return cached }
        return try read { (c: PostgresConnection) throws(StoreError) in
            try PostgresJournal.run(label) { () throws(PostgresError) in try PostgresJournal.trace(c, ride) }
        }
    }
}
