import RideCore
import Synchronization

/// Process-wide counters for /metrics and /healthz. Atomics, because every service thread
/// bumps them; relaxed ordering is enough for monotonic counters read by a scrape.
package final class Metrics: Sendable {
    package init() {}
    package let connections = Atomic<Int>(0)
    package let subscribers = Atomic<Int>(0)
    package let ticksSent = Atomic<Int>(0)
    package let ticksCoalesced = Atomic<Int>(0)
    package let tickRounds = Atomic<Int>(0)
    package let slowConsumerDisconnects = Atomic<Int>(0)
    package let acceptBackoffs = Atomic<Int>(0)
    package let refusedConnections = Atomic<Int>(0)
    package let rateLimited = Atomic<Int>(0)
    /// Rides read from the store one by one (lookups of rides not in memory, journals).
    package let storeRideReads = Atomic<Int>(0)
    /// Control messages by type and result, as "type|result" → count.
    private let controls = Locked<[String: Int]>([:])  // not Mutex: TSan sees this lock (Locked.swift)
    /// Tick lateness (timer fire − whole second) and fan-out duration: observed in
    /// milliseconds, what the callers measure; exposed in seconds, Prometheus' base unit.
    package let lateness = Histogram(bounds: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000], unit: 0.001)
    package let fanout = Histogram(bounds: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000], unit: 0.001)

    package func add(_ a: borrowing Atomic<Int>, _ n: Int = 1) { a.wrappingAdd(n, ordering: .relaxed) }

    package func control(_ type: String, _ result: String) {
        controls.withLock { $0[type + "|" + result, default: 0] += 1 }
    }

    package func controlCounts() -> [(type: String, result: String, count: Int)] {
        controls.withLock { d in
            d.sorted { $0.key < $1.key }.map {
                let parts = $0.key.split(separator: "|", maxSplits: 1)
                return (String(parts[0]), String(parts.count > 1 ? parts[1] : ""), $0.value)
            }
        }
    }
}

/// A fixed-bucket histogram in the Prometheus sense (cumulative when rendered).
package final class Histogram: Sendable {
    /// Bucket bounds in the unit `observe` is given.
    package let bounds: [Double]
    /// Seconds per observed unit: bounds and sum are multiplied by it when rendered.
    package let unit: Double
    private let state: Locked<(counts: [Int], sum: Double, count: Int)>

    init(bounds: [Double], unit: Double = 1) {
        self.bounds = bounds
        self.unit = unit
        state = Locked((Array(repeating: 0, count: bounds.count + 1), 0, 0))
    }

    package func observe(_ v: Double) {
        let i = bounds.firstIndex { v <= $0 } ?? bounds.count
        state.withLock {
            $0.counts[i] += 1
            $0.sum += v
            $0.count += 1
        }
    }

    package func snapshot() -> (counts: [Int], sum: Double, count: Int) { state.withLock { $0 } }
}
