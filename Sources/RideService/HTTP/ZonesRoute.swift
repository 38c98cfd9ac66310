import RideCore

/// `GET /zones`: the `--zones` file exactly as loaded (its bytes, validated at start), so the
/// pages draw the same zones the server decides by. Without zones: 404, which the pages read
/// as "no zones" (public/map.js).
package struct ZonesRoute: Sendable {
    package let document: [UInt8]?

    package init(document: [UInt8]?) { self.document = document }

    package func answer() -> HTTPAnswer {
        guard let document else {
            return .error(404, "not_found", "this server has no zones (serve --zones geofencing_zones.json)")
        }
        return HTTPAnswer(status: 200, body: document)
    }
}

extension GeoCounters {
    /// The position counters in the Prometheus text format, as /metrics lists them.
    package func prometheusText() -> String {
        var out = "# HELP ridepush_positions_accepted_total Position reports counted in a ride's trace.\n"
        out += "# TYPE ridepush_positions_accepted_total counter\nridepush_positions_accepted_total \(value(accepted))\n"
        out += "# HELP ridepush_positions_dropped_total Position reports that did not count, by reason (docs/zones.md).\n"
        out += "# TYPE ridepush_positions_dropped_total counter\n"
        for d in drops() { out += "ridepush_positions_dropped_total{reason=\"\(d.reason.rawValue)\"} \(d.count)\n" }
        out += "# HELP ridepush_zone_lookups_total Effective-rule lookups (point in zones), all on the store worker.\n"
        out += "# TYPE ridepush_zone_lookups_total counter\nridepush_zone_lookups_total \(value(zoneLookups))\n"
        out += "# HELP ridepush_trace_checkpoints_total Trace checkpoints written (with transitions and every 30 s while a trace changes).\n"
        out += "# TYPE ridepush_trace_checkpoints_total counter\nridepush_trace_checkpoints_total \(value(checkpoints))\n"
        return out
    }
}
