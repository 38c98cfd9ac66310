import RideAuth
import RideCore
import Synchronization

/// One message for every operator watching the fleet, numbered in commit order.
package struct OpsItem: Sendable {
    let number: UInt64
    let bytes: [UInt8]
    /// The once-a-second fleet frame (a slow watcher gets only the newest) rather than an
    /// event (transitions and warnings, never dropped).
    let isFrame: Bool
}

/// The operator feed behind `watch_all`. Everything is published under the registry's view
/// lock — each transition by the store worker once it has committed, one fleet frame per
/// tick by the ticker — so item numbers and every thread's mailbox follow commit order, and
/// each thread hands its watchers the items in that order. A frame is encoded once per tick
/// for every watcher on every thread.
package final class OpsFeed: @unchecked Sendable {  // atomics; `deliver` is set once in Hub.init before any thread runs; slots[i] is service thread i's
    /// Watchers on all threads: while it is 0 nothing is encoded for the feed.
    let watching = Atomic<Int>(0)
    /// Number of the last item published (under the registry's view lock).
    private let published = Atomic<UInt64>(0)
    /// The seq of the last tick, which a snapshot stands for.
    let lastSeq = Atomic<Int64>(0)
    let slots: [OpsSlot]
    /// Hands an item to every service thread (Hub.init: each shard's mailbox).
    package var deliver: (OpsItem) -> Void = { _ in }
    /// The frames' headroom (LWS_PRE), handed in by the adapter.
    let pre: Int

    package init(threads: Int, pre: Int) {
        slots = (0..<threads).map { _ in OpsSlot() }
        self.pre = pre
    }

    var active: Bool { watching.load(ordering: .relaxed) > 0 }

    /// The number a snapshot taken now (under the registry's view lock) already covers.
    var lastNumber: UInt64 { published.load(ordering: .relaxed) }

    // MARK: publishing (under the registry's view lock)

    func transition(_ kind: String, _ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int) {
        guard active else { return }
        publish(OpsMessages.event(kind, ride: ride, plan: plan, at: at, watchers: watchers, prefix: pre), isFrame: false)
    }

    func warning(ride: String, remaining: Int64, at: UnixMillis) {
        guard active else { return }
        publish(OpsMessages.warning(ride: ride, remaining: remaining, at: at, prefix: pre), isFrame: false)
    }

    /// A ride entered a zone that may not be ridden through (GeoPublish.fleetWarning's frame).
    func zoneWarning(_ bytes: [UInt8]) {
        guard active else { return }
        publish(bytes, isFrame: false)
    }

    /// The tick's frame: every ride in `live` that ticks (the registry's, under its view
    /// lock). A ride whose auto-end is on its way to the store is left out, as from the ticks.
    func tick(seq: Int64, at: UnixMillis, live: [LiveRide], ended: Int) {
        lastSeq.store(seq, ordering: .relaxed)
        guard active else { return }
        let counts = RideCounts(live.lazy.filter { !$0.autoEndQueued }, ended: ended)
        var frame = OpsMessages.Fleet(seq: seq, at: at, counts: counts, rides: live.count, prefix: pre)
        for l in live where !l.autoEndQueued {
            frame.row(l.ride, l.plan, at: at, watchers: l.subscriberCount.load(ordering: .relaxed), metres: l.trace?.metres,
                      position: l.trace?.position?.point)
        }
        publish(frame.finish(), isFrame: true)
    }

    private func publish(_ bytes: [UInt8], isFrame: Bool) {
        let item = OpsItem(number: published.add(1, ordering: .relaxed).newValue, bytes: bytes, isFrame: isFrame)
        deliver(item)
    }
}

/// One service thread's operators and its copy of the latest fleet frame.
package final class OpsSlot {  // service thread only
    package var watchers: [ObjectIdentifier: OpsWatcher] = [:]
    /// Copied once per tick per thread: lws writes each frame's header into the bytes in
    /// front of it, so threads must not share one buffer.
    package let frame = ShardSlot()
}

package final class OpsWatcher {
    /// Unowned: the session leaves the slot when it closes (Shard.dropOpsWatcher); checked, so
    /// a watcher outliving its session traps instead of reading freed memory.
    unowned let session: Session
    /// Items up to this number were already in the snapshot it got.
    var since: UInt64 = .max
    /// Its outbox holds the frame marker: the slot's frame is due to it.
    package var frameQueued = false

    init(session: Session) { self.session = session }
}

/// What the operator feed needs of the server: the feed, the clock, the registry, the metrics
/// and whether tokens are checked (RideServer).
package protocol OpsServices: AnyObject {
    var ops: OpsFeed { get }
    var clock: RideClock { get }
    var registry: RideRegistry { get }
    var metrics: Metrics { get }
    var authRequired: Bool { get }
}

/// What the operator feed needs of a service thread (the adapter's Shard): which one it is,
/// the service, the headroom and how a frame is sent to a session.
package protocol OpsHost: AnyObject {
    associatedtype Services: OpsServices
    var index: Int { get }
    var service: Services { get }
    var pre: Int { get }
    func send(_ s: Session, _ frame: [UInt8])
}

/// An empty outbox entry: "write the slot's latest fleet frame here". Kept in the outbox
/// so frames and events reach the operator in the order they were published.
package let fleetFrameMarker: [UInt8] = []

package extension OpsHost {
    var opsSlot: OpsSlot { service.ops.slots[index] }

    /// `watch_all`: watches (once), then answers with the snapshot of every open ride.
    func watchAll(_ s: Session, id: String?) {
        let slot = opsSlot
        let w: OpsWatcher
        if let known = slot.watchers[ObjectIdentifier(s)] {
            w = known
        } else {
            // Counted before the snapshot: whatever commits after it is then published.
            w = OpsWatcher(session: s)
            slot.watchers[ObjectIdentifier(s)] = w
            service.ops.watching.add(1, ordering: .relaxed)
        }
        let at = service.clock.now()
        let (rides, counts, since) = service.registry.view.withLock { v in
            let rows = v.live.map { l -> (ride: Ride, plan: FarePlan, watchers: Int) in
                (l.ride, l.plan, l.subscriberCount.load(ordering: .relaxed))
            }
            return (rows, RideCounts(v.live, ended: v.rides.count - v.live.count), service.ops.lastNumber)
        }
        w.since = since
        unqueueFrame(w)  // older than the snapshot
        let sorted = rides.sorted { ($0.ride.startedAt, $0.ride.id) < ($1.ride.startedAt, $1.ride.id) }
        for f in OpsMessages.snapshot(id: id, seq: service.ops.lastSeq.load(ordering: .relaxed), at: at, counts: counts, rides: sorted, prefix: pre) {
            send(s, f)
        }
    }

    /// `unwatch_all`: nothing of the feed follows the reply.
    func unwatchAll(_ s: Session, id: String?) {
        dropOpsWatcher(s)
        send(s, OpsMessages.unwatched(id: id, prefix: pre))
    }

    /// The session stops watching (unwatch_all, or it closed).
    func dropOpsWatcher(_ s: Session) {
        guard let w = opsSlot.watchers.removeValue(forKey: ObjectIdentifier(s)) else { return }
        service.ops.watching.subtract(1, ordering: .relaxed)
        unqueueFrame(w)
    }

    private func unqueueFrame(_ w: OpsWatcher) {
        guard w.frameQueued else { return }
        w.session.outbox.removeFirst(where: \.isEmpty)
        w.frameQueued = false
    }

    /// Hands this thread's watchers an item, in published order. A watcher still holding
    /// the previous frame gets the new one in its place, behind what was published since;
    /// one that lets its outbox reach the bound is closed (4008), and one that reads nothing
    /// for --slow-consumer-lag by the session's one clock (Outbox.swift), like any slow consumer.
    func deliverOps(_ item: OpsItem) {
        let slot = opsSlot
        guard !slot.watchers.isEmpty else { return }
        if item.isFrame { slot.frame.frame = item.bytes }
        let wall = WallClock.seconds()
        for w in slot.watchers.values {
            let s = w.session
            guard item.number > w.since, s.closing == nil else { continue }
            // Asked on every delivery, not only when the token changes: one that expired since
            // the last sweep gets nothing more (the sweep then refuses it, 4401).
            guard s.conn.mayWatchAll(wall, authOn: service.authRequired) else { continue }
            if item.isFrame {
                if w.frameQueued {
                    unqueueFrame(w)
                    service.metrics.add(service.metrics.ticksCoalesced)
                }
                send(s, fleetFrameMarker)
                w.frameQueued = s.closing == nil
            } else {
                send(s, item.bytes)
            }
        }
    }
}
