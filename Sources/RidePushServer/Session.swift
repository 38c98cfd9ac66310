import CLibWebSockets
import RideAuth
import RideCore

/// One WebSocket connection. Owned by the service thread of its shard: only that thread
/// reads or writes any field, so no lock.
final class Session {
    let wsi: OpaquePointer
    let peer: String
    /// Control replies, state pushes, warnings and errors, in order; never dropped.
    var outbox: [[UInt8]] = []
    var outboxHead = 0
    var subscriptions: [Subscription] = []
    /// Subscriptions holding an unsent tick (at most one each: newer ticks replace older).
    var pendingTicks = 0
    /// When this session last had nothing left to send (monotonic ms); a subscriber stuck with pending
    /// ticks past the configured lag is a slow consumer and gets disconnected.
    var drainedAt: Int64 = 0
    /// Fragments of the message being received.
    var rx: [UInt8] = []
    var rxTooLarge = false
    /// Close code and reason once we decided to close.
    var closing: (code: UInt16, reason: String)?
    /// What the token allows (nil with auth off). Boxed: most sessions of a big server carry
    /// none or the same few, and the claims inline would add ~80 bytes to every session.
    var access: Access? {
        get { accessBox?.access }
        set { accessBox = newValue.map(AccessBox.init) }
    }
    private var accessBox: AccessBox?
    /// The token's `exp` (Unix seconds; .max without one), checked by the once-a-second sweep
    /// so a connection is cut off when its token expires, not only when it next speaks.
    var tokenExp: Int64 = .max
    /// Control-message rate limit: a one-second window.
    var windowStart: Int64 = 0
    var windowCount = 0
    var strikes = 0
    /// Keepalive (monotonic ms): when the peer last sent anything, and whether our ping is
    /// waiting to be written or answered.
    var lastHeard: Int64
    /// When a tick was last written to it (monotonic ms): ticks are traffic too.
    var lastTick: Int64 = 0
    var pingDue = false
    var pingSent = false
    /// Plain TCP, its own connection: ticks may be written from the fan-out (Shard.writeTickNow).
    let writesDirectly: Bool

    init(wsi: OpaquePointer, peer: String) {
        self.wsi = wsi
        self.peer = peer
        writesDirectly = lws_is_ssl(wsi) == 0 && lws_get_network_wsi(wsi) == wsi
        drainedAt = coarseMillis()
        lastHeard = drainedAt
    }

    var hasOutbox: Bool { outboxHead < outbox.count }

    func enqueue(_ frame: [UInt8]) {
        outbox.append(frame)
        lws_callback_on_writable(wsi)
    }

    func popOutbox() -> [UInt8] {
        let f = outbox[outboxHead]
        outboxHead += 1
        if outboxHead == outbox.count {
            outbox.removeAll(keepingCapacity: false)  // most sessions go quiet: hold no buffer
            outboxHead = 0
        }
        return f
    }

    func subscription(for ride: String) -> Subscription? {
        subscriptions.first { $0.live.id == ride }
    }

    func close(code: UInt16, reason: String) {
        guard closing == nil else { return }
        closing = (code, reason)
        lws_callback_on_writable(wsi)
    }
}

/// A session watching a ride. Lives in the session's list and in its ride's shard slot.
final class Subscription {
    let live: LiveRide
    /// Unowned(unsafe): the session removes its subscriptions when it closes, and this is read
    /// for every subscriber on every tick.
    unowned(unsafe) let session: Session
    /// This ride's latest tick is waiting to be written (the frame itself is the slot's).
    var pending = false

    init(live: LiveRide, session: Session) {
        self.live = live
        self.session = session
    }
}

final class AccessBox {
    let access: Access
    init(_ access: Access) { self.access = access }
}
