import RideAuth
import RideCore

/// One WebSocket connection. Owned by the service thread of its shard: only that thread
/// reads or writes any field, so no lock. The fields are in the order that packs them: the
/// small ones in the room `Connection` and the subscription list leave before the next word
/// (183 bytes with `Connection`'s counts as Int32 and what few sessions have boxed, a 192-byte
/// heap block; in an order that pads them they take 243 and a 256-byte one).
package final class Session {
    /// Which connection of the adapter this is: opaque here, only the adapter reads its bits.
    package let handle: ConnectionHandle
    package let peer: String
    /// Unique on its thread for the life of the process: how the store worker names it.
    package let serial: UInt64
    /// The ride.v1 logic of this connection (auth, rate limit, subscriptions, ordering).
    package var conn: Connection
    package var rxTooLarge = false
    package var pingDue = false
    /// Subscriptions holding an unsent tick (at most one each: newer ticks replace older).
    package var pendingTicks: Int32 = 0
    /// When it was established (monotonic ms): with auth on, it must authenticate within
    /// --handshake-timeout of this or be closed (4401).
    package let connectedAt: Int64
    /// Replies, state pushes, warnings, errors and operator frames, in order, under one bound
    /// and one slow-consumer clock with the pending ticks (Outbox.swift).
    package var outbox = Outbox()
    /// Fragments of the message being received.
    package var rx: [UInt8] = []
    /// When the message being received started (monotonic ms; 0: none): one whose final
    /// fragment never comes is bounded by --handshake-timeout, not held forever.
    package var rxSince: Int64 = 0
    /// What few sessions have, boxed: inline, the echo queue and the close reason would take 32
    /// bytes of every session.
    private var rare: Rare?
    /// Keepalive (monotonic ms): the later of when the peer last sent anything and when a tick
    /// was last written to it (ticks are traffic too). One field for both: the sweep only asks
    /// for the later of the two, and 8 bytes less keeps the session a heap block smaller.
    package private(set) var lastTraffic: Int64
    package var lastHeard: Int64 {
        get { lastTraffic }
        set { lastTraffic = max(lastTraffic, newValue) }
    }
    package var lastTick: Int64 {
        get { lastTraffic }
        set { lastTraffic = max(lastTraffic, newValue) }
    }
    package var subscriptions = SubscriptionList()
    package var pingSent = false
    /// Plain TCP, its own connection: ticks may be written from the fan-out (TickStaging.swift).
    package var writesDirectly = false
    /// In its shard's `repliedInDrain` (ReplyWrites.swift). Last: it fits the block's last byte.
    package var flushQueued = false

    /// `pre`: the socket layer's headroom in front of every frame, handed in by the adapter.
    package init(handle: ConnectionHandle, peer: String, serial: UInt64, pre: Int) {
        self.handle = handle
        self.peer = peer
        self.serial = serial
        conn = Connection(pre: pre)
        connectedAt = coarseMillis()
        lastTraffic = connectedAt
    }

    package var hasOutbox: Bool { !outbox.isEmpty }

    /// Set on an /echo connection (--ws-echo, tests only): messages are sent back, not decoded.
    package var echo: EchoQueue? {
        get { rare?.echo }
        set { rareBox().echo = newValue }
    }

    /// Close code and reason once we decided to close.
    package var closing: Closing? { rare?.closing }

    package func rareBox() -> Rare {
        if let r = rare { return r }
        let r = Rare()
        rare = r
        return r
    }

    /// Queues a frame without asking for WRITEABLE (the mailbox drain writes it: ReplyWrites.swift).
    package func queue(_ frame: [UInt8]) -> Bool {
        outbox.push(frame, at: Outbox.tenths(coarseMillis()), ticks: Int(pendingTicks))
    }

    package func popOutbox() -> [UInt8] { outbox.pop() }

    /// Takes the oldest queued frame off, once written.
    package func dropOutboxHead() { outbox.dropFirst() }

    /// Something was written to it: the slow-consumer clock restarts if more waits, else stops.
    package func wrote() {
        outbox.progressed(at: Outbox.tenths(coarseMillis()), stillWaiting: hasOutbox || pendingTicks > 0)
    }

    /// A pending tick went without a write (superseded, unsubscribed): if nothing else waits,
    /// the clock stops, so a later frame starts it afresh.
    package func tickDropped() {
        pendingTicks -= 1
        if pendingTicks == 0, !hasOutbox { outbox.idle() }
    }

    package func subscription(for ride: String) -> Subscription? {
        subscriptions.first { $0.live.id == ride }
    }

    package func subscription(to live: LiveRide) -> Subscription? {
        subscriptions.first { $0.live === live }
    }
}

/// What few sessions have: an echo queue (/echo, tests only), a decision to close.
package final class Rare {
    var echo: EchoQueue?
    package var closing: Closing?
}

/// Why a session is closing, once it is.
package struct Closing {
    package let code: UInt16
    package let reason: String

    package init(code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }
}

/// A session's subscriptions, in order. Nearly every connection watches one ride: that one is
/// held without an array (48 bytes less per connection); a second moves them into one.
package struct SubscriptionList: Sequence {
    private enum Storage {
        case none
        case one(Subscription)
        case many([Subscription])
    }
    private var storage = Storage.none

    var isEmpty: Bool {
        if case .none = storage { return true }
        return false
    }

    package mutating func append(_ sub: Subscription) {
        switch storage {
        case .none: storage = .one(sub)
        case .one(let first): storage = .many([first, sub])
        case .many(var all):
            storage = .none  // keeps the array unique while it grows
            all.append(sub)
            storage = .many(all)
        }
    }

    /// Removes the subscription to `live`, if there is one.
    package mutating func remove(_ live: LiveRide) {
        switch storage {
        case .none: return
        case .one(let only): if only.live === live { storage = .none }
        case .many(var all):
            storage = .none
            all.removeAll { $0.live === live }
            storage = all.count == 1 ? .one(all[0]) : all.isEmpty ? .none : .many(all)
        }
    }

    /// The subscription to `live` is now at `index` of its slot (another left the slot).
    package mutating func moved(_ live: LiveRide, to index: Int32) {
        switch storage {
        case .none: return
        case .one(var only):
            guard only.live === live else { return }
            only.index = index
            storage = .one(only)
        case .many(var all):
            storage = .none
            if let i = all.firstIndex(where: { $0.live === live }) { all[i].index = index }
            storage = .many(all)
        }
    }

    package mutating func removeAll() { storage = .none }

    package struct Iterator: IteratorProtocol {
        fileprivate var only: Subscription?
        fileprivate var all: IndexingIterator<[Subscription]>?

        package mutating func next() -> Subscription? {
            if let o = only {
                only = nil
                return o
            }
            return all?.next()
        }
    }

    package func makeIterator() -> Iterator {
        switch storage {
        case .none: return Iterator()
        case .one(let only): return Iterator(only: only)
        case .many(let all): return Iterator(all: all.makeIterator())
        }
    }
}

/// A session watching a ride, as the session holds it: the ride, and where the session is
/// in the ride's subscribers on this thread (`RideSlot.subscribers`).
package struct Subscription {
    package let live: LiveRide
    package var index: Int32

    package init(live: LiveRide, index: Int32) {
        self.live = live
        self.index = index
    }
}

/// A session watching a ride, as the ride's slot on this thread holds it: what the fan-out
/// reads for every subscriber on every tick, contiguous and without reference counting (no
/// object of its own between the ride and the session).
package struct Subscriber {
    /// Unretained: the session leaves every slot when it closes (Shard.closed).
    package let ref: Unmanaged<Session>
    package var session: Session { ref.takeUnretainedValue() }
    /// When this ride's latest tick became pending (monotonic ms), `notPending` while none
    /// waits (the frame itself is the slot's). Whether the connection is slow is not decided
    /// here but by its session's one clock (Outbox.swift), which the first pending tick starts.
    private var since: Int64 = Subscriber.notPending
    private static let notPending = Int64.min

    package init(session: Session) { ref = .passUnretained(session) }

    /// This ride's latest tick is waiting to be written.
    package var pending: Bool {
        get { since != Self.notPending }
        set { if !newValue { since = Self.notPending } }
    }

    /// A tick becomes pending at `now`.
    package mutating func tickPending(_ now: Int64) { since = now }

}
