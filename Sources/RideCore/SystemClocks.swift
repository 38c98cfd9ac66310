import Foundation

/// The process's readings of the system clocks, one place for all of them: monotonic time for
/// elapsed time and timers, the wall clock for token times and log lines. The ride clock
/// (SlewingClock.swift) is built on these.

/// clock_gettime in microseconds: the one helper for it (RideBench and the server use it too).
@inline(__always) public func systemMicros(_ id: clockid_t) -> Int64 {
    var ts = timespec()
    clock_gettime(id, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}

@inline(__always) public func monotonicMicros() -> Int64 { systemMicros(CLOCK_MONOTONIC) }

@inline(__always) public func monotonicMillis() -> Int64 { monotonicMicros() / 1000 }

/// A monotonic clock good to a few milliseconds, read without a system call.
@inline(__always) public func coarseMillis() -> Int64 {
    var ts = timespec()
    #if os(Linux)
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
    #else
    clock_gettime(CLOCK_MONOTONIC, &ts)
    #endif
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// Token times (`exp`, `nbf`, `iat`) are instants on the wall clock, so they are judged on it
/// as it reads at that moment. The process's ride clock slews toward the wall after a step (it
/// must never jump), and for the ~33 hours a 10-minute correction takes it would call a fresh
/// token "not yet valid" and accept one that expired minutes ago. Elapsed time and ticks stay
/// on the slewing clock.
public enum WallClock {
    /// Unix seconds now (CLOCK_REALTIME; a vDSO read, no system call).
    public static func seconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    /// Unix milliseconds now (CLOCK_REALTIME): the time printed on a log line.
    public static func millis() -> Int64 { systemMicros(CLOCK_REALTIME) / 1000 }
}
