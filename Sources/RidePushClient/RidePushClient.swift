import Dispatch
import Foundation
import RideCore
import RideProtocol

/// A ride.v1 client for devices and apps: live ride feeds that reconnect by themselves and
/// requests that are safe to retry.
///
/// ```swift
/// let client = RidePushClient(url: URL(string: "wss://rides.example.com/ws")!) { try await api.rideToken() }
/// let ride = try await client.start()
/// for try await event in client.ride(ride.ride) { … }
/// ```
public final class RidePushClient: Sendable {
    /// How much a log line matters, for `Configuration.logHandler`.
    public enum LogLevel: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    }

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
        /// A request (start, pause, …, share) with no answer this long after the call throws
        /// `RidePushError.timedOut`, connected or not; each call may pass its own `timeout:`.
        public var requestTimeout: Duration = .seconds(30)
        /// Where the client's log lines go: connection changes, and on Linux libwebsockets'
        /// errors and warnings. nil (the default): the SDK prints nothing.
        public var logHandler: (@Sendable (LogLevel, String) -> Void)?
        public init() {}
    }

    let engine: Engine
    private let logKey: UInt64?

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
        timing.requestTimeout = configuration.requestTimeout.millis
        self.init(url: url, transport: configuration.transport, clock: SteadyWallClock(),
                  random: SystemRandomNumberGenerator(), timing: timing, log: configuration.logHandler,
                  tokenProvider: tokenProvider)
    }

    init(url: URL, transport: any RidePushTransportFactory, clock: any RideClock, random: any RandomNumberGenerator,
         timing: ClientCore.Timing, log: (@Sendable (LogLevel, String) -> Void)? = nil,
         tokenProvider: @escaping @Sendable () async throws -> String?) {
        engine = Engine(url: url, transport: transport,
                        core: ClientCore(clock: clock, random: random, timing: timing), log: log, tokenProvider: tokenProvider)
        #if canImport(Darwin)
        logKey = nil
        #else
        logKey = log.map { LWSLog.add($0) }
        #endif
    }

    deinit {
        engine.post { $0.core.close() }
        #if !canImport(Darwin)
        if let logKey { LWSLog.remove(logKey) }
        #endif
    }

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

    /// Requests the server answered `unavailable` or `rate_limited`, as they are retried.
    public var retries: AsyncStream<RequestRetry> {
        let (stream, continuation) = AsyncStream<RequestRetry>.makeStream(bufferingPolicy: .bufferingNewest(16))
        engine.post { e in
            let key = e.nextKey()
            e.retryWatchers[key] = continuation
            continuation.onTermination = { [e] _ in e.post { $0.retryWatchers[key] = nil } }
        }
        return stream
    }

    /// Errors the server sent that answer no request, such as the refusal of a `position`
    /// (fire-and-forget, so its refusal has no call to throw from): a server that does not
    /// take positions answers each with `unknown_type`.
    public var unansweredErrors: AsyncStream<ProtocolError> {
        let (stream, continuation) = AsyncStream<ProtocolError>.makeStream(bufferingPolicy: .bufferingNewest(16))
        engine.post { e in
            let key = e.nextKey()
            e.errorWatchers[key] = continuation
            continuation.onTermination = { [e] _ in e.post { $0.errorWatchers[key] = nil } }
        }
        return stream
    }

    /// Reports where the ride is. Not answered (the server takes a valid position silently;
    /// a refusal arrives on `unansweredErrors`). While disconnected only the newest position
    /// per ride waits, sent once the connection is back and authenticated; an older one is
    /// dropped. Throws `.invalidPosition` at once for what the server would refuse (a
    /// coordinate out of range, a negative accuracy such as Core Location's "no fix").
    public func report(position: Position, ride: String) throws(RidePushError) {
        let p = position.report(ride: ride)
        guard ClientCodec.isValidRideID(ride) else {
            throw .invalidPosition("\"ride\" must be 1-\(ClientCodec.maxRideIDLength) characters of A-Z a-z 0-9 - _ . :")
        }
        if let why = p.refusal { throw .invalidPosition(why) }
        engine.post { $0.core.report(p) }
    }

    // Every request below: while disconnected it waits (queued, sent once connected, resent
    // with the same id after a reconnect) until its answer or `timeout` (default
    // `Configuration.requestTimeout`), then throws `RidePushError.timedOut`.

    /// Starts a ride; nil `ride` lets the server pick an id, nil `plan` takes the server's
    /// default plan. Retried with the same request id across reconnects: applied once.
    public func start(ride: String? = nil, plan: String? = nil, limit: Duration? = nil,
                      timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.start(ride: ride, plan: plan, limit: limit.map { $0.components.seconds }), timeout)
    }

    /// Starts a ride where the vehicle is, with its GBFS vehicle type: a server with zones
    /// refuses a start where `ride_start_allowed` is false (`start_not_allowed`, naming the zone).
    public func start(ride: String? = nil, plan: String? = nil, limit: Duration? = nil, at position: Position?,
                      vehicleType: String? = nil, timeout: Duration? = nil) async throws -> RideSnapshot {
        let place = position.map { GeoPoint(lat: $0.lat, lon: $0.lon) }
        let zone = place == nil && vehicleType == nil ? nil : ZoneFields(position: place, vehicleType: vehicleType)
        return try await snapshot(.start(ride: ride, plan: plan, limit: limit.map { $0.components.seconds }), timeout,
                                  zoneFields: zone)
    }

    public func pause(_ ride: String, timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.control(.pause, ride: ride, metres: nil), timeout)
    }

    public func resume(_ ride: String, timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.control(.resume, ride: ride, metres: nil), timeout)
    }

    /// Ends the ride; the snapshot carries the receipt. `distance` in metres, when known.
    public func end(_ ride: String, distance: Int64? = nil, timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.control(.end, ride: ride, metres: distance), timeout)
    }

    /// Ends the ride; `force: true` (an ops token only) ends it even where zones refuse an
    /// end or no recent position is known, and the receipt says so.
    public func end(_ ride: String, distance: Int64? = nil, force: Bool, timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.control(.end, ride: ride, metres: distance), timeout, zoneFields: force ? ZoneFields(force: true) : nil)
    }

    /// The ride once, without subscribing.
    public func get(_ ride: String, timeout: Duration? = nil) async throws -> RideSnapshot {
        try await snapshot(.get(ride: ride), timeout)
    }

    /// What `seconds` of riding and `paused` seconds of pause cost on a plan.
    public func quote(plan: String? = nil, seconds: Int64, paused: Int64 = 0,
                      timeout: Duration? = nil) async throws -> QuoteReply {
        let m = try await engine.request(.quote(plan: plan, seconds: seconds, paused: paused), timeout: timeout)
        guard case .quote(let q, _) = m else { throw RidePushError.unexpectedReply(m.type) }
        return q
    }

    /// A watch-only link to the ride (its rider only).
    public func share(_ ride: String, timeout: Duration? = nil) async throws -> ShareLink {
        let m = try await engine.request(.share(ride: ride), timeout: timeout)
        guard case .share(let s, _) = m else { throw RidePushError.unexpectedReply(m.type) }
        return s
    }

    /// The app goes to the background: close the connection, keep feeds and requests.
    public func suspend() { engine.post { $0.core.suspend() } }

    /// Back to the foreground: reconnect now, resubscribe, resend what is unanswered.
    public func resume() { engine.post { $0.core.resume() } }

    /// For good: feeds finish, unanswered requests throw `.closed(.closedByClient)`.
    public func close() { engine.post { $0.core.close() } }

    private func snapshot(_ m: ClientMessage, _ timeout: Duration?, zoneFields: ZoneFields? = nil) async throws -> RideSnapshot {
        let reply = try await engine.request(m, zoneFields: zoneFields, timeout: timeout)
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
final class Engine: @unchecked Sendable {  // every var is owned by `queue`
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
    var retryWatchers: [UInt64: AsyncStream<RequestRetry>.Continuation] = [:]
    var errorWatchers: [UInt64: AsyncStream<ProtocolError>.Continuation] = [:]
    var lastState: ConnectionState = .idle
    let log: (@Sendable (RidePushClient.LogLevel, String) -> Void)?
    private var keys: UInt64 = 0

    init(url: URL, transport: any RidePushTransportFactory, core: ClientCore,
         log: (@Sendable (RidePushClient.LogLevel, String) -> Void)?,
         tokenProvider: @escaping @Sendable () async throws -> String?) {
        self.url = url
        factory = transport
        self.core = core
        self.log = log
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
    func request(_ m: ClientMessage, zoneFields: ZoneFields? = nil, timeout: Duration? = nil) async throws -> ServerMessage {
        let handle = RequestHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ServerMessage, any Error>) in
                post { e in
                    guard !handle.state.withLock({ $0.cancelled }) else { return c.resume(throwing: CancellationError()) }
                    let id = e.core.request(m, zoneFields: zoneFields, timeout: timeout?.millis)
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
            if let log, let (level, line) = Self.logLine(s, url) { log(level, line) }
            for c in stateWatchers.values { c.yield(s) }
            if case .closed = s {
                for c in stateWatchers.values { c.finish() }
                for c in retryWatchers.values { c.finish() }
                for c in errorWatchers.values { c.finish() }
            }
        case .unanswered(let e):
            log?(.warning, "\(e.code.rawValue): \(e.message)")
            for c in errorWatchers.values { c.yield(e) }
        case .retrying(let r):
            log?(.warning, "\(r.error.code.rawValue): \(r.error.message); retrying in \(r.delay.millis) ms (\(r.attempt)/\(r.attempts))")
            for c in retryWatchers.values { c.yield(r) }
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

    /// A connection change as a log line (nil: not worth one).
    static func logLine(_ s: ConnectionState, _ url: URL) -> (RidePushClient.LogLevel, String)? {
        switch s {
        case .connecting(let attempt): return (.debug, "connecting to \(url.absoluteString) (attempt \(attempt + 1))")
        case .connected: return (.info, "connected to \(url.absoluteString)")
        case .waitingToReconnect(let delay, let why):
            return (.warning, "disconnected (\(why)); reconnecting in \(delay.millis) ms")
        case .closed(.unauthorized(let why)): return (.error, "closed: the server refused the token: \(why)")
        case .closed(.closedByClient): return (.debug, "closed by the app")
        case .idle, .suspended: return nil
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
