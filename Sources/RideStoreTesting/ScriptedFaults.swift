import Foundation
import RideCore
import RideStore

/// Faults a unit test switches by hand: a commit or log sync held at a gate until released,
/// and the next commits or syncs failing with a given error. Thread-safe: the test steers it
/// while the worker and sync threads consult it.
public final class ScriptedFaults: StoreFaultInjection, Sendable {
    private let state = Locked(State())  // Locked, not Mutex: TSan sees pthread locks only
    private struct State {
        var holdCommits = false
        var holdSyncs = false
        var commitFailure: StoreError?
        var syncFailure: StoreError?
    }
    /// Signalled each time a commit (sync) reaches a closed gate.
    public let commitHeld = DispatchSemaphore(value: 0)
    public let syncHeld = DispatchSemaphore(value: 0)
    private let commitGate = DispatchSemaphore(value: 0)
    private let syncGate = DispatchSemaphore(value: 0)

    public init() {}

    /// Holds every later commit (sync) at its gate until `releaseCommit` (`releaseSync`).
    public func holdCommits(_ on: Bool) { state.withLock { $0.holdCommits = on } }
    public func holdSyncs(_ on: Bool) { state.withLock { $0.holdSyncs = on } }
    public func releaseCommit() { commitGate.signal() }
    public func releaseSync() { syncGate.signal() }
    /// Every later commit (sync) throws `error` until set back to nil.
    public func failCommits(with error: StoreError?) { state.withLock { $0.commitFailure = error } }
    public func failSyncs(with error: StoreError?) { state.withLock { $0.syncFailure = error } }

    public func beforeCommit() {
        guard state.withLock({ $0.holdCommits }) else { return }
        commitHeld.signal()
        commitGate.wait()
    }

    public func beforeSync() {
        guard state.withLock({ $0.holdSyncs }) else { return }
        syncHeld.signal()
        syncGate.wait()
    }

    public func commitFailure() -> StoreError? { state.withLock { $0.commitFailure } }
    public func syncFailure() -> StoreError? { state.withLock { $0.syncFailure } }
}
