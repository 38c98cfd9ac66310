import Foundation
import RideCore
import RideStore

/// A memory store whose commits wait on `gate` (signalling `entered` first), recording each
/// commit's size: the store worker's group-commit tests hold a commit in flight with it.
/// Driven by the worker thread; the test reads `sizes` only once the worker is quiet.
public final class GatedStore: RideStore {
    public let inner = MemoryStore()
    public let gate = DispatchSemaphore(value: 0)
    public let entered = DispatchSemaphore(value: 0)
    public var sizes: [Int] = []
    /// Set before the commit it should fail is let through the gate.
    public var failWith: StoreError?

    public init() {}

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        entered.signal()
        gate.wait()
        sizes.append(batch.count)
        if let e = failWith { throw e }
        return try inner.commit(batch)
    }

    public func openRides() throws(StoreError) -> [StoredRide] { try inner.openRides() }
    public func ride(_ id: String) throws(StoreError) -> StoredRide? { try inner.ride(id) }
    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? { try inner.trace(ride) }
    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? { try inner.reply(for: key) }
    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {}
    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        try inner.purgeEnded(before: instant, limit: limit)
    }
    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] { try inner.rides(page, rider: rider, limit: limit) }
    public func close() { inner.close() }
}

/// A store that defers its sync: writes apply at once (signalling `written`), `logSync`
/// signals `syncEntered` then waits on `syncGate`, and throws `syncFailure` if set.
public final class DeferringStore: LogSyncing {
    public let inner = MemoryStore()
    public let syncGate = DispatchSemaphore(value: 0)
    public let syncEntered = DispatchSemaphore(value: 0)
    public let written = DispatchSemaphore(value: 0)
    public let syncFailure = Locked<StoreError?>(nil)
    public var sizes: [Int] = []

    public init() {}

    public func commitUnsynced(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        sizes.append(batch.count)
        defer { written.signal() }
        return try inner.commit(batch)
    }

    public var logSync: @Sendable () throws(StoreError) -> Void {
        { [syncGate, syncEntered, syncFailure] () throws(StoreError) in
            syncEntered.signal()
            syncGate.wait()
            if let e = syncFailure.withLock({ $0 }) { throw e }
        }
    }

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        preconditionFailure("DeferringStore: the worker writes a store that syncs apart with commitUnsynced")
    }

    public func openRides() throws(StoreError) -> [StoredRide] { try inner.openRides() }
    public func ride(_ id: String) throws(StoreError) -> StoredRide? { try inner.ride(id) }
    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? { try inner.trace(ride) }
    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? { try inner.reply(for: key) }
    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {}
    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        try inner.purgeEnded(before: instant, limit: limit)
    }
    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] { try inner.rides(page, rider: rider, limit: limit) }
    public func close() { inner.close() }
}
