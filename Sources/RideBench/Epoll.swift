import Glibc

/// epoll through dlsym: Swift's Glibc module does not include <sys/epoll.h>, and this
/// target has no C dependencies (a system-library target for one header would be a
/// package change). The three calls are plain C functions in libc, so resolving them
/// once and calling through @convention(c) pointers costs nothing per call.
struct Epoll {
    static let IN: UInt32 = 0x001
    static let OUT: UInt32 = 0x004
    static let ERR: UInt32 = 0x008
    static let HUP: UInt32 = 0x010
    static let ctlAdd: Int32 = 1
    static let ctlDel: Int32 = 2
    static let ctlMod: Int32 = 3

    // struct epoll_event is __attribute__((packed)) on x86_64: { u32 events; u64 data } = 12 bytes.
    #if arch(x86_64)
    static let eventSize = 12
    static let dataOffset = 4
    #else
    static let eventSize = 16
    static let dataOffset = 8
    #endif

    private typealias CreateFn = @convention(c) (Int32) -> Int32
    private typealias CtlFn = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    private typealias WaitFn = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32

    private let ctlFn: CtlFn
    private let waitFn: WaitFn
    let fd: Int32

    init?() {
        let handle = dlopen(nil, RTLD_NOW)
        guard let c = dlsym(handle, "epoll_create1"), let t = dlsym(handle, "epoll_ctl"),
              let w = dlsym(handle, "epoll_wait") else { return nil }
        ctlFn = unsafeBitCast(t, to: CtlFn.self)
        waitFn = unsafeBitCast(w, to: WaitFn.self)
        fd = unsafeBitCast(c, to: CreateFn.self)(O_CLOEXEC)
        if fd < 0 { return nil }
    }

    @discardableResult
    func ctl(_ op: Int32, _ target: Int32, events: UInt32, token: UInt32) -> Int32 {
        var ev = [UInt8](repeating: 0, count: Self.eventSize)
        ev.withUnsafeMutableBytes { p in
            p.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            p.storeBytes(of: UInt64(token), toByteOffset: Self.dataOffset, as: UInt64.self)
        }
        return ev.withUnsafeMutableBytes { ctlFn(fd, op, target, $0.baseAddress) }
    }

    /// Waits into `buffer` (room for `capacity` events); returns the count or -1.
    func wait(_ buffer: UnsafeMutableRawPointer, capacity: Int32, timeoutMillis: Int32) -> Int32 {
        waitFn(fd, buffer, capacity, timeoutMillis)
    }

    static func event(_ buffer: UnsafeMutableRawPointer, _ i: Int) -> (events: UInt32, token: UInt32) {
        let base = buffer + i * eventSize
        let e = base.loadUnaligned(as: UInt32.self)
        let d = (base + dataOffset).loadUnaligned(as: UInt64.self)
        return (e, UInt32(truncatingIfNeeded: d))
    }
}
