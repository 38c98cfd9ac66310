/// HTTP requests waiting for the store worker, on one service thread: each gets a token the
/// worker's answer names, and is found by it (the answer) or by its connection (a closed
/// connection forgets it) in O(1) each way, not by a scan of every pending read.
package struct PendingReads<Handle: Hashable> {
    package struct Waiting {
        package let handle: Handle
        /// What it asked for (a ride id for `GET /rides/{id}`).
        package let what: String
    }

    private var byToken: [UInt64: Waiting] = [:]
    private var byHandle: [Handle: UInt64] = [:]
    private var last: UInt64 = 0

    package init() {}

    package var count: Int { byToken.count }

    /// Records that `handle` waits for an answer about `what`; returns the token the answer
    /// will carry. An earlier read of the same connection is forgotten (HTTP/1.1 asks one at a time).
    package mutating func add(_ handle: Handle, _ what: String) -> UInt64 {
        forget(handle)
        last += 1
        byToken[last] = Waiting(handle: handle, what: what)
        byHandle[handle] = last
        return last
    }

    /// The read answered under `token`, taken out; nil when its connection went away meanwhile.
    package mutating func take(_ token: UInt64) -> Waiting? {
        guard let w = byToken.removeValue(forKey: token) else { return nil }
        byHandle[w.handle] = nil
        return w
    }

    /// The connection is gone: an answer for it will find nothing.
    package mutating func forget(_ handle: Handle) {
        guard let t = byHandle.removeValue(forKey: handle) else { return }
        byToken[t] = nil
    }
}
