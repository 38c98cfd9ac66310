import Foundation
import RideCore
import RideStore
import Synchronization

/// A memory store whose commits and probes fail while a test says so, counting each probe:
/// the double behind the store worker's health and probe tests.
public final class FlakyStore: RideStore {
    public let inner = MemoryStore()
    /// Signalled after each probe, failed or not.
    public let probed = DispatchSemaphore(value: 0)
    public let probeFails = Atomic<Bool>(true)
    public let commitFails = Atomic<Bool>(false)

    public init() {}

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        if commitFails.load(ordering: .sequentiallyConsistent) { throw StoreError(.unavailable, "disk full") }
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
    public func rides(_ page: RidePage, limit: Int) throws(StoreError) -> [StoredRide] { try inner.rides(page, limit: limit) }
    public func close() { inner.close() }
}
