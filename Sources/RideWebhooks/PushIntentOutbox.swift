import Foundation
import RideCore
import RideStore

/// The device-push sender's view of the store (docs/push.md): the push intents among the
/// outbox's rows (endpoint `OutboxEvent.pushEndpoint`, which the webhook sender never reads)
/// and the push targets, on a connection of the sender's own — never the store worker's,
/// never a service thread's. Called only from the push sender's loop thread.
public protocol PushIntentOutbox: AnyObject, Sendable {
    /// Pending intents this node has not handed out yet, oldest first, at most `limit`. With
    /// PostgreSQL each comes with a lease (renewed at every call), so with several nodes each
    /// intent is sent by one; a lease lost is reported by `takeLost`.
    func newIntents(limit: Int) -> [OutboxRow]
    /// Every push the intent owed was answered: the row goes.
    func delivered(seq: Int64)
    /// Intents handed out before that this node no longer holds (each reported once).
    func takeLost() -> Set<Int64>
    /// Pending intents in the whole outbox, and push targets stored, for `/metrics`.
    func pushStats() -> (pending: Int, targets: Int)
    /// The ride's targets, oldest first; nil when the store could not be read (retried later).
    func pushTargets(ride: String) -> [StoredPushTarget]?
    func pushToStartTokens(rider: String) -> [StoredPushTarget]?
    /// Deletes a target the service said is gone, or whose activity ended.
    func deletePushTarget(ride: String?, rider: String, token: String)
    /// Why the last call failed, if it did (the sender logs it).
    var lastError: String? { get }
}

extension PushIntentOutbox {
    public func takeLost() -> Set<Int64> { [] }
}
