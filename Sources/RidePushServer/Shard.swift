import CEpoll
import CLibWebSockets
import Foundation
import RideAuth
import RideCore
import RideProtocol
import RideService
import Synchronization

/// One libwebsockets context and the thread that services it. lws is single-threaded per
/// context, so every lws call for this context happens on that thread; other threads hand
/// work over through `mailbox` and `lws_cancel_service`.
final class Shard: @unchecked Sendable {  // `mailbox` is Locked, `pulse` atomic, `context` immutable; the rest is its service thread's (asserted in callback)
    let index: Int
    /// The service side (RideServer). The composition root (Hub) owns it and outlives its
    /// shards: unowned, and checked, so a use after it is gone traps instead of reading freed
    /// memory. The tick's per-subscriber loop does not touch it.
    unowned let service: RideServer
    /// The one shared timer (thread 0 runs it); owned by the composition root too.
    unowned let ticker: Ticker
    /// This thread's liveness and connection count (/healthz, the heap trimmer).
    let pulse: ThreadPulse
    /// Made before the shard and handed in (Hub.makeContext): its user pointer is the
    /// mailboxes, which find the shard by context (Mailboxes.shard(for:)).
    let context: OpaquePointer
    /// Thread 0's context, woken as each other thread leaves (it leaves last).
    let firstContext: OpaquePointer
    let vhost: OpaquePointer
    private let mailbox = Locked<[ShardEvent]>([])
    /// Sessions on this thread by serial (service thread only). Answers from the store worker
    /// name a session by serial, so one that closed meanwhile is simply not found.
    var sessions = SessionTable()
    /// HTTP connections waiting for the store worker (`GET /rides/{id}`, the listing; HTTP.swift).
    var awaitingStore = PendingReads<OpaquePointer>()
    /// Responses made off the HTTP callback, written on HTTP_WRITEABLE.
    var deferredResponses: [OpaquePointer: (status: UInt32, body: [UInt8])] = [:]
    /// Headers to go with a deferred response (`Idempotent-Replayed` on a server API replay).
    var deferredHeaders: [OpaquePointer: [(name: String, value: String)]] = [:]
    /// Server API POSTs whose bodies are arriving (ServerAPIRoutes.swift).
    var apiBodies: [OpaquePointer: ServerAPIBody] = [:]
    /// Connections whose current request's body is complete (HTTP_BODY_COMPLETION seen).
    var bodyCompleted = Set<OpaquePointer>()
    /// Plain HTTP connections' places in the per-address limit and request deadlines.
    var httpLimits = HTTPConnections<OpaquePointer>()
    /// Connections whose request line held a NUL, answered 400 by RequestLineCheck.swift.
    var nulAnswered = Set<Int32>()
    let peekBuffer = UnsafeMutableRawPointer.allocate(byteCount: RequestLineNUL.peekLimit, alignment: 1)
    var stopping = false
    /// This thread's poll() answered from epoll (Sources/CEpoll/poll_epoll.c); it also watches
    /// the listener. nil if epoll was unavailable: lws's own poll() then serves as before.
    let loop: OpaquePointer? = cepoll_loop_new()
    /// Whether the listener is watched through lws (only without `loop`).
    var acceptor: OpaquePointer?
    let listenFD: Int32
    let pre = Int(clws_pre())
    /// HTTP responses waiting for HTTP_WRITEABLE, by wsi.
    var httpBodies: [OpaquePointer: [UInt8]] = [:]
    /// Upgrades between FILTER_PROTOCOL_CONNECTION and ESTABLISHED, by wsi.
    var pendingUpgrades: [OpaquePointer: PendingUpgrade] = [:]
    /// A spare descriptor released at the file limit to refuse one waiting connection cleanly.
    var spareFD: Int32 = open("/dev/null", O_RDONLY | O_CLOEXEC)
    let tickTimer = TimerBox.make()
    let backoffTimer = TimerBox.make()
    /// Keepalive, authentication and token deadlines, slow consumers (ConnectionTimers).
    let connectionTimer = TimerBox.make()
    /// The drain's beat (DrainPlan.beatMillis), from the shutdown on.
    let drainTimer = TimerBox.make()
    /// Set by the shutdown: which connections close when (DrainPlan).
    var drain: DrainPlan?
    var lastBackoffLog: Int64 = 0
    /// Current pause before watching the listener again: doubles from 100 ms to 2 s while the
    /// file limit lasts (each look costs a poll over every socket), back to 0 on an accept.
    var backoffMillis: Int64 = 0
    /// Where a tick is copied to be written (TickStaging.swift).
    var staging = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
    var stagingSize = 1024
    /// Sessions given replies in the current mailbox drain, and where their frames are put
    /// together to be written (ReplyWrites.swift).
    var repliedInDrain: [Session] = []
    var batch = UnsafeMutablePointer<UInt8>.allocate(capacity: 4096)
    var batchSize = 4096
    /// Ticks written since the last tick (flushed to the shared metric once a second).
    var ticksWritten = 0
    /// Monotonic ms of the latest tick fan-out on this thread.
    var tickTime: Int64 = 0
    init(index: Int, service: RideServer, ticker: Ticker, listenFD: Int32, context: (OpaquePointer, vhost: OpaquePointer),
         firstContext: OpaquePointer) {
        self.index = index
        self.service = service
        self.ticker = ticker
        pulse = service.threads[index]
        self.context = context.0
        self.firstContext = firstContext
        vhost = context.vhost
        self.listenFD = dup(listenFD)
        tickTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        backoffTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        connectionTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        drainTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        cepoll_loop_free(loop)
        peekBuffer.deallocate()
        staging.deallocate()
        batch.deallocate()
        tickTimer.deallocate()
        backoffTimer.deallocate()
        connectionTimer.deallocate()
        drainTimer.deallocate()
    }

    /// The service loop; returns when a shutdown has closed every session (or timed out).
    func run() {
        ServiceThread.enter(index)
        cepoll_loop_enter(loop)
        defer { cepoll_loop_enter(nil) }
        installRequestHook()
        watchListener()
        scheduleConnectionTimers()
        if index == 0 { ticker.start(on: self) }
        while true {
            pulse.lastLoop.store(monotonicMillis(), ordering: .relaxed)
            if stopping, let drain {
                // Thread 0 ticks for every thread's connections, so it leaves last.
                let othersDone = index != 0 || service.threadsLooping.load(ordering: .relaxed) == 1
                if (sessions.isEmpty && othersDone) || monotonicMillis() > drain.deadline { break }
            }
            if lws_service(context, 0) < 0 { break }
            if cepoll_loop_take_listener(loop) != 0 { _ = acceptReady() }
        }
        if index == 0 { ticker.stop(on: self) }
        lws_sul_cancel(&drainTimer.pointee.sul)
        service.threadsLooping.subtract(1, ordering: .relaxed)
        // Thread 0 may be waiting in lws_service for this to be the last: wake it. Its context
        // lives until every thread has left (Hub.run destroys the contexts after).
        if index != 0 { lws_cancel_service(firstContext) }
    }

    // MARK: mailbox

    func post(_ e: ShardEvent) {
        mailbox.withLock { $0.append(e) }
        lws_cancel_service(context)
    }

    /// Several events with one wake-up.
    func post(_ events: [ShardEvent]) {
        mailbox.withLock { $0.append(contentsOf: events) }
        lws_cancel_service(context)
    }

    /// Runs on LWS_CALLBACK_EVENT_WAIT_CANCELLED: the thread handles what others handed it.
    func drainMailbox() {
        // Taken whole, not emptied keeping its capacity: that copies nothing but allocates a
        // buffer as large as the biggest burst so far (the connect ramp's replies) and holds it.
        let events = mailbox.withLock { m -> [ShardEvent] in
            let e = m
            m = []
            return e
        }
        for e in events { handle(e) }
        flushReplied()
    }

    func handle(_ e: ShardEvent) {
        switch e {
        case .tick(let batch): fanOut(batch)
        case .push(let live, let frame, let except): push(live, frame, except: except)
        case .reply(let serial, let frame, let ride):
            guard let s = sessions[serial] else { return }
            if let ride, let own = s.subscription(to: ride) { supersedeTick(own) }
            // Written at the end of the drain; over the bound, a slow consumer.
            if s.queue(frame) { replied(s) } else { slowConsumer(s) }
            perform(s, s.conn.answered())
        case .found(let serial, let then, let live, let failure):
            if case .http(let token, let claims, let journal) = then { return rideFound(token, claims, journal: journal, live, failure) }
            guard let s = sessions[serial] else { return }
            perform(s, s.conn.resumed(then, found: live, failure: failure, service, from: requester(s)))
        case .ops(let item): deliverOps(item)
        case .httpAnswer(let token, let answer): httpAnswered(token, answer)
        case .shutdown: beginShutdown()
        }
    }

    // MARK: fan-out (service thread)

    /// Gives every local subscriber of every ticking ride this tick: written at once where
    /// nothing is ahead of it (TickStaging.swift), else pending for WRITEABLE. A subscriber that
    /// still holds the previous tick keeps one pending tick: the slot's frame now holds the newer.
    func fanOut(_ batch: TickBatch) {
        let started = monotonicMicros()
        let now = coarseMillis()
        let tenth = Outbox.tenths(now)
        tickTime = now
        var coalesced = 0
        for k in batch.ends.indices {
            let slot = batch.ends[k].live.slot(index)
            if slot.pointee.subscribers.isEmpty { continue }
            var held = false
            var staged = -1
            // In place: the subscribers are plain structs, so walking them retains nothing.
            slot.pointee.subscribers.forEachInPlace { sub in
                // Still holding the previous tick: the slot's frame becomes the newer one. Whether
                // it waited too long is the session's one clock (ConnectionTimers, Outbox.swift).
                if sub.pending {
                    held = true
                    coalesced += 1
                    return
                }
                // Guaranteed for the call: a strong copy cost a retain and a release per subscriber.
                let written = sub.ref._withUnsafeGuaranteedRef { s -> Bool in
                    if s.pendingTicks == 0, s.writesDirectly {
                        if staged < 0 { staged = stage(batch, k) }
                        if writeStagedTick(s, staged) { return true }
                    }
                    s.pendingTicks += 1
                    s.outbox.waiting(at: tenth)
                    if s.pendingTicks == 1, !s.hasOutbox { lws_callback_on_writable(s.wsi) }
                    return false
                }
                if !written {
                    held = true
                    sub.tickPending(now)
                }
            }
            slot.pointee.frame = held ? batch.frame(k, pre: pre) : nil
        }
        if coalesced > 0 { service.metrics.add(service.metrics.ticksCoalesced, coalesced) }
        // Counted locally between ticks: one shared atomic per write would bounce a cache
        // line between the threads.
        service.metrics.add(service.metrics.ticksSent, ticksWritten)
        ticksWritten = 0
        service.metrics.fanout.observe(Double(monotonicMicros() - started) / 1000)
    }

    /// This thread's connection timer: once a second, what ConnectionTimers says is due for
    /// each session, performed here. Its own lws timer on this context, apart from the tick.
    func scheduleConnectionTimers() {
        lws_sul_schedule(context, 0, &connectionTimer.pointee.sul, { sul in
            // Also while draining: the connections still open keep their keepalive and
            // slow-consumer deadlines until their turn to close.
            guard let shard = TimerBox.owner(of: sul, as: Shard.self) else { return }
            shard.connectionTimersFired()
            shard.scheduleConnectionTimers()
        }, 1_000_000)
    }

    func connectionTimersFired() {
        let now = coarseMillis(), wall = WallClock.seconds()
        for wsi in httpLimits.takeOverdue(now: now) { lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, LWS_TO_KILL_ASYNC) }
        sessions.forEach { s in
            for due in service.connectionTimers.due(s, now: now, wall: wall) {
                switch due {
                case .slowConsumer(let reason): slowConsumer(s, reason)
                case .outboxIdle: s.outbox.idle()
                case .tokenExpired: perform(s, s.conn.sweep(service))
                case .authTimedOut: perform(s, s.conn.authTimedOut(service))
                case .incompleteMessage(let reason):
                    service.metrics.control("invalid", "incomplete")
                    closeHard(s, code: 1008, reason: reason)
                case .drop: lws_set_timeout(s.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                case .ping:
                    s.pingSent = true
                    s.pingDue = true
                    lws_callback_on_writable(s.wsi)
                }
            }
        }
    }

    /// The peer sent something (a message or a pong): it is alive.
    func heard(_ s: Session) {
        s.lastHeard = coarseMillis()
        s.pingSent = false
    }

    func push(_ live: LiveRide, _ frame: [UInt8], except: UInt64?) {
        let slot = live.slot(index)
        for k in slot.pointee.subscribers.indices where slot.pointee.subscribers[k].session.serial != except {
            supersedeTick(&slot.pointee.subscribers[k])
            send(slot.pointee.subscribers[k].session, frame)
        }
    }

    /// Queues `frame` for `s`; at the outbox's bound (with its pending ticks) the frame is
    /// dropped and the connection closed as a slow consumer: no kind of frame queues past it.
    func send(_ s: Session, _ frame: [UInt8]) {
        if !s.enqueue(frame) { slowConsumer(s) }
    }

    /// Closes `s` with 4008 (once), counted. Hard: a peer that reads nothing may never take
    /// the close frame either.
    func slowConsumer(_ s: Session, _ reason: String = "slow consumer: \(Outbox.limit) frames not read") {
        guard s.closing == nil else { return }
        service.metrics.add(service.metrics.slowConsumerDisconnects)
        closeHard(s, code: 4008, reason: reason)
    }

    /// A state message replaces a waiting tick of the same ride: it is newer, and a tick
    /// written after an `ended` state would show the ride riding again.
    func supersedeTick(_ sub: inout Subscriber) {
        if sub.pending {
            sub.pending = false
            sub.session.tickDropped()
        }
    }

    func supersedeTick(_ sub: Subscription) {
        supersedeTick(&sub.live.slot(index).pointee.subscribers[Int(sub.index)])
    }

    /// Writes one message (lws allows one write per WRITEABLE callback). Returns -1 to close.
    func writable(_ s: Session) -> Int32 {
        if s.pingDue {
            s.pingDue = false
            // lws 4.1 never reports an empty pong, so the ping carries four bytes to echo.
            var ping = [UInt8](repeating: 0, count: pre) + Array("live".utf8)
            let n = ping.withUnsafeMutableBufferPointer { lws_write(s.wsi, $0.baseAddress! + pre, 4, LWS_WRITE_PING) }
            if n < 0 { return -1 }
        } else if let e = s.echo, !e.isEmpty {
            if writeEcho(s, e) < 0 { return -1 }
        } else if s.hasOutbox, s.writesDirectly, !s.outbox.frames[s.outbox.head].isEmpty {
            if writeOutbox(s) < 0 { return -1 }
        } else if s.hasOutbox {
            var f = s.popOutbox()
            if f.isEmpty {  // Shard.fleetFrameMarker
                if writeFleetFrame(s) < 0 { return -1 }
            } else if write(s.wsi, &f) < 0 { return -1 }
        } else if s.pendingTicks > 0 {
            for sub in s.subscriptions {
                let slot = sub.live.slot(index)
                guard slot.pointee.subscribers[Int(sub.index)].pending else { continue }
                slot.pointee.subscribers[Int(sub.index)].pending = false
                s.pendingTicks -= 1
                guard let frame = slot.pointee.frame else { continue }
                let n = stage(frame)
                if lws_write(s.wsi, staging + pre, n, LWS_WRITE_TEXT) < n { return -1 }
                ticksWritten += 1
                s.lastTick = tickTime
                break
            }
        } else if let c = s.closing {
            var reason = Array(c.reason.utf8.prefix(120))
            lws_close_reason(s.wsi, lws_close_status(rawValue: UInt32(c.code)), &reason, reason.count)
            return -1
        }
        // WRITEABLE came, so the peer takes what is written: the slow-consumer clock restarts.
        s.wrote()
        if s.hasOutbox || s.pendingTicks > 0 || s.closing != nil || s.pingDue || s.echo?.isEmpty == false {
            lws_callback_on_writable(s.wsi)
        }
        return 0
    }

    private func write(_ wsi: OpaquePointer, _ frame: inout [UInt8]) -> Int32 {
        let pre = self.pre
        return frame.withUnsafeMutableBufferPointer { p in
            let n = p.count - pre
            return lws_write(wsi, p.baseAddress! + pre, n, LWS_WRITE_TEXT) < n ? -1 : 0
        }
    }

    // MARK: accept

    /// Has lws poll the listening socket, through a duplicate that lws owns and closes when it
    /// stops watching.
    func watchListener() {
        // Another thread may have taken the spare's slot while this one refused with it.
        if spareFD < 0 { spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        if let loop {
            if cepoll_loop_listen(loop, listenFD, 1) < 0 { Log.error("thread \(index): could not watch the listening socket") }
            return
        }
        var fd = lws_sock_file_fd_type()
        fd.filefd = dup(listenFD)
        // At the file limit another thread may take the descriptor this one freed when it
        // stopped watching: try again after another back-off, or this thread never accepts again.
        guard fd.filefd >= 0 else { return watchListenerLater() }
        acceptor = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, fd, "ridepush-accept", nil)
        if acceptor == nil {
            close(fd.filefd)
            Log.error("thread \(index): could not watch the listening socket")
        }
    }

    /// Accepts what is waiting on the shared listening socket and hands each connection to lws.
    /// Returns -1 to have lws stop watching the listener (backing off at the file limit).
    func acceptReady() -> Int32 {
        // Draining: the listener was shut down (Hub.shutdown), so it reads ready for ever;
        // -1 has lws stop watching its duplicate.
        if stopping {
            acceptor = nil
            return -1
        }
        for _ in 0..<64 {
            let fd = clws_accept(listenFD)
            if fd < 0 {
                let e = errno
                if e == EMFILE || e == ENFILE {
                    backOffAccepting()
                    return -1
                }
                return 0
            }
            backoffMillis = 0
            // Data we sent that stays unacknowledged this long means the peer is gone: the
            // kernel drops it, so subscribers (who get a tick every second) need no pings.
            var userTimeout = UInt32(service.config.keepalive * 1000)
            setsockopt(fd, Int32(IPPROTO_TCP), 18 /* TCP_USER_TIMEOUT */, &userTimeout, socklen_t(MemoryLayout<UInt32>.size))
            // A push server writes small frames that should leave now, not wait on Nagle.
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            // A fixed send buffer (the kernel doubles it to 64 KiB) instead of one autotuned up to
            // tcp_wmem's 4 MiB: a subscriber that stops reading then chokes its socket within
            // seconds, so --slow-consumer-lag can apply, and cannot pin megabytes of kernel memory.
            var sndbuf: Int32 = 32 * 1024
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, socklen_t(MemoryLayout<Int32>.size))
            cepoll_loop_forget(loop, fd)
            if lws_adopt_socket_vhost(vhost, fd) == nil {
                close(fd)
                service.metrics.add(service.metrics.refusedConnections)
            } else {
                awaitRequest(fd)
            }
        }
        return 0
    }

    /// Out of descriptors: refuse one waiting connection with the spare descriptor (so that
    /// client gets a clean close, not a hang), stop polling the listener for a while (100 ms,
    /// doubling to 2 s) instead of spinning on it, and log at most once every 10 s. The listener leaves lws's poll set
    /// altogether: flow control on it kept lws polling every socket with a zero timeout.
    func backOffAccepting() {
        service.metrics.add(service.metrics.acceptBackoffs)
        if spareFD >= 0 {
            close(spareFD)
            let fd = clws_accept(listenFD)
            if fd >= 0 { close(fd); service.metrics.add(service.metrics.refusedConnections) }
            spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        }
        let now = monotonicMillis()
        if now - lastBackoffLog > 10_000 {
            lastBackoffLog = now
            Log.warn("out of file descriptors (limit reached): refusing new connections for now; existing subscribers keep their ticks")
        }
        acceptor = nil
        if let loop { cepoll_loop_listen(loop, listenFD, 0) }
        backoffMillis = min(max(100, backoffMillis * 2), 2000)
        watchListenerLater()
    }

    /// Watches the listener again after the current back-off (at least 100 ms).
    func watchListenerLater() {
        lws_sul_schedule(context, 0, &backoffTimer.pointee.sul, { sul in
            guard let shard = TimerBox.owner(of: sul, as: Shard.self), !shard.stopping else { return }
            shard.watchListener()
        }, lws_usec_t(max(100, backoffMillis) * 1000))
    }

    // MARK: shutdown

    /// The shutdown reaches this thread (Hub.shutdown): stop accepting, plan the closes over
    /// the drain, and take the first beat now (with no drain, every connection goes at once).
    /// The ticker and the connection timers go on for the connections still open.
    func beginShutdown() {
        guard !stopping else { return }
        stopping = true
        lws_sul_cancel(&backoffTimer.pointee.sul)
        if let loop { cepoll_loop_listen(loop, listenFD, 0) }
        // Oldest first: serials grow with each connection.
        drain = DrainPlan(sessions: sessions.values.map(\.serial).sorted(),
                          start: service.drainStart.load(ordering: .relaxed), length: service.drainMillis.load(ordering: .relaxed))
        drainBeat()
    }

    /// One beat of the drain: closes with 1012 what the plan says is due (a connection whose
    /// request the store has not answered yet waits for its answer), then beats again.
    func drainBeat() {
        guard var plan = drain else { return }
        let due = plan.beat(now: monotonicMillis()) { serial in (sessions[serial]?.conn.inFlight ?? 0) > 0 }
        drain = plan
        for serial in due {
            guard let s = sessions[serial] else { continue }  // closed by its peer meanwhile
            closeForRestart(s)
        }
        guard !plan.finished else { return }
        lws_sul_schedule(context, 0, &drainTimer.pointee.sul, { sul in
            TimerBox.owner(of: sul, as: Shard.self)?.drainBeat()
        }, lws_usec_t(DrainPlan.beatMillis * 1000))
    }

    /// 1012 "service restart": the client reconnects at once (with jitter) to another node,
    /// keeping its subscriptions and resending unanswered requests by id.
    func closeForRestart(_ s: Session) {
        s.close(code: 1012, reason: "service restart: reconnect")
    }
}

/// An lws timer with a pointer back to its Swift owner: the C callback gets only the timer.
struct TimerBox {
    var sul = lws_sorted_usec_list_t()
    var owner: UnsafeMutableRawPointer?

    static func make() -> UnsafeMutablePointer<TimerBox> {
        precondition(MemoryLayout<TimerBox>.offset(of: \TimerBox.sul) == 0)
        let p = UnsafeMutablePointer<TimerBox>.allocate(capacity: 1)
        p.initialize(to: TimerBox())
        return p
    }

    static func owner<T: AnyObject>(of sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?, as: T.Type) -> T? {
        guard let sul else { return nil }
        let box = UnsafeMutableRawPointer(sul).assumingMemoryBound(to: TimerBox.self)
        guard let o = box.pointee.owner else { return nil }
        return Unmanaged<T>.fromOpaque(o).takeUnretainedValue()
    }
}
