import RideCore
import RideStore

/// The push sender's view of `--store memory`: the intents among a MemoryOutbox's rows and the
/// MemoryStore's targets (both locked for use from any thread). Nothing outlives the process,
/// as nothing else of a memory store does.
public final class MemoryPushIntents: PushIntentOutbox {
    private let outbox: MemoryOutbox
    private let targets: MemoryPushTargetList
    /// The last seq handed out.
    private let handedOut = Locked<Int64>(0)

    public init(outbox: MemoryOutbox, store: MemoryStore) {
        self.outbox = outbox
        targets = store.sharedPushTargets
    }

    public var lastError: String? { nil }

    public func newIntents(limit: Int) -> [OutboxRow] {
        handedOut.withLock { after in
            let rows = outbox.pushRows(after: after, limit: limit)
            if let last = rows.last { after = last.seq }
            return rows
        }
    }

    public func delivered(seq: Int64) { outbox.removePushRow(seq) }

    public func pushStats() -> (pending: Int, targets: Int) { (outbox.pushRowCount, targets.count) }

    public func pushTargets(ride: String) -> [StoredPushTarget]? { targets.targets(ride: ride) }

    public func pushToStartTokens(rider: String) -> [StoredPushTarget]? { targets.pushToStart(rider: rider) }

    public func deletePushTarget(ride: String?, rider: String, token: String) {
        targets.remove(ride: ride, rider: rider, token: token)
    }
}
