import RideCore
import RideProtocol
import Synchronization

/// A ride the server holds in memory, as last committed. `ride`, `warned`, `liveIndex` and
/// `autoEndQueued` are read and written only under the registry's view lock; `slot(i)`
/// belongs to service thread i alone (checked in debug builds), so fan-out needs no lock.
///
/// The fields are in the order that packs them: the 106-byte `Ride` leaves two bytes before the
/// next word, where the flags and the thread count go: 176 bytes with the trace reference, a
/// 192-byte heap block, where a `Set` of warnings, an `Int` index and a `Bool` padded to a word
/// each would take at least a 240-byte one.
package final class LiveRide: @unchecked Sendable {  // `ride`, `warned`, `liveIndex`, `autoEndQueued` are touched only under RideRegistry.view; slot(i) asserts service thread i
    /// The ride's id, for the service threads, which never read `ride` (it changes under the lock).
    package let id: String
    /// Shared by every ride on the plan (a plan inline would add ~150 bytes to each ride). The
    /// tick lends it to the encoder as it is; `plan` hands out a copy.
    let planBox: PlanBox
    package var plan: FarePlan { planBox.plan }
    /// The committed state: what ticks and reads show.
    package var ride: Ride
    /// `autoEndQueued` (bit 0) and the warnings sent (`warned`, the bits above).
    private var flags: UInt8 = 0
    private let shards: UInt8
    /// Position in the registry's list of rides that tick, for O(1) removal.
    var liveIndex: Int32 = -1
    /// Distance and last position once the ride reported one (issue 28); under the view lock.
    package var trace: LiveTrace?
    /// One per service thread, in one allocation (an array of objects cost 176 bytes a ride).
    private let slots: UnsafeMutablePointer<RideSlot>
    /// Subscribers on every thread, kept by the threads themselves, so that forgetting an
    /// ended ride never reads another thread's subscriber list.
    package let subscriberCount = Atomic<Int>(0)

    init(ride: Ride, plan: PlanBox, shards: Int) {
        precondition(shards > 0 && shards <= Int(UInt8.max), "\(shards) service threads")
        id = ride.id
        self.ride = ride
        planBox = plan
        self.shards = UInt8(shards)
        slots = .allocate(capacity: shards)
        slots.initialize(repeating: RideSlot(), count: shards)
    }

    deinit {
        slots.deinitialize(count: Int(shards))
        slots.deallocate()
    }

    /// An auto-end is waiting for its commit: the ride stops ticking until it lands.
    var autoEndQueued: Bool {
        get { flags & 1 != 0 }
        set { flags = newValue ? flags | 1 : flags & ~1 }
    }

    /// Time-limit warnings already sent (seconds-left thresholds).
    var warned: WarningsSent {
        get { WarningsSent(bits: flags >> 1) }
        set { flags = flags & 1 | newValue.bits << 1 }
    }

    /// Service thread `i`'s subscribers and tick frame; only thread `i` may call this.
    package func slot(_ i: Int) -> UnsafeMutablePointer<RideSlot> {
        assert(ServiceThread.current == i && i < Int(shards), "slot \(i) of ride \(id) touched from thread \(ServiceThread.current)")
        return slots + i
    }
}

/// The time-limit warnings a ride has been sent, as bits: the registry warns at 5 minutes and
/// at 1 minute left, and nowhere else.
package struct WarningsSent: Equatable {
    fileprivate(set) var bits: UInt8 = 0
    /// Seconds left at which a riding ride is warned, nearest first (the order they are tried in).
    static let thresholds: [Int64] = [60, widest]
    /// The farthest: no warning is due while more than this is left.
    static let widest: Int64 = 300

    private static func bit(_ threshold: Int64) -> UInt8 {
        guard let i = thresholds.firstIndex(of: threshold) else { preconditionFailure("no warning at \(threshold) s") }
        return 1 << UInt8(i)
    }

    func contains(_ threshold: Int64) -> Bool { bits & Self.bit(threshold) != 0 }
    mutating func insert(_ threshold: Int64) { bits |= Self.bit(threshold) }
    /// `threshold` and every farther one: a ride warned at 1 minute left is never told "5 minutes" after it.
    mutating func insert(andFarther threshold: Int64) {
        for t in Self.thresholds where t >= threshold { insert(t) }
    }
}

extension RideCounts {
    /// `live` by state (paused, else riding), plus `ended`: the one count behind /healthz,
    /// /metrics and the operator feed's fleet frame and snapshot, taken under the registry's view lock.
    package init<S: Sequence>(_ live: S, ended: Int) where S.Element == LiveRide {
        self.init(ended: ended)
        for l in live { if l.ride.state == .paused { paused += 1 } else { riding += 1 } }
    }
}

/// One service thread's view of a ride: its subscribers there, and the tick they still wait for.
package struct RideSlot {
    package var subscribers = SubscriberList()
    /// The batch's encoded tick while a subscriber here still waits for it; nil once none does
    /// (most ticks are written from the fan-out itself), so a ride holds no frame of its own
    /// between ticks. Writes copy it into the thread's staging buffer first: the batch is shared
    /// by every thread, and lws writes the frame header into the room in front.
    package var frame: [UInt8]?
}

/// A frame held for a service thread (the operator feed's latest fleet frame, OpsFeed.swift).
package final class ShardSlot {
    package var frame: [UInt8]?
}

/// One tick's messages: the same `seq` and `at` for every ride and every thread.
package struct TickBatch: Sendable {
    let seq: Int64
    let at: UnixMillis
    /// Every ticking ride's encoded tick, back to back, without LWS_PRE room: one buffer a tick
    /// instead of one 240-byte array per ride (writes copy a tick into the thread's staging
    /// buffer first anyway). Immutable once built.
    package let frames: TickMemory
    /// Each ticking ride and where its tick ends in `frames` (it starts where the one before ends).
    package let ends: [(live: LiveRide, end: Int32)]

    /// Where ride `k`'s tick is in `frames`.
    package func range(_ k: Int) -> Range<Int> { (k == 0 ? 0 : Int(ends[k - 1].end))..<Int(ends[k].end) }

    /// Ride `k`'s tick with `pre` spare bytes in front, in an array of its own: what a slot keeps
    /// while a subscriber waits for it.
    package func frame(_ k: Int, pre: Int) -> [UInt8] {
        var f = [UInt8](repeating: 0, count: pre)
        let r = range(k)
        f.append(contentsOf: UnsafeBufferPointer(start: frames.base + r.lowerBound, count: r.count))
        return f
    }

    /// Every ride with its tick in an array of its own (`pre` bytes of room in front): copies, for tests.
    func rides(pre: Int) -> [(live: LiveRide, frame: [UInt8])] {
        ends.indices.map { (ends[$0].live, frame($0, pre: pre)) }
    }
}

/// One loaded fare plan, referenced by the rides that use it: RideProtocol's, which the tick
/// encoder takes as it is (with the plan's currency field encoded once).
package typealias PlanBox = TickPlan
