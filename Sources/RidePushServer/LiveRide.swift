import RideCore

/// A ride the server holds in memory. `ride` and `warned` are guarded by the registry's
/// lock; `slots[i]` belongs to service thread i alone, so fan-out needs no lock.
final class LiveRide: @unchecked Sendable {
    let id: String
    /// Shared by every ride on the plan (a plan inline would add ~150 bytes to each ride).
    private let planBox: PlanBox
    var plan: FarePlan { planBox.plan }
    var ride: Ride
    /// Time-limit warnings already sent (seconds-left thresholds).
    var warned: Set<Int64> = []
    /// Position in the registry's list of rides that tick, for O(1) removal.
    var liveIndex = -1
    let slots: [ShardSlot]

    init(ride: Ride, plan: PlanBox, shards: Int) {
        id = ride.id
        self.ride = ride
        planBox = plan
        slots = (0..<shards).map { _ in ShardSlot() }
    }
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
struct TickBatch: @unchecked Sendable {
    let seq: Int64
    let at: UnixMillis
    /// Each ticking ride with its encoded tick (LWS_PRE spare bytes in front). Immutable once built.
    let rides: [(live: LiveRide, frame: [UInt8])]
}

/// One loaded fare plan, referenced by the rides that use it.
final class PlanBox: @unchecked Sendable {  // immutable after init
    let plan: FarePlan
    init(_ plan: FarePlan) { self.plan = plan }
}
