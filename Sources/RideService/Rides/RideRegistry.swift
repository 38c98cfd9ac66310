import RideAuth
import RideCore
import RideDevicePush
import RideProtocol
import RideStore
import Synchronization

/// Every committed ride the process knows, shared by all service threads: what ticks, reads
/// and `/healthz` see. Changes come only from the store worker after their commit; the lock
/// (`view`) is held for memory work only — never across a store call — so a slow disk never
/// stalls a tick or a lookup. Requests that change rides go to the store worker (RideServer.submit), which holds the
/// coordinator, which holds this registry: the registry holds neither, so nothing is a cycle.
package final class RideRegistry: Sendable {
    package struct View {
        package var rides: [String: LiveRide] = [:]
        /// Rides that tick (not ended), compact for the per-second loop.
        package var live: [LiveRide] = []
        /// Ended rides, oldest first, so memory stays bounded (the store keeps them all).
        var endedOrder: [String] = []
        /// The last tick's encoded size and frames: the next one reserves and prefaults by them.
        var tickBytes = 0
        var tickFrames = 0
        /// Open rides per owner, and starts decided but not yet published (with the owner of
        /// each by ride id): what --max-open-rides-per-rider counts (`openRides`).
        var openByOwner: [String: Int] = [:]
        var startsPending: [String: Int] = [:]
        var pendingOwners: [String: String] = [:]
    }

    package let plans: [String: FarePlan]
    /// The same plans, boxed once for the rides to share.
    private let boxes: [String: PlanBox]
    private let fallbackBox = PlanBox(.standard)
    let defaultPlan: FarePlan
    let shards: Int
    let clock: RideClock
    let metrics: Metrics
    /// The operator feed, told of every committed transition and every tick under `view` (OpsFeed.swift).
    let ops: OpsFeed?
    package let view = Locked(View())
    static let keptEndedRides = 10_000
    /// Bytes every encoded frame leaves free in front for the socket layer's header (lws's
    /// LWS_PRE), handed in by the adapter at start: this side never asks lws.
    let pre: Int

    /// With APNs or FCM configured (docs/push.md): where intents are poked and registrations
    /// handed; the store coordinator writes push intents with every transition when set.
    package let devicePush: (any DevicePushOutlet)?

    package init(plans: [FarePlan], shards: Int, clock: RideClock, metrics: Metrics, ops: OpsFeed? = nil, pre: Int,
                 devicePush: (any DevicePushOutlet)? = nil) {
        self.devicePush = devicePush
        self.ops = ops
        self.pre = pre
        var byID: [String: FarePlan] = [:]
        for p in plans { byID[p.id] = p }
        self.plans = byID
        boxes = byID.mapValues(PlanBox.init)
        defaultPlan = FarePlan.defaultPlan(of: plans)
        self.shards = shards
        self.clock = clock
        self.metrics = metrics
        devicePush?.attach { [weak self] rid in self?.activityContent(rid) }
    }

    /// An open ride's content-state now, for a fare step's push (nil once ended or unknown).
    package func activityContent(_ rid: String) -> RideActivityContent? {
        let now = clock.now()
        return view.withLock { v in
            guard let live = v.rides[rid], live.ride.state != .ended else { return nil }
            return RideActivityContent(live.ride, live.planBox.plan, at: now, distance: live.trace?.metres)
        }
    }

    package var counts: (riding: Int, paused: Int, ended: Int) {
        let c = view.withLock { v in RideCounts(v.live, ended: v.rides.count - v.live.count) }
        return (c.riding, c.paused, c.ended)
    }

    /// A ride's plan; one no longer loaded bills as the built-in default rather than not at all.
    func box(_ id: String) -> PlanBox { boxes[id] ?? fallbackBox }

    package func plan(_ id: String?) -> FarePlan? { id.map { plans[$0] } ?? defaultPlan }

    // MARK: reads (any thread; memory only)

    /// A ride in memory, or nil: the caller then asks the store worker (`StoreJob.lookup`).
    package func find(_ id: String) -> LiveRide? {
        view.withLock { $0.rides[id] }
    }

    package func snapshot(_ live: LiveRide) -> Ride { view.withLock { _ in live.ride } }

    // MARK: changes (store worker only, after commit)

    /// Runs `body` with the view locked. The store worker publishes what committed and posts
    /// its replies and pushes inside, and the ticker encodes and posts a tick inside: so a
    /// tick encoded before a transition reaches every thread's mailbox before its push.
    package func publishing<T>(_ body: (inout View) -> T) -> T {
        view.withLock { body(&$0) }
    }

    /// A committed ride entering memory (a start, or a ride read from the store).
    package func add(_ ride: Ride, _ v: inout View) -> LiveRide {
        if let l = v.rides[ride.id] { return l }
        let live = LiveRide(ride: ride, plan: box(ride.planID), shards: shards)
        v.rides[ride.id] = live
        if ride.state == .ended {
            v.endedOrder.append(ride.id)
        } else {
            live.liveIndex = Int32(v.live.count)
            v.live.append(live)
            if let owner = ride.owner { v.openByOwner[owner, default: 0] += 1 }
        }
        return live
    }

    /// Open rides of `owner`, with its starts decided but not yet published (store worker).
    func openRides(of owner: String) -> Int {
        view.withLock { v in v.openByOwner[owner, default: 0] + v.startsPending[owner, default: 0] }
    }

    /// A start of `owner`'s was decided (store worker): counted until it is published.
    func startPending(_ ride: String, owner: String) {
        view.withLock { v in
            v.startsPending[owner, default: 0] += 1
            v.pendingOwners[ride] = owner
        }
    }

    /// A decided start was published, committed or not (under the view lock): no longer pending.
    func startSettled(_ ride: String, _ v: inout View) {
        guard let owner = v.pendingOwners.removeValue(forKey: ride) else { return }
        let n = v.startsPending[owner, default: 0] - 1
        v.startsPending[owner] = n > 0 ? n : nil
    }

    /// A committed transition of a ride in memory.
    func apply(_ next: Ride, to live: LiveRide, _ v: inout View) {
        live.ride = next
        live.autoEndQueued = false
        if next.state == .ended, live.liveIndex >= 0 {
            if let owner = next.owner {
                let n = v.openByOwner[owner, default: 0] - 1
                v.openByOwner[owner] = n > 0 ? n : nil
            }
            let i = Int(live.liveIndex)
            let last = v.live.removeLast()
            if i < v.live.count {
                v.live[i] = last
                last.liveIndex = Int32(i)
            }
            live.liveIndex = -1
            v.endedOrder.append(live.id)
        }
    }

    /// Forgets the oldest ended rides nobody watches once there are too many; returns their
    /// ids (the store still has them, and reads them again if asked).
    func trimEnded(_ v: inout View) -> [String] {
        guard v.endedOrder.count > Self.keptEndedRides * 2 else { return [] }
        var kept: [String] = []
        var dropped: [String] = []
        for (n, rid) in v.endedOrder.enumerated() {
            guard let l = v.rides[rid] else { continue }
            if n < Self.keptEndedRides, l.subscriberCount.load(ordering: .relaxed) == 0 {
                v.rides[rid] = nil
                dropped.append(rid)
            } else {
                kept.append(rid)
            }
        }
        v.endedOrder = kept
        return dropped
    }

    // MARK: the tick (timer thread)

    /// Encodes one tick per watched ticking ride from committed state, warns rides near their limit
    /// and notices due auto-ends (returned as jobs for the store worker; a ride whose end is
    /// on its way to the store stops ticking). `post` runs under the view lock with the batch
    /// and the warnings, so it orders them against every committed transition's push.
    ///
    /// Each question reads `live.ride` in a call handed nothing else of `live`, which lends it
    /// the ride as it is; a `let ride = live.ride` up front would copy every ride (retaining its
    /// strings) and double the CPU of 100,000 unwatched rides (callgrind, issue 29). The
    /// encoder's call makes the one copy a watched ride costs.
    package func tick(seq: Int64, at: UnixMillis,
              post: (TickBatch, [(LiveRide, [UInt8])]) -> Void) -> (TickBatch, [(LiveRide, [UInt8])], [StoreJob]) {
        view.withLock { v in
            var pushes: [(LiveRide, [UInt8])] = []
            var ends: [StoreJob] = []
            let frames = TickMemory(reserving: Self.tickReserve(v), prefault: v.tickBytes)
            var tickEnds: [(live: LiveRide, end: Int32)] = []
            tickEnds.reserveCapacity(v.live.count)
            // What every tick of this second shares (its seq and at) is encoded once, here.
            let encoder = TickFrame(seq: seq, at: at)
            for live in v.live {
                if live.autoEndQueued { continue }
                if live.ride.dueAutoEnd(at: at, maxPauseSeconds: live.planBox.plan.maxPauseSeconds) != nil {
                    live.autoEndQueued = true
                    ends.append(.autoEnd(live.id, at: at))
                    continue
                }
                if live.ride.state == .riding, let remaining = live.ride.remainingSeconds(at: at), remaining > 0, remaining <= WarningsSent.widest {
                    // The nearest threshold first: a ride that starts (or is first seen) with a
                    // minute or less left gets the 1-minute warning alone, not a "5 minutes"
                    // warning followed by the 1-minute one a second later.
                    for threshold in WarningsSent.thresholds where remaining <= threshold && !live.warned.contains(threshold) {
                        live.warned.insert(andFarther: threshold)
                        pushes.append((live, ServerMessages.warning(ride: live.id, remaining: remaining, prefix: pre)))
                        ops?.warning(ride: live.id, remaining: remaining, at: at)
                        if let push = devicePush {
                            let plan = live.planBox.plan
                            push.limitWarning(RideActivityContent(live.ride, plan, at: at, distance: live.trace?.metres),
                                              alert: PushAlerts.limitWarning(remaining: remaining, plan: plan))
                        }
                        break
                    }
                }
                // Nobody to send it to on any thread: not encoded (100,000 open rides mostly
                // unwatched cost ~0.1 s of CPU a second to encode). Limits, warnings and
                // auto-ends above still run for every ride; a subscriber arriving after this
                // load gets the next second's tick (it has the ride's state from subscribing).
                if live.subscriberCount.load(ordering: .relaxed) == 0 { continue }
                let plan = live.planBox
                let trace = live.trace
                let distance = trace?.metres, position = trace?.positionForTick()
                // Written in place in the batch's memory: no array per ride, no copy.
                let room = encoder.maxBytes(ride: live.id, plan: plan)
                let end = encoder.write(at: frames.room(room), ride: live.ride, plan: plan, distance: distance, position: position)
                frames.wrote(upTo: end, room: room)
                tickEnds.append((live, Int32(frames.count)))
            }
            v.tickBytes = frames.count
            v.tickFrames = tickEnds.count
            let batch = TickBatch(seq: seq, at: at, frames: frames, ends: tickEnds)
            post(batch, pushes)
            ops?.tick(seq: seq, at: at, live: v.live, ended: v.rides.count - v.live.count)
            return (batch, pushes, ends)
        }
    }

    /// Room for the next batch, reserved once: as much as the last took and a sixteenth, or
    /// every open ride at the last batch's bytes a tick (192 before there was one), whichever
    /// is more — address space, not memory: only what is written (and what the last batch
    /// took, prefaulted) is backed. So the first batch, and one after many rides gained
    /// watchers, no longer grows (a copy of all so far, each time it doubles).
    static func tickReserve(_ v: View) -> Int {
        let perTick = v.tickFrames > 0 ? (v.tickBytes + v.tickFrames - 1) / v.tickFrames : 192
        let last = v.tickBytes + v.tickBytes / 16
        return max(last, v.live.count * (perTick + perTick / 16))
    }
}
