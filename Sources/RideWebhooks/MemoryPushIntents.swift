import Foundation
import RideCore
import RideStore

/// The push sender's view of `--store memory`: the intents among a MemoryOutbox's rows and the
/// MemoryStore's targets (both locked for use from any thread). Nothing outlives the process,
/// as nothing else of a memory store does.
public final class MemoryPushIntents: PushIntentOutbox, @unchecked Sendable {  // `handedOut` only under `lock`
    private let outbox: MemoryOutbox
    private let store: MemoryStore
    private let lock = NSLock()
    private var handedOut: Int64 = 0

    public init(outbox: MemoryOutbox, store: MemoryStore) {
        self.outbox = outbox
        self.store = store
    }

    public var lastError: String? { nil }

    public func newIntents(limit: Int) -> [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        let rows = outbox.pushRows(after: handedOut, limit: limit)
        if let last = rows.last { handedOut = last.seq }
        return rows
    }

    public func delivered(seq: Int64) { outbox.removePushRow(seq) }

    public func pushStats() -> (pending: Int, targets: Int) { (outbox.pushRowCount, store.pushTargetCount) }

    public func pushTargets(ride: String) -> [StoredPushTarget]? { store.pushTargetsNow(ride: ride) }

    public func pushToStartTokens(rider: String) -> [StoredPushTarget]? { store.pushToStartTokensNow(rider: rider) }

    public func deletePushTarget(ride: String?, rider: String, token: String) {
        store.removePushTarget(ride: ride, rider: rider, token: token)
    }
}
