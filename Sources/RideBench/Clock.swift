import Glibc
import RideCore

/// Wall clock in ms with µs precision: the latency is receive time minus the tick's
/// "at", which the server takes from the wall clock too.
@inline(__always)
func realtimeMillis() -> Double { Double(systemMicros(CLOCK_REALTIME)) / 1000 }

/// Monotonic µs for pacing and timeouts (immune to wall-clock steps).
@inline(__always)
func monotonicMicros() -> Int64 { systemMicros(CLOCK_MONOTONIC) }

/// The measurement window, in wall-clock ms, shared by every worker.
public struct BenchWindow: Equatable, Sendable {
    public var t0: Int64
    public var t1: Int64
    public var end: Int64

    /// Ticks fire on whole wall-clock seconds; the window starts half a second after a
    /// whole second so its edges fall between ticks: a window of D seconds holds D ticks.
    public static func after(readyMillis: Int64, warmup: Int, duration: Int, grace: Int) -> BenchWindow {
        let nextSecond = (readyMillis / 1000 + 1) * 1000
        let t0 = nextSecond + Int64(warmup) * 1000 + 500
        let t1 = t0 + Int64(duration) * 1000
        return BenchWindow(t0: t0, t1: t1, end: t1 + Int64(grace) * 1000)
    }

    public func contains(at: Int64) -> Bool { at >= t0 && at < t1 }
}

/// stderr without touching the C `stderr` global (not concurrency-safe in Swift 6).
func printErr(_ s: String) {
    var bytes = Array(s.utf8)
    if bytes.last != 0x0A { bytes.append(0x0A) }
    var off = 0
    while off < bytes.count {
        let w = bytes.withUnsafeBytes { write(2, $0.baseAddress! + off, bytes.count - off) }
        if w <= 0 { if errno == EINTR { continue }; return }
        off += w
    }
}
