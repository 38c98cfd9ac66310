/// A rolling restart's drain (SIGTERM with `--drain-seconds`, docs/operations.md): which of one
/// service thread's WebSockets are closed with 1012 at each beat of its drain timer.
///
/// Closing every connection at once sends every rider to the other nodes in the same second
/// (a reconnect herd: their TLS handshakes, auths and resubscribes all land together). Spread
/// evenly over the drain, the k-th of n connections is closed at `start + length·k/n`: the
/// first at once, the last one share before the end. Each thread plans its own connections;
/// since every thread starts at the same moment with the same length, the node as a whole
/// closes in the same even trickle.
///
/// A connection with a request the store has not answered yet is held back (beat by beat)
/// until it is answered, so nothing already received is cut off unanswered; past
/// `end + grace` it is closed anyway (a stuck store must not hold the restart forever; the
/// client retries the request by id on the next node, and the store answers it once).
package struct DrainPlan: Sendable {
    /// The drain timer's period: fine enough that 10 s of drain are 100 beats, coarse enough
    /// that a beat costs nothing next to the tick.
    package static let beatMillis: Int64 = 100
    /// How long after the drain's end a connection with an unanswered request is waited for.
    package static let graceMillis: Int64 = 1_000

    package let start: Int64
    package let length: Int64
    /// Serials in closing order; `next` is the first not yet handed out.
    private let order: [UInt64]
    private var next = 0
    /// Due but busy (a request in flight): handed out once idle, or at `end + grace`.
    private var held: [UInt64] = []

    /// `sessions`: the thread's connections when the drain began, in the order they should go
    /// (the adapter passes them oldest first). `start`, `length`: milliseconds on one clock.
    package init(sessions: [UInt64], start: Int64, length: Int64) {
        order = sessions
        self.start = start
        self.length = max(0, length)
    }

    package var end: Int64 { start + length }

    /// When the k-th (0-based) of the planned connections falls due.
    package func dueAt(_ k: Int) -> Int64 {
        guard !order.isEmpty else { return start }
        return start + length * Int64(k) / Int64(order.count)
    }

    /// True once every planned connection has been handed out to be closed.
    package var finished: Bool { next == order.count && held.isEmpty }

    /// The connections to close at `now`: those due by now and not `busy`, the held ones that
    /// are no longer busy, and from `end + grace` on everything left, busy or not.
    package mutating func beat(now: Int64, busy: (UInt64) -> Bool) -> [UInt64] {
        let force = now >= end + Self.graceMillis
        var out: [UInt64] = []
        var stillHeld: [UInt64] = []
        for serial in held {
            if force || !busy(serial) { out.append(serial) } else { stillHeld.append(serial) }
        }
        while next < order.count, force || dueAt(next) <= now {
            let serial = order[next]
            next += 1
            if force || !busy(serial) { out.append(serial) } else { stillHeld.append(serial) }
        }
        held = stillHeld
        return out
    }

    /// The moment a stopping thread leaves its loop whatever is still open: the drain, then
    /// 3 s for the close handshakes (a no-drain stop's bound, as before drains existed).
    /// The process so exits within drain + 5 s (grace and teardown included).
    package var deadline: Int64 { end + 3_000 }
}
