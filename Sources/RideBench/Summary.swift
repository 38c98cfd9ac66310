import Foundation

/// Server-side figures sampled by the parent from /proc.
struct ServerSample {
    var pid: Int32
    var rssBeforeKiB: Int?      // before the first connection
    var rssAfterKiB: Int?       // at the end of the window
    var hwmKiB: Int?
    var cpuAtT0: Double?
    var cpuAtT1: Double?
    var alive = true
}

/// Everything `ridepush bench` reports, merged over all workers.
struct BenchSummary {
    var options: BenchOptions
    var window: BenchWindow?
    var workersOK = 0
    var attempted = 0
    var connected = 0
    var failed = 0
    var failReasons: [String: Int] = [:]
    var connectSeconds = 0.0
    var openAtT0 = 0
    var openAtEnd = 0
    var closedInWindow = 0
    var messages = 0
    var ticksInWindow = 0
    var seqGaps: Int64 = 0
    var seqDuplicates: Int64 = 0
    var ticksEmitted: Int64 = 0       // distinct seqs seen in the window (all workers)
    var missedInWindow: Int64 = 0     // vs. ticksEmitted, for connections open at t0
    var latency = LatencyHistogram()
    var errors: [String: Int] = [:]
    var pings = 0
    var closesReceived = 0
    var protocolErrors = 0
    var malformed = 0
    var benchCPUSeconds = 0.0
    var server: ServerSample?

    init(options: BenchOptions, window: BenchWindow?, reports: [WorkerReport], server: ServerSample?) {
        self.options = options
        self.window = window
        self.server = server
        var minSeq: Int64 = -1, maxSeq: Int64 = -1
        var counts: [Int: Int] = [:]
        for r in reports {
            workersOK += 1
            attempted += r.attempted
            connected += r.connected
            failed += r.failed
            for (k, v) in r.failReasons { failReasons[k, default: 0] += v }
            connectSeconds = max(connectSeconds, r.connectSeconds)
            openAtT0 += r.openAtT0
            openAtEnd += r.openAtEnd
            closedInWindow += r.closedInWindow
            messages += r.messages
            ticksInWindow += r.ticksInWindow
            seqGaps += r.seqGaps
            seqDuplicates += r.seqDuplicates
            if r.windowMinSeq >= 0 { minSeq = minSeq < 0 ? r.windowMinSeq : min(minSeq, r.windowMinSeq) }
            maxSeq = max(maxSeq, r.windowMaxSeq)
            for pair in r.windowCounts where pair.count == 2 { counts[pair[0], default: 0] += pair[1] }
            latency.merge(LatencyHistogram(sparse: r.latency))
            for (k, v) in r.errors { errors[k, default: 0] += v }
            pings += r.pings
            closesReceived += r.closesReceived
            protocolErrors += r.protocolErrors
            malformed += r.malformed
            benchCPUSeconds += r.cpuSecondsInWindow
        }
        ticksEmitted = maxSeq >= minSeq && minSeq >= 0 ? maxSeq - minSeq + 1 : 0
        missedInWindow = Self.missed(emitted: ticksEmitted, counts: counts)
    }

    /// Ticks that connections open at t0 did not get, against the ticks the server
    /// emitted in the window. `counts` maps "ticks received" to "connections".
    static func missed(emitted: Int64, counts: [Int: Int]) -> Int64 {
        var m: Int64 = 0
        for (got, conns) in counts where Int64(got) < emitted { m += (emitted - Int64(got)) * Int64(conns) }
        return m
    }

    var durationSeconds: Double { Double(options.duration) }
    var messagesPerSecond: Double { Double(ticksInWindow) / durationSeconds }
    var serverCPUSeconds: Double? {
        guard let s = server, let a = s.cpuAtT0, let b = s.cpuAtT1 else { return nil }
        return b - a
    }
    var serverCPUMicrosPerTick: Double? {
        guard let c = serverCPUSeconds, ticksInWindow > 0 else { return nil }
        return c * 1e6 / Double(ticksInWindow)
    }
    var serverCPUPercent: Double? { serverCPUSeconds.map { $0 / durationSeconds * 100 } }
    var serverRSSPerSubscriberKiB: Double? {
        guard let s = server, let a = s.rssBeforeKiB, let b = s.rssAfterKiB, openAtT0 > 0 else { return nil }
        return Double(b - a) / Double(openAtT0)
    }

    var json: JSONOut {
        let o = options
        var kv: [(String, JSONOut)] = [
            ("tool", .string("ridepush bench")),
            ("url", .string("\(o.tls ? "wss" : "ws")://\(o.host):\(o.port)\(o.path)")),
            ("clients", .int(o.clients)),
            ("rides", .int(o.effectiveRides)),
            ("procs", .int(o.effectiveProcs)),
            ("sources", .int(o.sources)),
            ("create", .bool(o.effectiveCreate)),
            ("duration_s", .int(o.duration)),
            ("connected", .int(connected)),
            ("failed", .int(failed)),
            ("fail_reasons", .object(failReasons.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
            ("connect_s", .num(connectSeconds, 3)),
            ("open_at_start", .int(openAtT0)),
            ("open_at_end", .int(openAtEnd)),
            ("closed_in_window", .int(closedInWindow)),
            ("window_start_ms", window.map { .int($0.t0) } ?? .null),
            ("window_end_ms", window.map { .int($0.t1) } ?? .null),
            ("ticks_emitted", .int(ticksEmitted)),
            ("ticks_received", .int(ticksInWindow)),
            ("messages_per_s", .num(messagesPerSecond, 1)),
            ("latency_ms", .object([
                ("p50", .num(latency.percentileMillis(0.50))),
                ("p90", .num(latency.percentileMillis(0.90))),
                ("p99", .num(latency.percentileMillis(0.99))),
                ("max", .num(latency.maxMillis)),
                ("mean", .num(latency.meanMillis)),
            ])),
            ("missed_ticks", .int(seqGaps)),
            ("missed_in_window", .int(missedInWindow)),
            ("seq_duplicates", .int(seqDuplicates)),
            ("errors", .object(errors.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
            ("pings", .int(pings)),
            ("closes_received", .int(closesReceived)),
            ("protocol_errors", .int(protocolErrors + malformed)),
            ("bench_cpu_percent", .num(benchCPUSeconds / durationSeconds * 100, 1)),
        ]
        if let s = server {
            kv.append(("server", .object([
                ("pid", .int(Int64(s.pid))),
                ("alive", .bool(s.alive)),
                ("cpu_s", .num(serverCPUSeconds, 3)),
                ("cpu_percent", .num(serverCPUPercent, 1)),
                ("cpu_us_per_tick", .num(serverCPUMicrosPerTick, 2)),
                ("rss_kib_before", s.rssBeforeKiB.map { .int($0) } ?? .null),
                ("rss_kib_after", s.rssAfterKiB.map { .int($0) } ?? .null),
                ("hwm_kib", s.hwmKiB.map { .int($0) } ?? .null),
                ("rss_kib_per_subscriber", .num(serverRSSPerSubscriberKiB, 2)),
            ])))
        } else {
            kv.append(("server", .null))
        }
        return .object(kv)
    }

    var table: String {
        func f(_ v: Double?, _ places: Int = 1) -> String { v.map { String(format: "%.\(places)f", $0) } ?? "-" }
        let o = options
        var lines: [String] = []
        lines.append("ridepush bench  \(o.tls ? "wss" : "ws")://\(o.host):\(o.port)\(o.path)  \(o.clients) clients, \(o.effectiveRides) rides, \(o.effectiveProcs) procs, \(o.sources) sources, window \(o.duration) s")
        let reasons = failReasons.isEmpty ? "" : " (" + failReasons.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
        lines.append("  connected        \(connected)   failed \(failed)\(reasons)   in \(f(connectSeconds, 1)) s")
        lines.append("  open             \(openAtT0) at start, \(openAtEnd) at end, \(closedInWindow) closed in window")
        lines.append("  messages/s       \(f(messagesPerSecond, 1))   (\(ticksInWindow) ticks of \(ticksEmitted) emitted)")
        lines.append("  latency ms       p50 \(f(latency.percentileMillis(0.5)))  p90 \(f(latency.percentileMillis(0.9)))  p99 \(f(latency.percentileMillis(0.99)))  max \(f(latency.maxMillis))  mean \(f(latency.meanMillis))")
        lines.append("  missed ticks     \(seqGaps) (seq gaps)   \(missedInWindow) in window")
        if !errors.isEmpty {
            lines.append("  errors           " + errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if let s = server {
            lines.append("  server CPU/tick  \(f(serverCPUMicrosPerTick, 2)) µs   (\(f(serverCPUPercent, 1)) % of a core, pid \(s.pid)\(s.alive ? "" : ", exited"))")
            let before = s.rssBeforeKiB.map(String.init) ?? "-", after = s.rssAfterKiB.map(String.init) ?? "-"
            lines.append("  server RSS/sub   \(f(serverRSSPerSubscriberKiB, 2)) KiB   (\(before) KiB before, \(after) KiB after)")
        } else {
            lines.append("  server           (no --pid: CPU and RSS not measured)")
        }
        lines.append("  bench CPU        \(f(benchCPUSeconds / durationSeconds * 100, 1)) % of a core (all workers)")
        return lines.joined(separator: "\n")
    }
}
