import RideCore
import RideDevicePush
import RideProtocol

/// What the service needs of the device-push sender (docs/push.md), which lives beside it on
/// threads of its own: every call here returns at once (a hand-off under a lock), so the store
/// worker and the service threads never wait on APNs, FCM or the sender's store reads.
public protocol DevicePushOutlet: AnyObject, Sendable {
    func start()
    func stop()
    /// Push intents were committed: read the outbox now rather than at the next poll.
    func poke()
    /// A device registered `target` on a ride that is as `content` says now: the `update`
    /// it is owed at once, in memory (a lost one is only the registration's; the next
    /// transition's intent is durable).
    func registered(_ target: PushTarget, _ content: RideActivityContent)
    /// A ride's time-limit warning (5 minutes, 1 minute left), from the tick: an `update` with
    /// `alert` to the targets the sender knows, in memory (the tick never waits for it).
    func limitWarning(_ content: RideActivityContent, alert: DevicePush.Alert)
    /// The ride entered another zone (`content.zone`): an `update`, in memory, from the
    /// store worker's publish (never waits).
    func zoneChanged(_ content: RideActivityContent)
    /// How the sender reads a ride's content-state now (a fare step's `update`): in memory,
    /// from the registry, under its lock. Called once, by the registry it was handed to.
    func attach(contentOf: @escaping @Sendable (String) -> RideActivityContent?)
    /// `/metrics` lines (`ridepush_push_*`), from the sender's last counts: no I/O.
    func prometheusText() -> String
}
