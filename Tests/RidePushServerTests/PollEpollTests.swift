@testable import RideService
import CEpoll
import Glibc
import XCTest

/// The service threads' poll() answered from epoll (Sources/CEpoll/poll_epoll.c): the same
/// answers as the kernel's poll for lws's array, the listener reported beside it.
final class PollEpollTests: XCTestCase {
    var open: [Int32] = []

    override func tearDown() {
        cepoll_loop_enter(nil)
        for fd in open { close(fd) }
        open = []
    }

    func pair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        open += fds
        return (fds[0], fds[1])
    }

    func send1(_ fd: Int32) { var b: UInt8 = 7; XCTAssertEqual(write(fd, &b, 1), 1) }

    func testReadyDescriptorsGetTheirEventsAndTheOthersNone() throws {
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        let (a, aPeer) = pair()
        let (b, _) = pair()
        let (c, _) = pair()
        send1(aPeer)
        cepoll_loop_enter(loop)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: -1),
                   pollfd(fd: b, events: Int16(POLLIN | POLLOUT), revents: -1),
                   pollfd(fd: c, events: Int16(POLLIN), revents: -1)]
        XCTAssertEqual(poll(&fds, 3, 0), 2)
        XCTAssertEqual(fds.map(\.revents), [Int16(POLLIN), Int16(POLLOUT), 0])
        // lws drops POLLOUT after its write: the next call no longer reports it.
        fds[1].events = Int16(POLLIN)
        XCTAssertEqual(poll(&fds, 3, 0), 1)
        XCTAssertEqual(fds.map(\.revents), [Int16(POLLIN), 0, 0])
    }

    func testAClosedPeerIsAHangUpAsWithPoll() throws {
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        let (a, aPeer) = pair()
        cepoll_loop_enter(loop)
        var fds = [pollfd(fd: a, events: 0, revents: 0)]  // rx flow control: no POLLIN asked
        XCTAssertEqual(poll(&fds, 1, 0), 0)
        close(aPeer)
        open.removeAll { $0 == aPeer }
        XCTAssertEqual(poll(&fds, 1, 0), 1)
        XCTAssertEqual(fds[0].revents, Int16(POLLHUP))
    }

    /// A socket closed and its number given to a new one between two calls, with the same
    /// events asked: the array looks unchanged, so only forgetting the number finds the new one.
    func testANumberReusedByAnAcceptedSocketIsWatchedAfterForget() throws {
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        let (a, _) = pair()
        cepoll_loop_enter(loop)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0)]
        XCTAssertEqual(poll(&fds, 1, 0), 0)
        close(a)
        open.removeAll { $0 == a }
        let (b, bPeer) = pair()
        XCTAssertEqual(b, a, "the lowest free number is reused")
        send1(bPeer)
        XCTAssertEqual(poll(&fds, 1, 0), 0, "unseen without forget: the closed socket left the epoll set")
        cepoll_loop_forget(loop, b)
        XCTAssertEqual(poll(&fds, 1, 0), 1)
        XCTAssertEqual(fds[0].revents, Int16(POLLIN))
    }

    func testTheListenerIsReportedOnceBesideTheArrayAndNotWhenUnwatched() throws {
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        open.append(listener)
        var addr = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0,
                               sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                XCTAssertEqual(bind(listener, $0, len), 0)
                XCTAssertEqual(listen(listener, 8), 0)
                XCTAssertEqual(getsockname(listener, $0, &len), 0)
            }
        }
        let (idle, _) = pair()
        cepoll_loop_enter(loop)
        XCTAssertEqual(cepoll_loop_listen(loop, listener, 1), 0)
        var fds = [pollfd(fd: idle, events: Int16(POLLIN), revents: 0)]
        XCTAssertEqual(poll(&fds, 1, 0), 0)
        XCTAssertEqual(cepoll_loop_take_listener(loop), 0)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        open.append(client)
        withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { XCTAssertEqual(connect(client, $0, len), 0) }
        }
        XCTAssertEqual(poll(&fds, 1, 2000), 0, "the listener is not lws's: no entry of the array is ready")
        XCTAssertEqual(fds[0].revents, 0)
        XCTAssertEqual(cepoll_loop_take_listener(loop), 1)
        XCTAssertEqual(cepoll_loop_take_listener(loop), 0)
        // Backing off: still waiting to be accepted, but not reported.
        XCTAssertEqual(cepoll_loop_listen(loop, listener, 0), 0)
        XCTAssertEqual(poll(&fds, 1, 0), 0)
        XCTAssertEqual(cepoll_loop_take_listener(loop), 0)
        XCTAssertEqual(cepoll_loop_listen(loop, listener, 1), 0)
        XCTAssertEqual(poll(&fds, 1, 0), 0)
        XCTAssertEqual(cepoll_loop_take_listener(loop), 1)
    }

    /// Another array on the same thread (not lws's) and any thread without a loop: the kernel's poll.
    func testOtherArraysAndThreadsGoToTheKernel() throws {
        let (a, aPeer) = pair()
        send1(aPeer)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0)]
        XCTAssertEqual(poll(&fds, 1, 0), 1)  // no loop on this thread
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        cepoll_loop_enter(loop)
        let (b, _) = pair()
        var lwsArray = [pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
        XCTAssertEqual(poll(&lwsArray, 1, 0), 0)
        // An fd the loop never registered, in another array: answered by the kernel all the same.
        fds[0].revents = 0
        XCTAssertEqual(poll(&fds, 1, 0), 1)
        XCTAssertEqual(fds[0].revents, Int16(POLLIN))
    }

    /// A socket marked as awaiting a request is shown to the hook when it reads ready, before
    /// poll() returns; unmarked or not ready, it is not; forget clears the mark with the number.
    func testAMarkedReadySocketIsShownToTheHookBeforePollReturns() throws {
        let loop = try XCTUnwrap(cepoll_loop_new())
        defer { cepoll_loop_free(loop) }
        let (a, aPeer) = pair()
        let (b, bPeer) = pair()
        let (c, _) = pair()
        final class Seen { var fds: [Int32] = [] }
        let seen = Seen()
        cepoll_loop_set_request_hook(loop, { ctx, fd in
            Unmanaged<Seen>.fromOpaque(ctx!).takeUnretainedValue().fds.append(fd)
        }, Unmanaged.passUnretained(seen).toOpaque())
        XCTAssertEqual(cepoll_loop_mark_request(loop, a, 1), 0)
        XCTAssertEqual(cepoll_loop_mark_request(loop, c, 1), 0)  // marked, never ready
        send1(aPeer)
        send1(bPeer)  // ready, not marked
        cepoll_loop_enter(loop)
        var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: c, events: Int16(POLLIN), revents: 0)]
        XCTAssertEqual(poll(&fds, 3, 0), 2)
        XCTAssertEqual(seen.fds, [a])
        // Still readable (nothing read), still marked: shown again; unmarked: not.
        XCTAssertEqual(poll(&fds, 3, 0), 2)
        XCTAssertEqual(seen.fds, [a, a])
        XCTAssertEqual(cepoll_loop_mark_request(loop, a, 0), 0)
        XCTAssertEqual(poll(&fds, 3, 0), 2)
        XCTAssertEqual(seen.fds, [a, a])
        XCTAssertEqual(cepoll_loop_mark_request(loop, b, 1), 0)
        cepoll_loop_forget(loop, b)
        XCTAssertEqual(poll(&fds, 3, 0), 2)
        XCTAssertEqual(seen.fds, [a, a], "forget clears the mark of the number's old socket")
        // A number beyond what the loop has seen grows its arrays.
        XCTAssertEqual(cepoll_loop_mark_request(loop, 50_000, 1), 0)
        XCTAssertEqual(cepoll_loop_mark_request(loop, 60_000, 0), 0)
    }
}
