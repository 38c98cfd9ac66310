import Dispatch
import Foundation
import RideCore
import RideProtocol

/// A ride.v1 client for devices and apps: live ride feeds that reconnect by themselves and
/// requests that are safe to retry.
///
/// ```swift
/// let client = RidePushClient(url: URL(string: "wss://rides.example.com/ws")!) { try await api.rideToken() }
/// let ride = try await client.start(plan: "default")
/// for try await event in client.ride(ride.ride) { … }
/// ```
public final class RidePushClient: Sendable {
    public struct Configuration: Sendable {
        public var transport: any RidePushTransportFactory = DefaultTransportFactory()
        /// First backoff ceiling; it doubles per failed attempt up to `maximumBackoff`.
        public var initialBackoff: Duration = .milliseconds(500)
        public var maximumBackoff: Duration = .seconds(20)
        /// A ride that ticks but sends nothing this long means a dead link: reconnect.
        public var watchdog: Duration = .seconds(3)
        public var connectTimeout: Duration = .seconds(10)
        /// Ask the token provider this long before the token's `exp`.
        public var refreshBeforeExpiry: Duration = .seconds(60)
        public init() {}
    }

    let engine: Engine

    /// `tokenProvider` is asked before the first connection, when the token is about to
    /// expire, and once after the server refused it as expired; return nil for a server
    /// without auth. It may be called from any thread.
    public convenience init(url: URL, configuration: Configuration = Configuration(),
                            tokenProvider: @escaping @Sendable () async throws -> String?) {
        var timing = ClientCore.Timing()
        timing.backoffBase = configuration.initialBackoff.millis
        timing.backoffCap = configuration.maximumBackoff.millis
        timing.watchdog = configuration.watchdog.millis
        timing.connectTimeout = configuration.connectTimeout.millis
        timing.refreshBefore = configuration.refreshBeforeExpiry.millis
        self.init(url: url, transport: configuration.transport, clock: SteadyWallClock(),
                  random: SystemRandomNumberGenerator(), timing: timing, tokenProvider: tokenProvider)
    }

    init(url: URL, transport: any RidePushTransportFactory, clock: any RideClock, random: any RandomNumberGenerator,
         timing: ClientCore.Timing, tokenProvider: @escaping @Sendable () async throws -> String?) {
        engine = Engine(url: url, transport: transport,
                        core: ClientCore(clock: clock, random: random, timing: timing), tokenProvider: tokenProvider)
    }

    deinit { engine.post { $0.core.close() } }

    /// The ride's live events; the first is its current snapshot. Resubscribes after every
    /// reconnect (the fresh snapshot first again). Finishes after `.ended`; throws when the
    /// ride does not exist, may not be watched, or the client closed for good.
    public func ride(_ id: String) -> RideFeed {
        RideFeed(ride: id, engine: engine)
    }

    /// Connection states as they change, starting with the current one.
    public var connectionStates: AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream<ConnectionState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        engine.post { e in
            let key = e.nextKey()
            continuation.yield(e.lastState)
            e.stateWatchers[key] = continuation
            continuation.onTermination = { [e] _ in e.post { $0.stateWatchers[key] = nil } }
        }
        return stream
    }

    /// Starts a ride; nil `ride` lets the server pick an id. Retried with the same request id
    /// across reconnects: applied once.
    public func start(ride: String? = nil, plan: String? = nil, limit: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.start(ride: ride, plan: plan, limit: limit.map { $0.components.seconds }))
    }

    public func pause(_ ride: String) async throws -> RideSnapshot {
        try await snapshot(.control(.pause, ride: ride, metres: nil))
    }

    public func resume(_ ride: String) async throws -> RideSnapshot {
        try await snapshot(.control(.resume, ride: ride, metres: nil))
    }

    /// Ends the ride; the snapshot carries the receipt. `distance` in metres, when known.
    public func end(_ ride: String, distance: Int64? = nil) async throws -> RideSnapshot {
        try await snapshot(.control(.end, ride: ride, metres: distance))
    }

    /// The ride once, without subscribing.
    public func get(_ ride: String) async throws -> RideSnapshot {
        try await snapshot(.get(ride: ride))
    }

    /// What `seconds` of riding and `paused` seconds of pause cost on a plan.
    public func quote(plan: String? = nil, seconds: Int64, paused: Int64 = 0) async throws -> QuoteReply {
        let m = try await engine.request(.quote(plan: plan, seconds: seconds, paused: paused))
        guard case .quote(let q, _) = m else { throw RidePushError.unexpectedReply(m.type) }
        return q
    }

    /// A watch-only link to the ride (its rider only).
    public func share(_ ride: String) async throws -> ShareLink {
        let m = try await engine.request(.share(ride: ride))
        guard case .share(let s, _) = m else { throw RidePushError.unexpectedReply(m.type) }
        return s
    }

    /// The app goes to the background: close the connection, keep feeds and requests.
    public func suspend() { engine.post { $0.core.suspend() } }

    /// Back to the foreground: reconnect now, resubscribe, resend what is unanswered.
    public func resume() { engine.post { $0.core.resume() } }

    /// For good: feeds finish, unanswered requests throw `.closed(.closedByClient)`.
    public func close() { engine.post { $0.core.close() } }

    private func snapshot(_ m: ClientMessage) async throws -> RideSnapshot {
        let reply = try await engine.request(m)
        guard case .state(let s, _) = reply else { throw RidePushError.unexpectedReply(reply.type) }
        return s
    }
}

/// The live events of one ride (`RidePushClient.ride(_:)`), and its latest snapshot with
/// every tick folded in: what a screen shows.
public struct RideFeed: AsyncSequence, Sendable {
    public typealias Element = RideEvent
    public let ride: String
    let engine: Engine
    let box: LatestBox

    init(ride: String, engine: Engine) {
        self.ride = ride
        self.engine = engine
        box = LatestBox()
    }

    /// The newest snapshot this feed has delivered (nil before the first event).
    public var latest: RideSnapshot? { box.value.withLock { $0 } }

    public func makeAsyncIterator() -> AsyncThrowingStream<RideEvent, any Error>.AsyncIterator {
        let (stream, continuation) = AsyncThrowingStream<RideEvent, any Error>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let ride = self.ride
        let box = self.box
        engine.post { e in
            let key = e.nextKey()
            e.feeds[ride, default: [:]][key] = FeedSink(continuation: continuation, latest: box)
            e.core.subscribe(ride)
            continuation.onTermination = { [engine = e] _ in
                engine.post { e in
                    e.feeds[ride]?[key] = nil
                    if e.feeds[ride]?.isEmpty == true {
                        e.feeds[ride] = nil
                        e.core.unsubscribe(ride)
                    }
                }
            }
        }
        return stream.makeAsyncIterator()
    }
}

final class RequestHandle: Sendable {
    let state = Locked<(id: String?, cancelled: Bool)>((nil, false))  // not Mutex: TSan sees pthread locks only
}

final class LatestBox: Sendable {
    let value = Locked<RideSnapshot?>(nil)  // not Mutex: TSan sees pthread locks only
}

struct FeedSink {
    let continuation: AsyncThrowingStream<RideEvent, any Error>.Continuation
    let latest: LatestBox
}

/// The driver: performs the core's actions. Every mutable field is owned by `queue`.
final class Engine: @unchecked Sendable {
    // Targeting the global pool keeps a thousand clients on a few threads (a queue of its
    // own would be overcommit: a thread per busy queue).
    let queue = DispatchQueue(label: "RidePushClient", target: .global())
    let url: URL
    let factory: any RidePushTransportFactory
    let tokenProvider: @Sendable () async throws -> String?
    var core: ClientCore
    var transport: (any RidePushTransport)?
    var timer: DispatchSourceTimer?
    var timerDue: Int64?
    var feeds: [String: [UInt64: FeedSink]] = [:]
    var waiters: [String: CheckedContinuation<ServerMessage, any Error>] = [:]
    var stateWatchers: [UInt64: AsyncStream<ConnectionState>.Continuation] = [:]
    var lastState: ConnectionState = .idle
    private var keys: UInt64 = 0

    init(url: URL, transport: any RidePushTransportFactory, core: ClientCore,
         tokenProvider: @escaping @Sendable () async throws -> String?) {
        self.url = url
        factory = transport
        self.core = core
        self.tokenProvider = tokenProvider
    }

    func nextKey() -> UInt64 {
        keys += 1
        return keys
    }

    /// Runs `body` on the queue, then performs what the core asked for.
    func post(_ body: @escaping @Sendable (Engine) -> Void) {
        queue.async { [self] in
            body(self)
            perform()
        }
    }

    /// A request's answer. Cancelling the calling task stops waiting for it (a control
    /// message already sent may still be applied; its id is not sent again).
    func request(_ m: ClientMessage) async throws -> ServerMessage {
        let handle = RequestHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ServerMessage, any Error>) in
                post { e in
                    guard !handle.state.withLock({ $0.cancelled }) else { return c.resume(throwing: CancellationError()) }
                    let id = e.core.request(m)
                    handle.state.withLock { $0.id = id }
                    e.waiters[id] = c
                }
            }
        } onCancel: {
            post { e in
                let id = handle.state.withLock { s -> String? in
                    s.cancelled = true
                    return s.id
                }
                guard let id else { return }
                e.core.cancel(id)
                e.waiters.removeValue(forKey: id)?.resume(throwing: CancellationError())
            }
        }
    }

    /// Drains the core's actions; an action's effect that feeds the core again (a transport
    /// event, a token) comes back through `post`, never re-entrantly.
    func perform() {
        while true {
            let actions = core.take()
            if actions.isEmpty { break }
            for a in actions { run(a) }
        }
        rearm()
    }

    private func run(_ a: ClientCore.Action) {
        switch a {
        case .connect(let generation):
            transport?.close(code: 1000)
            let t = factory.makeTransport()
            transport = t
            t.open(url, subprotocol: "ride.v1") { [weak self] ev in
                self?.post { e in
                    switch ev {
                    case .opened: e.core.opened(generation: generation)
                    case .message(let bytes): e.core.received(generation: generation, bytes)
                    case .closed(let code, let reason): e.core.closed(generation: generation, code: code, reason: reason)
                    case .failed(let why): e.core.failed(generation: generation, why)
                    }
                }
            }
        case .send(let frame):
            transport?.send(frame)
        case .disconnect(let code):
            transport?.close(code: code)
            transport = nil
        case .fetchToken:
            let provider = tokenProvider
            Task { [weak self] in
                do {
                    let t = try await provider()
                    self?.post { $0.core.tokenArrived(t) }
                } catch {
                    self?.post { $0.core.tokenFailed(String(describing: error)) }
                }
            }
        case .state(let s):
            lastState = s
            for c in stateWatchers.values { c.yield(s) }
            if case .closed = s { for c in stateWatchers.values { c.finish() } }
        case .event(let ride, let ev, let latest):
            for sink in (feeds[ride] ?? [:]).values {
                sink.latest.value.withLock { $0 = latest }
                sink.continuation.yield(ev)
                if case .ended = ev { sink.continuation.finish() }
            }
            if case .ended = ev { feeds[ride] = nil }
        case .feedFailed(let ride, let error):
            for sink in (feeds[ride] ?? [:]).values { sink.continuation.finish(throwing: error) }
            feeds[ride] = nil
        case .reply(let id, let result):
            guard let c = waiters.removeValue(forKey: id) else { return }
            switch result {
            case .success(let m): c.resume(returning: m)
            case .failure(let e): c.resume(throwing: e)
            }
        }
    }

    /// One timer at the core's next wakeup.
    private func rearm() {
        let due = core.nextWakeup
        guard due != timerDue else { return }
        timerDue = due
        timer?.cancel()
        timer = nil
        guard let due else { return }
        let t = DispatchSource.makeTimerSource(queue: queue)
        let wait = max(0, due - core.clock.now())
        t.schedule(deadline: .now() + .milliseconds(Int(wait)), leeway: .milliseconds(20))
        t.setEventHandler { [weak self] in
            guard let self else { return }
            self.timerDue = nil
            self.core.wake()
            self.perform()
        }
        t.resume()
        timer = t
    }
}

/// Wall-clock milliseconds that never step: the monotonic clock anchored to wall time once,
/// so a clock step on the device does not stretch or skip a backoff.
struct SteadyWallClock: RideClock {
    let anchorWall: Int64
    let anchorMono: Int64

    init() {
        anchorWall = SystemClock().now()
        anchorMono = Self.mono()
    }

    func now() -> Int64 { anchorWall + Self.mono() - anchorMono }

    static func mono() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

extension Duration {
    var millis: Int64 {
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }
}
