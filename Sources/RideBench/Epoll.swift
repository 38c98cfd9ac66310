import CEpoll
import Glibc

/// epoll through the CEpoll shim target (the real <sys/epoll.h>: struct layout and
/// constants come from the C header, not from code here).
struct Epoll {
    static let IN = CEPOLL_IN
    static let OUT = CEPOLL_OUT
    static let ERR = CEPOLL_ERR
    static let HUP = CEPOLL_HUP
    static let ctlAdd = CEPOLL_CTL_ADD
    static let ctlDel = CEPOLL_CTL_DEL
    static let ctlMod = CEPOLL_CTL_MOD
    static let eventSize = Int(cepoll_event_size())

    let fd: Int32

    init?() {
        fd = cepoll_create()
        if fd < 0 { return nil }
    }

    @discardableResult
    func ctl(_ op: Int32, _ target: Int32, events: UInt32, token: UInt32) -> Int32 {
        cepoll_ctl(fd, op, target, events, token)
    }

    /// Waits into `buffer` (room for `capacity` events); returns the count or -1.
    func wait(_ buffer: UnsafeMutableRawPointer, capacity: Int32, timeoutMillis: Int32) -> Int32 {
        cepoll_wait(fd, buffer, capacity, timeoutMillis)
    }

    static func event(_ buffer: UnsafeMutableRawPointer, _ i: Int) -> (events: UInt32, token: UInt32) {
        (cepoll_event_events(buffer, Int32(i)), cepoll_event_token(buffer, Int32(i)))
    }
}
