import Foundation
import RideCore
import RideStore
import Synchronization

/// A memory store whose commits and probes fail while a test says so, counting each probe
/// and recording each commit: the one double behind the store worker's health and probe tests
/// and the service's embedded tests (RideServiceTesting).
public final class FlakyStore: RideStore, @unchecked Sendable {  // `script` is Locked; `inner` is the memory store's own lock's
    public let inner = MemoryStore()
    /// Signalled after each probe, failed or not.
    public let probed = DispatchSemaphore(value: 0)
    public let probeFails = Atomic<Bool>(true)
    public let commitFails = Atomic<Bool>(false)

    private struct Script {
        var failNext: StoreError?
        var commits: [[StoreWrite]] = []
        var beforeCommit: (() -> Void)?
    }
    private let script = Locked(Script())

    public init() {}

    /// The next commit throws this, once (a whole group that did not commit).
    public var failNext: StoreError? {
        get { script.withLock { $0.failNext } }
        set { script.withLock { $0.failNext = newValue } }
    }
    /// Every batch committed, in order.
    public var commits: [[StoreWrite]] { script.withLock { $0.commits } }
    /// Runs before each commit: another node's write landing between a group's reads and its commit.
    public var beforeCommit: (() -> Void)? {
        get { script.withLock { $0.beforeCommit } }
        set { script.withLock { $0.beforeCommit = newValue } }
    }

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        if commitFails.load(ordering: .sequentiallyConsistent) { throw StoreError(.unavailable, "disk full") }
        let (fail, hook) = script.withLock { s -> (StoreError?, (() -> Void)?) in
            defer { s.failNext = nil }
            return (s.failNext, s.beforeCommit)
        }
        if let fail { throw fail }
        hook?()
        script.withLock { $0.commits.append(batch) }
        return try inner.commit(batch)
    }

    public func probe() throws(StoreError) {
        defer { probed.signal() }
        if probeFails.load(ordering: .sequentiallyConsistent) { throw StoreError(.unavailable, "still down") }
    }

    public func openRides() throws(StoreError) -> [StoredRide] { try inner.openRides() }
    public func ride(_ id: String) throws(StoreError) -> StoredRide? { try inner.ride(id) }
    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? { try inner.trace(ride) }
    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? { try inner.reply(for: key) }
    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) { try inner.prune(repliesBefore: instant) }
    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        try inner.purgeEnded(before: instant, limit: limit)
    }
    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] { try inner.rides(page, rider: rider, limit: limit) }
    public func close() { inner.close() }
}

// Push targets go straight to the memory store: the scripted faults are the commit's, and a
// test of push registrations through EmbeddedService needs a store that keeps them.
extension FlakyStore: PushTargetStore {
    public func registerPush(_ target: StoredPushTarget) throws(StoreError) { try inner.registerPush(target) }
    @discardableResult
    public func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool {
        try inner.unregisterPush(ride: ride, rider: rider, token: token)
    }
    public func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget] { try inner.pushTargets(ride: ride) }
    public func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget] { try inner.pushToStartTokens(rider: rider) }
}
