import RideCore
import Synchronization

/// A ride the server holds in memory, as last committed. `ride`, `warned`, `liveIndex` and
/// `autoEndQueued` are read and written only under the registry's view lock; `slot(i)`
/// belongs to service thread i alone (checked in debug builds), so fan-out needs no lock.
final class LiveRide: @unchecked Sendable {  // `ride`, `warned`, `liveIndex`, `autoEndQueued` are touched only under RideRegistry.view; slots are ThreadBound
    let id: String
    /// Shared by every ride on the plan (a plan inline would add ~150 bytes to each ride).
    private let planBox: PlanBox
    var plan: FarePlan { planBox.plan }
    /// The committed state: what ticks and reads show.
    var ride: Ride
    /// Time-limit warnings already sent (seconds-left thresholds).
    var warned: Set<Int64> = []
    /// Position in the registry's list of rides that tick, for O(1) removal.
    var liveIndex = -1
    /// An auto-end is waiting for its commit: the ride stops ticking until it lands.
    var autoEndQueued = false
    private let slots: [ThreadBound<ShardSlot>]
    /// Subscribers on every thread, kept by the threads themselves, so that forgetting an
    /// ended ride never reads another thread's subscriber list.
    let subscriberCount = Atomic<Int>(0)

    init(ride: Ride, plan: PlanBox, shards: Int) {
        id = ride.id
        self.ride = ride
        planBox = plan
        slots = (0..<shards).map { ThreadBound(ShardSlot(), owner: $0) }
    }

    /// Service thread `i`'s subscribers and tick frame; only thread `i` may call this.
    func slot(_ i: Int) -> ShardSlot { slots[i].value }
}

/// One service thread's view of a ride: its subscribers there, and the tick they still wait for.
final class ShardSlot {
    var subscribers: [Subscription] = []
    /// The batch's encoded tick while a subscriber here still waits for it; nil once none does
    /// (most ticks are written from the fan-out itself), so a ride holds no frame of its own
    /// between ticks. Writes copy it into the thread's staging buffer first: the batch is shared
    /// by every thread, and lws writes the frame header into the room in front.
    var frame: [UInt8]?
}

/// One tick's messages: the same `seq` and `at` for every ride and every thread.
struct TickBatch: Sendable {
    let seq: Int64
    let at: UnixMillis
    /// Each ticking ride with its encoded tick (LWS_PRE spare bytes in front). Immutable once built.
    let rides: [(live: LiveRide, frame: [UInt8])]
}

/// One loaded fare plan, referenced by the rides that use it.
final class PlanBox: Sendable {
    let plan: FarePlan
    init(_ plan: FarePlan) { self.plan = plan }
}
