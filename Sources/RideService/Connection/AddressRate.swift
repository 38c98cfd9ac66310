import RideCore
import Synchronization

/// Requests per second per client address, for HTTP endpoints that cost CPU (`/quote`): the
/// same budget as a WebSocket connection's control rate. One-second windows shared by every
/// thread; the table is emptied at each new window, so it never holds more than one second's
/// worth of addresses.
package final class AddressRate: Sendable {
    private struct State {
        var windowStart: Int64 = 0
        var counts: [String: Int] = [:]
    }
    private let state = Locked(State())  // not Mutex: TSan sees this lock (Locked.swift)
    package let perSecond: Int

    package init(perSecond: Int) { self.perSecond = perSecond }

    /// Whether one more request from `address` at monotonic millisecond `now` is allowed.
    package func allow(_ address: String, now: Int64) -> Bool {
        state.withLock { s in
            if now - s.windowStart >= 1000 || now < s.windowStart {
                s.windowStart = now
                s.counts.removeAll(keepingCapacity: s.counts.count < 4096)
            }
            let n = s.counts[address, default: 0] + 1
            s.counts[address] = n
            return n <= perSecond
        }
    }
}
