import RideCore

extension Hub {
    /// Prometheus text exposition format 0.0.4.
    func metricsText() -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (labels, v) in samples {
                out += name + labels + " " + (v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)) + "\n"
            }
        }
        let m = metrics
        metric("ridepush_connections", "gauge", "Open WebSocket connections.", [("", Double(m.connections.load(ordering: .relaxed)))])
        metric("ridepush_subscribers", "gauge", "Ride subscriptions across all connections.", [("", Double(m.subscribers.load(ordering: .relaxed)))])
        let c = registry.counts
        metric("ridepush_rides", "gauge", "Rides in memory by state.",
               [("{state=\"riding\"}", Double(c.riding)), ("{state=\"paused\"}", Double(c.paused)), ("{state=\"ended\"}", Double(c.ended))])
        metric("ridepush_tick_rounds_total", "counter", "Ticks of the shared timer.", [("", Double(m.tickRounds.load(ordering: .relaxed)))])
        metric("ridepush_ticks_sent_total", "counter", "Tick messages written to subscribers.", [("", Double(m.ticksSent.load(ordering: .relaxed)))])
        metric("ridepush_ticks_coalesced_total", "counter", "Ticks replaced by a newer one before a slow subscriber took them.", [("", Double(m.ticksCoalesced.load(ordering: .relaxed)))])
        metric("ridepush_slow_consumer_disconnects_total", "counter", "Subscribers disconnected for not reading their ticks.", [("", Double(m.slowConsumerDisconnects.load(ordering: .relaxed)))])
        metric("ridepush_accept_backoffs_total", "counter", "Times accepting paused at the file descriptor limit.", [("", Double(m.acceptBackoffs.load(ordering: .relaxed)))])
        metric("ridepush_refused_connections_total", "counter", "Connections refused (file limit, per-address limit).", [("", Double(m.refusedConnections.load(ordering: .relaxed)))])
        metric("ridepush_rate_limited_total", "counter", "Control messages refused by the per-connection rate limit.", [("", Double(m.rateLimited.load(ordering: .relaxed)))])
        metric("ridepush_store_commits_total", "counter", "Store transactions committed (one fsync each on SQLite), each holding a group of writes.", [("", Double(storeWorker.commits.load(ordering: .relaxed)))])
        metric("ridepush_store_writes_total", "counter", "Writes in those transactions.", [("", Double(storeWorker.writes.load(ordering: .relaxed)))])
        metric("ridepush_control_messages_total", "counter", "Client messages by type and result.",
               m.controlCounts().map { ("{type=\"\($0.type)\",result=\"\($0.result)\"}", Double($0.count)) })
        histogram(&out, "ridepush_tick_lateness_milliseconds", "How late the shared timer fired after the whole second.", m.lateness)
        histogram(&out, "ridepush_fanout_duration_milliseconds", "Time one thread spent handing one tick to its subscribers.", m.fanout)
        return out
    }

    private func histogram(_ out: inout String, _ name: String, _ help: String, _ h: Histogram) {
        let s = h.snapshot()
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative = 0
        for (i, b) in h.bounds.enumerated() {
            cumulative += s.counts[i]
            out += "\(name)_bucket{le=\"\(b == b.rounded() ? String(Int(b)) : String(b))\"} \(cumulative)\n"
        }
        out += "\(name)_bucket{le=\"+Inf\"} \(s.count)\n\(name)_sum \(s.sum)\n\(name)_count \(s.count)\n"
    }
}
