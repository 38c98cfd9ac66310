/// Everything queued for one connection and not yet written — replies, state pushes, errors,
/// operator frames — in order, with the one bound and the one slow-consumer clock that apply
/// to all of it and to the connection's pending ticks (held by its subscriptions, one per
/// ride at most, counted here through `ticks`). Pure: the service thread owns it (in its
/// Session) and asks lws to write; unit-tested without a socket.
///
/// The bound is a count (`limit`) checked on every push, so no kind of frame can grow the queue
/// past it; a push over it is refused and the caller closes the connection (4008). The clock
/// starts when something becomes waiting while nothing was, and restarts only when a write
/// takes something off (the peer is reading): a newer push or tick never restarts it, so a
/// peer that reads nothing is overdue `lag` after its first unwritten frame, whatever follows.
/// Times are tenths of a second of the monotonic clock in an Int32 (six years of uptime),
/// which keeps the Session in its heap block.
package struct Outbox {
    package init() {}

    /// Frames a connection may leave unread (with its pending ticks) before it is a slow consumer.
    package static let limit = 1024

    package private(set) var frames: [[UInt8]] = []
    private var head32: Int32 = 0
    /// When the oldest unwritten frame or tick was queued (tenths of a second); 0: none waits.
    private var since: Int32 = 0

    /// Index of the oldest unwritten frame in `frames`.
    package var head: Int { Int(head32) }
    package var isEmpty: Bool { head32 == frames.count }
    /// Frames queued, not yet written.
    package var count: Int { frames.count - Int(head32) }

    /// Monotonic milliseconds as the clock's unit (never 0: that means "nothing waits").
    package static func tenths(_ millis: Int64) -> Int32 { Int32(truncatingIfNeeded: max(1, millis / 100)) }

    /// Queues `frame` at `now` unless the frames and `ticks` pending already reach the limit:
    /// false then, and nothing is queued.
    package mutating func push(_ frame: [UInt8], at now: Int32, ticks: Int) -> Bool {
        guard count + ticks < Self.limit else { return false }
        frames.append(frame)
        waiting(at: now)
        return true
    }

    /// Something (a frame, a tick) became waiting at `now`: the clock starts unless it runs.
    package mutating func waiting(at now: Int32) {
        if since == 0 { since = now }
    }

    /// A write took something off at `now`: the clock restarts if more waits, else stops.
    package mutating func progressed(at now: Int32, stillWaiting: Bool) {
        since = stillWaiting ? now : 0
    }

    /// Whatever waited is gone without a write (a superseded tick, an unsubscribe).
    package mutating func idle() { since = 0 }

    /// Whether what waits has waited longer than `lag` tenths at `now`.
    package func overdue(at now: Int32, lag: Int32) -> Bool { since != 0 && now &- since > lag }

    /// Takes the oldest frame off, once written.
    package mutating func pop() -> [UInt8] {
        let f = frames[Int(head32)]
        dropFirst()
        return f
    }

    package mutating func dropFirst() {
        head32 += 1
        if Int(head32) == frames.count {
            frames.removeAll(keepingCapacity: false)  // most sessions go quiet: hold no buffer
            head32 = 0
        }
    }

    /// Removes the first unwritten frame matching `isIt` (the fleet-frame marker), if any.
    package mutating func removeFirst(where isIt: ([UInt8]) -> Bool) {
        guard let i = frames[Int(head32)...].firstIndex(where: isIt) else { return }
        frames.remove(at: i)
        if Int(head32) == frames.count {
            frames.removeAll(keepingCapacity: false)
            head32 = 0
        }
    }
}
