/// Fixed-bucket latency histogram.
///
/// Every worker process records into the same bucket layout, so merging is plain
/// addition and the merged percentiles are exact to one bucket (0.1 ms) — unlike
/// sampled or per-process percentiles, which cannot be combined.
public struct LatencyHistogram: Equatable, Sendable {
    /// Bucket width in microseconds (0.1 ms: finer than `at`'s 1 ms resolution).
    public static let bucketMicros: Int64 = 100
    /// Values at or above this land in the last (overflow) bucket; `max` stays exact.
    public static let rangeMicros: Int64 = 10_000_000
    public static let bucketCount = Int(rangeMicros / bucketMicros) + 1

    public private(set) var buckets: [UInt64]
    public private(set) var count: UInt64 = 0
    public private(set) var sumMicros: Int64 = 0
    public private(set) var maxMicros: Int64 = -1

    public init() {
        buckets = [UInt64](repeating: 0, count: Self.bucketCount)
    }

    @inline(__always)
    public mutating func record(micros: Int64) {
        let v = max(0, micros)
        let b = min(Int(v / Self.bucketMicros), Self.bucketCount - 1)
        buckets[b] &+= 1
        count &+= 1
        sumMicros &+= v
        if v > maxMicros { maxMicros = v }
    }

    public mutating func merge(_ other: LatencyHistogram) {
        for i in 0..<Self.bucketCount where other.buckets[i] != 0 {
            buckets[i] &+= other.buckets[i]
        }
        count &+= other.count
        sumMicros &+= other.sumMicros
        maxMicros = max(maxMicros, other.maxMicros)
    }

    /// The p-quantile (0...1) in milliseconds: the upper edge of the first bucket whose
    /// cumulative count reaches ceil(p·count), capped at the exact maximum. nil if empty.
    public func percentileMillis(_ p: Double) -> Double? {
        guard count > 0 else { return nil }
        var want = UInt64((p * Double(count)).rounded(.up))
        if want < 1 { want = 1 }
        if want > count { want = count }
        var cum: UInt64 = 0
        for i in 0..<Self.bucketCount {
            cum &+= buckets[i]
            if cum >= want {
                // The overflow bucket has no upper edge: the exact max is the honest answer.
                if i == Self.bucketCount - 1 { return maxMillis }
                let edge = Double(Int64(i + 1) * Self.bucketMicros) / 1000
                return min(edge, maxMillis ?? edge)
            }
        }
        return maxMillis
    }

    public var maxMillis: Double? { count > 0 ? Double(maxMicros) / 1000 : nil }
    public var meanMillis: Double? { count > 0 ? Double(sumMicros) / Double(count) / 1000 : nil }

    /// Sparse form for the worker → parent pipe: only non-empty buckets as [index, count].
    public var sparse: SparseHistogram {
        var pairs: [[UInt64]] = []
        for i in 0..<Self.bucketCount where buckets[i] != 0 {
            pairs.append([UInt64(i), buckets[i]])
        }
        return SparseHistogram(buckets: pairs, sumMicros: sumMicros, maxMicros: maxMicros)
    }

    public init(sparse s: SparseHistogram) {
        self.init()
        for pair in s.buckets where pair.count == 2 && pair[0] < UInt64(Self.bucketCount) {
            buckets[Int(pair[0])] &+= pair[1]
            count &+= pair[1]
        }
        sumMicros = s.sumMicros
        maxMicros = s.maxMicros
    }
}

public struct SparseHistogram: Codable, Equatable, Sendable {
    public var buckets: [[UInt64]]
    public var sumMicros: Int64
    public var maxMicros: Int64
}
