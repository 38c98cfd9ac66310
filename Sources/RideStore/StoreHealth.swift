import Glibc
import RideCore
import Synchronization

/// What the store worker last saw of its store, each on a monotonic clock in milliseconds:
/// since when a group (decide, write, settle) or a log sync has been in flight, and when the
/// store last answered and last failed. `/healthz` reads it from any thread; the worker's
/// threads write it. A stuck disk shows as an age, not as a silence.
public struct StoreHealthReport: Sendable, Equatable {
    /// Since when the current group (or probe) has been in flight on the worker thread; nil
    /// when idle.
    public var commitSince: Int64?
    /// Since when the current log sync has been in flight on the sync thread; nil when idle.
    public var syncSince: Int64?
    /// When the store last answered a commit, a sync or a probe.
    public var lastSuccess: Int64?
    /// When a commit or probe last failed, and why.
    public var lastFailure: Int64?
    public var lastFailureMessage: String = ""
    /// Whether the store's last answer was a failure (two answers may share a millisecond).
    public var failing = false

    public init() {}

    /// The store's state at `now`: stalled when a group or a sync has been in flight longer
    /// than `stallMillis`, failing when its last answer was a failure, else ok.
    public func state(now: Int64, stallMillis: Int64) -> StoreState {
        if let s = commitSince, now - s > stallMillis { return .stalled }
        if let s = syncSince, now - s > stallMillis { return .stalled }
        return failing ? .failing : .ok
    }
}

/// `/healthz`'s word for the store.
public enum StoreState: String, Sendable {
    case ok, stalled, failing
}

/// The worker's record of its store (see `StoreHealthReport`), shared with readers on other
/// threads. Its clock is injected so tests step time by hand, and `changed` runs after every
/// change (on the thread that made it), so a test waits for one on a condition, not a poll.
public final class StoreHealth: Sendable {
    private let report = Locked(StoreHealthReport())  // Locked, not Mutex: TSan sees pthread locks only
    public let clock: @Sendable () -> Int64
    private let changed: (@Sendable () -> Void)?

    public init(clock: @escaping @Sendable () -> Int64 = StoreHealth.monotonicMillis, changed: (@Sendable () -> Void)? = nil) {
        self.clock = clock
        self.changed = changed
    }

    public static let monotonicMillis: @Sendable () -> Int64 = { systemMicros(CLOCK_MONOTONIC) / 1000 }

    public var snapshot: StoreHealthReport { report.withLock { $0 } }

    public func state(stallMillis: Int64) -> StoreState { snapshot.state(now: clock(), stallMillis: stallMillis) }

    func commitBegan() { let t = clock(); update { $0.commitSince = t } }
    func commitEnded() { update { $0.commitSince = nil } }
    func syncBegan() { let t = clock(); update { $0.syncSince = t } }
    func syncEnded() { update { $0.syncSince = nil } }

    func succeeded() {
        let t = clock()
        update { r in
            r.lastSuccess = t
            r.failing = false
        }
    }

    func failed(_ message: String) {
        let t = clock()
        update { r in
            r.lastFailure = t
            r.lastFailureMessage = message
            r.failing = true
        }
    }

    private func update(_ body: (inout StoreHealthReport) -> Void) {
        report.withLock(body)
        changed?()
    }
}

/// Whether a connection last reached PostgreSQL, readable from any thread (for /healthz and
/// the metrics gauge), with the last failure's message.
public final class ConnectionHealth: Sendable {
    private let state = Locked<(up: Bool, why: String)>((true, ""))  // not Mutex: TSan sees pthread locks only
    /// /healthz's word for the store while this connection is down: `unreachable` for one
    /// server, `failing over` for a multi-host URI (the node is looking for the new primary).
    public let downWord: String
    public init(downWord: String = "unreachable") { self.downWord = downWord }
    public var isUp: Bool { state.withLock { $0.up } }
    public var lastFailure: String { state.withLock { $0.why } }
    public func up() { state.withLock { $0.up = true } }
    public func down(_ why: String) { state.withLock { $0 = (false, why) } }
}

/// How the groups whose COMMIT lost its connection were settled, readable from any thread.
public final class SettleCounts: Sendable {
    /// Read back and found: published as committed.
    public let committed = Atomic<Int>(0)
    /// Read back and not found: answered `unavailable`, nothing applied.
    public let notCommitted = Atomic<Int>(0)
    /// No primary answered within `settleTimeoutMillis` (or nothing to read back): answered
    /// `unavailable` with the outcome unknown; the catch-up read applies it if it committed.
    public let unknown = Atomic<Int>(0)
    public init() {}
}
