import Foundation

/// The process's readings of the system clocks, one place for all of them.
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
