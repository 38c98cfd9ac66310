/// The Prometheus text exposition format 0.0.4, written once for every family /metrics has
/// (the adapter only reads the figures): `# HELP`, `# TYPE`, then the samples.
package struct PrometheusText {
    package private(set) var text = ""

    package init() {}

    /// One family: `samples` are (labels, value), labels written as `{k="v",…}` or empty.
    package mutating func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, Double)]) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        for (labels, v) in samples {
            text += name + labels + " " + (v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)) + "\n"
        }
    }

    /// A histogram's cumulative buckets, sum and count, in the histogram's unit.
    package mutating func histogram(_ name: String, _ help: String, _ h: Histogram) {
        let s = h.snapshot()
        text += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative = 0
        for (i, b) in h.bounds.enumerated() {
            cumulative += s.counts[i]
            text += "\(name)_bucket{le=\"\(Self.number(b * h.unit))\"} \(cumulative)\n"
        }
        text += "\(name)_bucket{le=\"+Inf\"} \(s.count)\n\(name)_sum \(Self.number(s.sum * h.unit))\n\(name)_count \(s.count)\n"
    }

    /// Families another component wrote in this format (the geo counters, the webhook sender).
    package mutating func append(_ families: String) { text += families }

    /// 0.001 × 5 is 0.005000000000000001 in binary: bucket bounds and sums at the precision
    /// they were made with (microseconds at most), so `le` labels read as written.
    static func number(_ v: Double) -> String {
        let r = (v * 1e6).rounded() / 1e6
        return r == r.rounded() && abs(r) < 1e15 ? String(Int64(r)) : String(r)
    }
}
