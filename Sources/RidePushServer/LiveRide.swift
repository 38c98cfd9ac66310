import CLibWebSockets
import RideCore
import Synchronization

/// A ride the server holds in memory, as last committed. `ride`, `warned`, `liveIndex` and
/// `autoEndQueued` are read and written only under the registry's view lock; `slot(i)`
/// belongs to service thread i alone (checked in debug builds), so fan-out needs no lock.
final class LiveRide: @unchecked Sendable {  // `ride`, `warned`, `liveIndex`, `autoEndQueued` are touched only under RideRegistry.view; slot(i) asserts service thread i
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
    /// One per service thread, in one allocation (an array of objects cost 176 bytes a ride).
    private let slots: UnsafeMutablePointer<RideSlot>
    private let shards: Int
    /// Subscribers on every thread, kept by the threads themselves, so that forgetting an
    /// ended ride never reads another thread's subscriber list.
    let subscriberCount = Atomic<Int>(0)

    init(ride: Ride, plan: PlanBox, shards: Int) {
        id = ride.id
        self.ride = ride
        planBox = plan
        self.shards = shards
        slots = .allocate(capacity: shards)
        slots.initialize(repeating: RideSlot(), count: shards)
    }

    deinit {
        slots.deinitialize(count: shards)
        slots.deallocate()
    }

    /// Service thread `i`'s subscribers and tick frame; only thread `i` may call this.
    func slot(_ i: Int) -> UnsafeMutablePointer<RideSlot> {
        assert(ServiceThread.current == i && i < shards, "slot \(i) of ride \(id) touched from thread \(ServiceThread.current)")
        return slots + i
    }
}

/// One service thread's view of a ride: its subscribers there, and the tick they still wait for.
struct RideSlot {
    var subscribers: [Subscriber] = []
    /// The batch's encoded tick while a subscriber here still waits for it; nil once none does
    /// (most ticks are written from the fan-out itself), so a ride holds no frame of its own
    /// between ticks. Writes copy it into the thread's staging buffer first: the batch is shared
    /// by every thread, and lws writes the frame header into the room in front.
    var frame: [UInt8]?
}

/// A frame held for a service thread (the operator feed's latest fleet frame, OpsFeed.swift).
final class ShardSlot {
    var frame: [UInt8]?
}

/// One tick's messages: the same `seq` and `at` for every ride and every thread.
struct TickBatch: Sendable {
    let seq: Int64
    let at: UnixMillis
    /// Every ticking ride's encoded tick, back to back, without LWS_PRE room: one buffer a tick
    /// instead of one 240-byte array per ride (writes copy a tick into the thread's staging
    /// buffer first anyway). Immutable once built.
    let frames: TickMemory
    /// Each ticking ride and where its tick ends in `frames` (it starts where the one before ends).
    let ends: [(live: LiveRide, end: Int32)]

    /// Where ride `k`'s tick is in `frames`.
    func range(_ k: Int) -> Range<Int> { (k == 0 ? 0 : Int(ends[k - 1].end))..<Int(ends[k].end) }

    /// Ride `k`'s tick with `pre` spare bytes in front, in an array of its own: what a slot keeps
    /// while a subscriber waits for it.
    func frame(_ k: Int, pre: Int) -> [UInt8] {
        var f = [UInt8](repeating: 0, count: pre)
        let r = range(k)
        f.append(contentsOf: UnsafeBufferPointer(start: frames.base + r.lowerBound, count: r.count))
        return f
    }

    /// Every ride with its tick in an array of its own (LWS_PRE room in front): copies, for tests.
    var rides: [(live: LiveRide, frame: [UInt8])] {
        let pre = Int(clws_pre())
        return ends.indices.map { (ends[$0].live, frame($0, pre: pre)) }
    }
}

/// One loaded fare plan, referenced by the rides that use it.
final class PlanBox: Sendable {
    let plan: FarePlan
    init(_ plan: FarePlan) { self.plan = plan }
}
