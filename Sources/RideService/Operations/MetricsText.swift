import RideCore

/// The `process_*` figures, read by the adapter from /proc at scrape time (never on the tick path).
package struct ProcessFigures: Sendable {
    package var openFiles: Int?, maxFiles: Int?, residentBytes: Int?, startTime: Double?
    package init(openFiles: Int?, maxFiles: Int?, residentBytes: Int?, startTime: Double?) {
        (self.openFiles, self.maxFiles, self.residentBytes, self.startTime) = (openFiles, maxFiles, residentBytes, startTime)
    }
}

extension RideServer {
    /// Prometheus text exposition format 0.0.4.
    package func metricsText(process: ProcessFigures) -> String {
        var out = PrometheusText()
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
            out.metric(name, type, help, samples)
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
        metric("ridepush_store_commits_total", "counter", "Store transactions committed, each holding a group of writes.", [("", Double(worker.commits.load(ordering: .relaxed)))])
        metric("ridepush_store_syncs_total", "counter", "Log syncs (one fsync each) of a store that syncs apart from its commits (SQLite): each makes every commit before it durable.", [("", Double(worker.syncs.load(ordering: .relaxed)))])
        metric("ridepush_store_writes_total", "counter", "Writes in those transactions.", [("", Double(worker.writes.load(ordering: .relaxed)))])
        metric("ridepush_store_ride_reads_total", "counter", "Rides read from the store one by one: lookups of rides not in memory and journals.", [("", Double(m.storeRideReads.load(ordering: .relaxed)))])
        metric("ridepush_control_messages_total", "counter", "Client messages by type and result.",
               m.controlCounts().map { ("{type=\"\($0.type)\",result=\"\($0.result)\"}", Double($0.count)) })
        if let storeHealth = parts.storeHealth, let clusterFeed = parts.clusterFeed {
            metric("ridepush_store_up", "gauge", "1 while the shared PostgreSQL store answers, 0 while it cannot be reached.",
                   [("", storeHealth.isUp ? 1 : 0)])
            if let s = parts.storeSettles {
                metric("ridepush_store_lost_commits_total", "counter",
                       "Groups whose connection broke after COMMIT was sent, by what reading them back on the primary found: committed (published), not_committed (answered unavailable) or unknown (no primary in time; answered unavailable).",
                       [("{outcome=\"committed\"}", Double(s.committed.load(ordering: .relaxed))),
                        ("{outcome=\"not_committed\"}", Double(s.notCommitted.load(ordering: .relaxed))),
                        ("{outcome=\"unknown\"}", Double(s.unknown.load(ordering: .relaxed)))])
            }
            metric("ridepush_cluster_listener_up", "gauge", "1 while this node's LISTEN connection to PostgreSQL is up.",
                   [("", clusterFeed.health.isUp ? 1 : 0)])
            metric("ridepush_cluster_listener_reconnects_total", "counter", "Times the LISTEN connection was opened again after a loss.",
                   [("", Double(clusterFeed.reconnectCount))])
        }
        if let c = clock as? ClockReport {
            metric("ridepush_clock_steps_total", "counter", "Wall-clock steps seen (absorbed by slewing, never followed).", [("", Double(c.steps))])
            metric("ridepush_clock_offset_seconds", "gauge", "Wall clock minus the process clock: what slewing has still to absorb.", [("", Double(c.offsetMillis) / 1000)])
        }
        out.append(parts.geoCounters.prometheusText())
        if let retention = parts.retention { out.append(retention.prometheusText()) }
        if let keys = config.keySource { out.append(keys.prometheusText()) }
        out.histogram("ridepush_tick_lateness_seconds", "How late the shared timer fired after the whole second.", m.lateness)
        out.histogram("ridepush_fanout_duration_seconds", "Time one thread spent handing one tick to its subscribers.", m.fanout)
        metric("ridepush_build_info", "gauge", "Always 1; the labels say which build is running.",
               [("{version=\"\(build.version)\",commit=\"\(build.commit)\"}", 1)])
        // Omitted, not faked, where /proc or the limit cannot be read.
        if let n = process.openFiles { metric("process_open_fds", "gauge", "Open file descriptors.", [("", Double(n))]) }
        if let n = process.maxFiles { metric("process_max_fds", "gauge", "Soft limit on open file descriptors.", [("", Double(n))]) }
        if let n = process.residentBytes { metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [("", Double(n))]) }
        if let t = process.startTime { metric("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, seconds.", [("", t)]) }
        // The sender's counts as of its last outbox read: no I/O here.
        if let sender = parts.webhookSender { out.append(sender.metrics.prometheusText(now: clock.now())) }
        if let push = config.devicePush { out.append(push.prometheusText()) }
        return out.text
    }
}
