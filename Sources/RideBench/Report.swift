/// One JSON line from a worker to the parent (over the worker's stdout pipe).
/// `event` is "ready" (connect phase over) or "result" (after the window).
struct WorkerReport: Codable, Sendable {
    var event = "result"
    var worker = 0
    var attempted = 0
    var connected = 0
    var failed = 0
    var failReasons: [String: Int] = [:]
    var connectSeconds = 0.0
    var readyAtMillis: Int64 = 0
    var openAtT0 = 0
    var openAtEnd = 0
    var closedAfterOpen = 0
    var closedInWindow = 0
    var messages = 0
    var ticksTotal = 0
    var ticksInWindow = 0
    var seqGaps: Int64 = 0
    var seqDuplicates: Int64 = 0
    var windowMinSeq: Int64 = -1
    var windowMaxSeq: Int64 = -1
    /// [ticks received in the window, connections that received that many], for
    /// connections open at t0 — lets the parent count misses against the global tick span.
    var windowCounts: [[Int]] = []
    var latency = SparseHistogram(buckets: [], sumMicros: 0, maxMicros: -1)
    var errors: [String: Int] = [:]
    var pings = 0
    var closesReceived = 0
    var protocolErrors = 0
    var malformed = 0
    var cpuSecondsInWindow = 0.0
}
