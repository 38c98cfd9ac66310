import Foundation
import Synchronization

/// Unix time in milliseconds: the one unit every instant in RidePush is recorded in.
public typealias UnixMillis = Int64

/// Where "now" comes from. Rides derive elapsed time from recorded instants and a clock,
/// so tests inject a `ManualClock` and advance it by hand instead of sleeping.
public protocol RideClock: Sendable {
    func now() -> UnixMillis
}

public struct SystemClock: RideClock {
    public init() {}
    public func now() -> UnixMillis { systemMicros(CLOCK_REALTIME) / 1000 }
}

public final class ManualClock: RideClock {
    // An atomic, not a Mutex: ThreadSanitizer sees atomics but not Synchronization.Mutex, and
    // reported every test that reads this clock on one thread and advances it on another.
    private let current: Atomic<UnixMillis>
    public init(_ start: UnixMillis = 1_764_430_000_000) { current = Atomic(start) }
    public func now() -> UnixMillis { current.load(ordering: .sequentiallyConsistent) }
    public func advance(seconds: Int64) { advance(millis: seconds * 1000) }
    public func advance(millis: Int64) { current.add(millis, ordering: .sequentiallyConsistent) }
    public func set(_ t: UnixMillis) { current.store(t, ordering: .sequentiallyConsistent) }
}

/// The instant of the next whole wall-clock second strictly after `t`.
@inlinable public func nextWholeSecond(after t: UnixMillis) -> UnixMillis {
    // Floor division: Swift's `/` truncates toward zero, which is wrong before 1970 (t < 0).
    let second = t >= 0 ? t / 1000 : (t - 999) / 1000
    return (second + 1) * 1000
}
