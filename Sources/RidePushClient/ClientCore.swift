import RideCore
import RideProtocol

/// The client's whole connection logic as a state machine without I/O: events in (the
/// transport's, the token provider's, the app's, "time passed"), actions out. The driver
/// (`RidePushClient`) performs the actions; tests feed events by hand with a `ManualClock`.
struct ClientCore {
    struct Timing: Sendable, Equatable {
        /// Full-jitter backoff: attempt n waits uniformly in [0, min(cap, base·2ⁿ)] ms.
        var backoffBase: Int64 = 500
        var backoffCap: Int64 = 20_000
        /// A connection that lasted this long resets the backoff.
        var stableAfter: Int64 = 5_000
        /// A ticking ride that sends nothing this long means a dead link.
        var watchdog: Int64 = 3_000
        var connectTimeout: Int64 = 10_000
        /// A request sent this long ago with nothing at all received since: a dead link
        /// (the server's host vanished without a FIN), so reconnect and resend.
        var replyTimeout: Int64 = 10_000
        /// Ask for a new token this long before the current one expires.
        var refreshBefore: Int64 = 60_000
        /// `unavailable` / `rate_limited` answers are retried (same id) this many times.
        var maxRetries = 5
        var retryDelay: Int64 = 1_000
        /// A request not answered this long after it was made fails with `.timedOut`, whether
        /// or not the client was connected meanwhile (a call may set its own).
        var requestTimeout: Int64 = 30_000
    }

    enum Action: Equatable {
        /// Open a new transport; its events carry this generation.
        case connect(generation: Int)
        case send([UInt8])
        /// Close the current transport (its late events are ignored).
        case disconnect(code: UInt16)
        case fetchToken
        case state(ConnectionState)
        /// A feed event, with the ride's latest snapshot after it.
        case event(ride: String, RideEvent, latest: RideSnapshot?)
        /// The ride's feed ends with this error (not found, forbidden, client closed).
        case feedFailed(ride: String, RidePushError)
        /// A request's answer.
        case reply(id: String, Result<ServerMessage, RidePushError>)
        /// An error that answers no request: a refused `position` (it has no id, so neither
        /// has its refusal), or anything else the server sent without an id.
        case unanswered(ProtocolError)
        /// A request was answered `unavailable` / `rate_limited` and goes again after a delay.
        case retrying(RequestRetry)
    }

    enum Phase: Equatable {
        case idle
        case fetchingToken
        case connecting(since: Int64)
        case authenticating(since: Int64, id: String)
        case connected(since: Int64)
        case waiting(until: Int64)
        case suspended
        case closed(ClosedReason)
    }

    struct Feed {
        var latest: RideSnapshot?
        /// Set from subscribe until its reply: ticks before the fresh snapshot are not shown.
        var subscribeID: String?
        var resubscribeAt: Int64?
    }

    struct Pending {
        let id: String
        let frame: [UInt8]
        /// When the app stops waiting, and the timeout it asked for (for the error).
        let deadline: Int64
        let timeout: Int64
        /// The ride a pause/resume/end is for: its waiting position goes first (an end
        /// needs a recent position where zones are configured).
        var ride: String? = nil
        var retries = 0
        var retryAt: Int64?
        var sentAt: Int64?
    }

    let clock: any RideClock
    /// Backoff jitter; request ids draw from `ids` so tests can script the jitter alone.
    var random: any RandomNumberGenerator
    var ids: any RandomNumberGenerator
    let timing: Timing

    private(set) var phase: Phase = .idle
    private(set) var generation = 0
    /// Failed attempts since the last stable connection (the backoff exponent).
    private(set) var attempt = 0
    private var actions: [Action] = []

    // Token state. `tokenCurrent` false: the provider must be asked before connecting.
    private(set) var token: String?
    private var tokenCurrent = false
    private(set) var tokenExp: Int64?
    private var fetching: FetchReason?
    /// A token fetched because the last one expired (4401); refused too → stop.
    private var refreshedAfterRefusal = false
    private var refreshAuthID: String?
    private var refreshNotBefore: Int64 = .min
    /// The text of the last `unauthorized` error: the close (4401) that follows says only the code.
    private var lastRefusal: String?
    private var lastHeard: Int64 = 0

    private(set) var feedOrder: [String] = []
    private(set) var feeds: [String: Feed] = [:]
    private(set) var pending: [Pending] = []
    /// Positions not yet sent, the newest per ride only (older fixes are worth nothing once a
    /// newer one is known, and the server ignores them anyway), in the order rides reported.
    private(set) var positions: [String: PositionReport] = [:]
    private(set) var positionOrder: [String] = []

    enum FetchReason { case connect, refresh }

    init(clock: any RideClock, random: any RandomNumberGenerator, ids: any RandomNumberGenerator = SystemRandomNumberGenerator(),
         timing: Timing = Timing()) {
        self.clock = clock
        self.random = random
        self.ids = ids
        self.timing = timing
    }

    mutating func take() -> [Action] {
        defer { actions.removeAll() }
        return actions
    }

    // MARK: the app's side

    mutating func subscribe(_ ride: String) {
        guard !isClosed else { return actions.append(.feedFailed(ride: ride, closedError)) }
        if feeds[ride] == nil {
            feeds[ride] = Feed()
            feedOrder.append(ride)
            if case .connected = phase { sendSubscribe(ride) }
        }
        ensureStarted()
    }

    mutating func unsubscribe(_ ride: String) {
        guard feeds.removeValue(forKey: ride) != nil else { return }
        feedOrder.removeAll { $0 == ride }
        if case .connected = phase { send(.unsubscribe(ride: ride), id: newID("u")) }
    }

    /// Queues a request under a fresh id, kept on every resend until its answer or until
    /// `timeout` ms (default `timing.requestTimeout`) have passed.
    mutating func request(_ message: ClientMessage, zoneFields: ZoneFields? = nil, timeout: Int64? = nil) -> String {
        let id = newID("rp")
        guard !isClosed else {
            actions.append(.reply(id: id, .failure(closedError)))
            return id
        }
        let frame = ClientCodec.encode(ClientEnvelope(id: id, message: message, zoneFields: zoneFields))
        let wait = max(0, timeout ?? timing.requestTimeout)
        var ride: String?
        if case .control(_, let r, _) = message { ride = r }
        pending.append(Pending(id: id, frame: frame, deadline: clock.now() + wait, timeout: wait, ride: ride))
        if case .connected = phase { sendPending(pending.count - 1) }
        ensureStarted()
        return id
    }

    /// A position fix, not answered unless invalid: sent at once while connected, else kept
    /// (only the newest per ride) until the connection is back and authenticated.
    mutating func report(_ p: PositionReport) {
        guard !isClosed else { return }
        if case .connected = phase { return sendPosition(p) }
        if let waiting = positions[p.ride] {
            if p.at < waiting.at { return }  // a late older fix: the newer one stays
        } else {
            positionOrder.append(p.ride)
        }
        positions[p.ride] = p
        ensureStarted()
    }

    /// The app stopped waiting: the request is not sent again.
    mutating func cancel(_ id: String) {
        pending.removeAll { $0.id == id }
    }

    mutating func suspend() {
        switch phase {
        case .closed, .suspended: return
        case .connecting, .authenticating, .connected: abandonTransport(code: 1000)
        case .idle, .fetchingToken, .waiting: break
        }
        phase = .suspended
        actions.append(.state(.suspended))
    }

    mutating func resume() {
        guard phase == .suspended else { return ensureStarted() }
        attempt = 0
        beginConnect()
    }

    mutating func close() {
        if isClosed { return }
        switch phase {
        case .connecting, .authenticating, .connected: abandonTransport(code: 1000)
        default: break
        }
        stop(.closedByClient)
    }

    // MARK: the token provider's side

    mutating func tokenArrived(_ t: String?) {
        let reason = fetching
        fetching = nil
        if reason == .refresh {
            let exp = t.flatMap(TokenExpiry.exp)
            if let t, t != token, (exp ?? .max) > (tokenExp ?? .min) {
                token = t
                tokenExp = exp
                if case .connected = phase {
                    let id = newID("auth")
                    refreshAuthID = id
                    send(.auth(token: t), id: id)
                }
            } else {
                // The provider gave nothing newer: do not ask again for this token. When it
                // lapses the server closes with 4401 and the client asks once more then.
                refreshNotBefore = .max
            }
            return
        }
        token = t
        tokenExp = t.flatMap(TokenExpiry.exp)
        tokenCurrent = true
        refreshNotBefore = .min
        // Even a token that looks expired is tried once: the server's clock and leeway decide.
        if phase == .fetchingToken { beginConnect(askIfExpired: false) }
    }

    mutating func tokenFailed(_ why: String) {
        let reason = fetching
        fetching = nil
        if reason == .refresh {
            refreshNotBefore = clock.now() + timing.retryDelay * 5
            return
        }
        if phase == .fetchingToken { scheduleReconnect(.tokenUnavailable(why), wasConnectedSince: nil) }
    }

    // MARK: the transport's side

    mutating func opened(generation g: Int) {
        guard g == generation, case .connecting(let since) = phase else { return }
        lastHeard = clock.now()
        if let token {
            let id = newID("auth")
            phase = .authenticating(since: since, id: id)
            send(.auth(token: token), id: id)
        } else {
            authenticated()
        }
    }

    mutating func received(generation g: Int, _ bytes: [UInt8]) {
        guard g == generation else { return }
        switch phase {
        case .authenticating, .connected: break
        default: return
        }
        lastHeard = clock.now()
        guard case .success(let m) = ServerCodec.decode(bytes) else { return }
        switch m {
        case .authenticated(_, _, let id):
            if case .authenticating(_, let authID) = phase, id == authID { authenticated() }
            if id != nil, id == refreshAuthID { refreshAuthID = nil }
        case .error(let e):
            if e.code == .unauthorized { lastRefusal = e.message }
            if let id = e.id { failed(id: id, e) } else { actions.append(.unanswered(e)) }
        case .state(let s, let id):
            if let id, let i = pending.firstIndex(where: { $0.id == id }) {
                pending.remove(at: i)
                actions.append(.reply(id: id, .success(m)))
            }
            show(s, replyTo: id)
        case .tick(let t):
            guard var f = feeds[t.ride], f.subscribeID == nil, let latest = f.latest, t.at >= latest.at else { return }
            let next = latest.applying(t)
            f.latest = next
            feeds[t.ride] = f
            actions.append(.event(ride: t.ride, .tick(t), latest: next))
        case .warning(let ride, let remaining):
            guard let f = feeds[ride], f.subscribeID == nil else { return }
            actions.append(.event(ride: ride, .warning(remaining: remaining), latest: f.latest))
        case .zone(let z):
            guard let f = feeds[z.ride], f.subscribeID == nil else { return }
            let rules = ZoneRules(rideStartAllowed: z.rideStartAllowed, rideEndAllowed: z.rideEndAllowed,
                                  rideThroughAllowed: z.rideThroughAllowed, maximumSpeedKph: z.maximumSpeedKph)
            actions.append(.event(ride: z.ride, .zone(name: z.zone, rules: rules), latest: f.latest))
        case .unsubscribed(_, let id), .quote(_, let id), .share(_, let id), .push(_, let id):
            if let id, let i = pending.firstIndex(where: { $0.id == id }) {
                pending.remove(at: i)
                actions.append(.reply(id: id, .success(m)))
            }
        }
    }

    mutating func closed(generation g: Int, code: UInt16, reason: String) {
        lost(generation: g, code: code, why: .closedByServer(code: code, reason: reason))
    }

    mutating func failed(generation g: Int, _ why: String) {
        lost(generation: g, code: nil, why: .cannotConnect(why))
    }

    // MARK: time

    /// When the driver should call `wake()` next, as the clock tells time.
    var nextWakeup: Int64? {
        var t: [Int64] = []
        switch phase {
        case .waiting(let until): t.append(until)
        case .connecting(let since), .authenticating(let since, _): t.append(since + timing.connectTimeout)
        case .connected:
            if !feeds.isEmpty { t.append(lastHeard + timing.watchdog) }
            if let r = refreshAt { t.append(r) }
            t += pending.compactMap(\.retryAt)
            t += pending.compactMap { p in p.sentAt.flatMap { lastHeard <= $0 ? $0 + timing.replyTimeout : nil } }
            t += feeds.values.compactMap(\.resubscribeAt)
        default: break
        }
        // Connected or not: a request's own timeout runs in every phase.
        t += pending.map(\.deadline)
        return t.min()
    }

    private var refreshAt: Int64? {
        guard let exp = tokenExp, fetching == nil, refreshAuthID == nil else { return nil }
        return max(exp * 1000 - timing.refreshBefore, refreshNotBefore)
    }

    mutating func wake() {
        let now = clock.now()
        expireRequests(now)
        switch phase {
        case .waiting(let until) where now >= until:
            beginConnect()
        case .connecting(let since) where now >= since + timing.connectTimeout,
             .authenticating(let since, _) where now >= since + timing.connectTimeout:
            abandonTransport(code: 1000)
            scheduleReconnect(.connectTimeout, wasConnectedSince: nil)
        case .connected(let since):
            if !feeds.isEmpty, now >= lastHeard + timing.watchdog {
                abandonTransport(code: 1000)
                return scheduleReconnect(.silent, wasConnectedSince: since)
            }
            if let r = refreshAt, now >= r {
                fetching = .refresh
                actions.append(.fetchToken)
            }
            if pending.contains(where: { $0.sentAt.map { now >= $0 + timing.replyTimeout && lastHeard <= $0 } ?? false }) {
                abandonTransport(code: 1000)
                return scheduleReconnect(.silent, wasConnectedSince: since)
            }
            for i in pending.indices {
                if let r = pending[i].retryAt, now >= r {
                    pending[i].retryAt = nil
                    sendPending(i)
                }
            }
            for ride in feedOrder {
                if let r = feeds[ride]?.resubscribeAt, now >= r {
                    feeds[ride]?.resubscribeAt = nil
                    sendSubscribe(ride)
                }
            }
        default:
            break
        }
    }

    // MARK: inside

    private var isClosed: Bool { if case .closed = phase { return true }; return false }
    private var closedError: RidePushError {
        if case .closed(let r) = phase { return .closed(r) }
        return .closed(.closedByClient)
    }

    private mutating func ensureStarted() {
        if phase == .idle { beginConnect() }
    }

    private mutating func beginConnect(askIfExpired: Bool = true) {
        if askIfExpired, let exp = tokenExp, exp * 1000 <= clock.now() { tokenCurrent = false }
        if !tokenCurrent {
            phase = .fetchingToken
            if fetching == nil {
                fetching = .connect
                actions.append(.fetchToken)
            }
            return
        }
        generation += 1
        phase = .connecting(since: clock.now())
        actions.append(.state(.connecting(attempt: attempt)))
        actions.append(.connect(generation: generation))
    }

    private mutating func authenticated() {
        let now = clock.now()
        phase = .connected(since: now)
        lastHeard = now
        refreshedAfterRefusal = false
        lastRefusal = nil
        actions.append(.state(.connected))
        for ride in feedOrder { sendSubscribe(ride) }
        // Everything still unanswered goes again with its own id: the server applies a
        // control message once and answers a repeat with the first reply.
        for i in pending.indices {
            pending[i].retryAt = nil
            if let ride = pending[i].ride { sendWaitingPosition(ride) }
            sendPending(i)
        }
        // After the starts: a position for a ride not yet started would be refused.
        for ride in positionOrder { sendWaitingPosition(ride) }
    }

    private mutating func sendWaitingPosition(_ ride: String) {
        guard let p = positions.removeValue(forKey: ride) else { return }
        positionOrder.removeAll { $0 == ride }
        sendPosition(p)
    }

    private mutating func sendPosition(_ p: PositionReport) {
        actions.append(.send(ClientCodec.encode(ClientEnvelope(id: nil, message: .position(p)))))
    }

    /// Requests past their deadline fail with `.timedOut` and are not sent again.
    private mutating func expireRequests(_ now: Int64) {
        guard pending.contains(where: { now >= $0.deadline }) else { return }
        for p in pending where now >= p.deadline {
            actions.append(.reply(id: p.id, .failure(.timedOut(after: .milliseconds(p.timeout)))))
        }
        pending.removeAll { now >= $0.deadline }
    }

    private mutating func sendPending(_ i: Int) {
        pending[i].sentAt = clock.now()
        actions.append(.send(pending[i].frame))
    }

    private mutating func sendSubscribe(_ ride: String) {
        let id = newID("s")
        feeds[ride]?.subscribeID = id
        feeds[ride]?.resubscribeAt = nil
        send(.subscribe(ride: ride), id: id)
    }

    private mutating func send(_ m: ClientMessage, id: String) {
        actions.append(.send(ClientCodec.encode(ClientEnvelope(id: id, m))))
    }

    /// A state message: the answer to a subscribe (the fresh snapshot), a reply, or a push.
    private mutating func show(_ s: RideSnapshot, replyTo id: String?) {
        guard var f = feeds[s.ride] else { return }
        if let sub = f.subscribeID {
            guard id == sub else { return }
            f.subscribeID = nil
        }
        // A replayed reply or a push that crossed a newer tick is older than what is shown.
        if let latest = f.latest, s.at < latest.at, s.state != .ended || latest.state == .ended {
            feeds[s.ride] = f
            return
        }
        f.latest = s
        if s.state == .ended {
            feeds.removeValue(forKey: s.ride)
            feedOrder.removeAll { $0 == s.ride }
            actions.append(.event(ride: s.ride, .ended(s), latest: s))
        } else {
            feeds[s.ride] = f
            actions.append(.event(ride: s.ride, .state(s), latest: s))
        }
    }

    private mutating func failed(id: String, _ e: ProtocolError) {
        let retryable = e.code == .unavailable || e.code == .rateLimited
        if let ride = feedOrder.first(where: { feeds[$0]?.subscribeID == id }) {
            if retryable {
                let at = clock.now() + timing.retryDelay
                feeds[ride]?.resubscribeAt = at
            } else {
                feeds.removeValue(forKey: ride)
                feedOrder.removeAll { $0 == ride }
                actions.append(.feedFailed(ride: ride, .server(e)))
            }
            return
        }
        guard let i = pending.firstIndex(where: { $0.id == id }) else { return }
        let delay = timing.retryDelay << Int64(pending[i].retries)
        // A retry that could not be answered before the request's deadline is not made: the
        // app gets the server's answer now rather than a timeout later.
        if retryable, pending[i].retries < timing.maxRetries, clock.now() + delay < pending[i].deadline {
            pending[i].retries += 1
            pending[i].sentAt = nil
            pending[i].retryAt = clock.now() + delay
            actions.append(.retrying(RequestRetry(error: e, attempt: pending[i].retries, attempts: timing.maxRetries,
                                                  delay: .milliseconds(delay))))
            return
        }
        pending.remove(at: i)
        actions.append(.reply(id: id, .failure(.server(e))))
    }

    private mutating func lost(generation g: Int, code: UInt16?, why: DisconnectReason) {
        guard g == generation else { return }
        var since: Int64?
        switch phase {
        case .connecting: break
        case .authenticating: break
        case .connected(let s): since = s
        default: return
        }
        generation += 1
        if code == CloseCode.unauthorized {
            let refusal = lastRefusal ?? "unauthorized"
            lastRefusal = nil
            let expired = refusal.contains("expired") || (tokenExp.map { $0 * 1000 <= clock.now() } ?? false)
            guard expired, !refreshedAfterRefusal else { return stop(.unauthorized(refusal)) }
            // Expired: ask the provider once, then reconnect at once (no backoff: the link is fine).
            refreshedAfterRefusal = true
            tokenCurrent = false
            return beginConnect()
        }
        // A draining node (a rolling restart): the load balancer already sends elsewhere, so
        // back at once, within the first backoff's jitter (not after a doubled one); feeds and
        // unanswered requests carry over as after any reconnect.
        if code == CloseCode.serviceRestart { attempt = 0 }
        scheduleReconnect(why, wasConnectedSince: since)
    }

    private mutating func abandonTransport(code: UInt16) {
        actions.append(.disconnect(code: code))
        generation += 1
    }

    private mutating func scheduleReconnect(_ why: DisconnectReason, wasConnectedSince since: Int64?) {
        let now = clock.now()
        if let since, now - since >= timing.stableAfter { attempt = 0 }
        let delay = backoff(attempt)
        attempt += 1
        phase = .waiting(until: now + delay)
        actions.append(.state(.waitingToReconnect(delay: .milliseconds(delay), reason: why)))
    }

    /// Full jitter: uniform in [0, min(cap, base·2ⁿ)].
    mutating func backoff(_ n: Int) -> Int64 {
        let ceiling = n >= 40 ? timing.backoffCap : min(timing.backoffCap, timing.backoffBase << Int64(n))
        return Int64(random.next() % UInt64(ceiling + 1))
    }

    private mutating func stop(_ reason: ClosedReason) {
        phase = .closed(reason)
        for p in pending { actions.append(.reply(id: p.id, .failure(.closed(reason)))) }
        pending.removeAll()
        positions.removeAll()
        positionOrder.removeAll()
        for ride in feedOrder { actions.append(.feedFailed(ride: ride, .closed(reason))) }
        feeds.removeAll()
        feedOrder.removeAll()
        actions.append(.state(.closed(reason)))
    }

    private mutating func newID(_ prefix: String) -> String {
        let n = ids.next()
        let hex = String(n, radix: 16)
        return prefix + "-" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
