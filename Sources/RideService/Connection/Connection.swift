import RideAuth
import RideCore
import RideProtocol

/// What a connection's protocol logic needs from the server, and nothing else: lookups in
/// memory, the token signer, the clocks. The server passes its RideServer; unit tests a fake.
package protocol ConnectionContext {
    var config: ServerConfig { get }
    /// Auth on: checks every token (HS256 and the identity provider's keys). nil: auth off.
    var verifier: TokenVerifier? { get }
    /// Signs share links; nil when only the identity provider's keys are configured.
    var signer: TokenSigner? { get }
    /// Unix ms (the ride clock).
    func now() -> UnixMillis
    /// Unix seconds on the wall clock as it reads now: what token times are judged on
    /// (WallClock.swift says why not the ride clock).
    func wallSeconds() -> Int64
    /// Monotonic ms (rate windows).
    func monotonic() -> Int64
    /// A ride in memory, without waiting for the store.
    func ride(_ id: String) -> LiveRide?
    /// The committed state of a ride in memory.
    func snapshot(_ live: LiveRide) -> Ride
    /// Its distance and last position, once it reported one (issue 28).
    func trace(_ live: LiveRide) -> (distance: Int64, position: RidePosition?)?
    func plan(_ id: String?) -> FarePlan?
    func count(_ type: String, _ result: String)
    /// A control message refused by the rate limit.
    func rateLimited()
}

extension ConnectionContext {
    func trace(_ live: LiveRide) -> (distance: Int64, position: RidePosition?)? { nil }
}

/// What the protocol logic asks the socket side to do, in order.
package enum ConnectionAction {
    /// Queue this frame (LWS_PRE room in front) for the peer.
    case send([UInt8])
    /// Hand this job to the store worker; its answer comes back through `Connection.answered`.
    case submit(StoreJob)
    /// Add the connection to the ride's subscribers on this thread.
    case subscribe(LiveRide)
    /// Remove it from this ride's subscribers.
    case unsubscribe(String)
    /// Close with this code once what is queued is written, within 5 s at most.
    case close(code: UInt16, reason: String)
    /// Stop or restart reading the socket (the store worker holds too many of its requests).
    case pauseReading, resumeReading
    /// Start (or resync) the operator feed with a snapshot / stop it, answering `id` (OpsFeed.swift).
    case watchAll(id: String?)
    case unwatchAll(id: String?)
    /// Stop the operator feed without a reply: the connection is being refused (4401).
    case endFeed
}

/// One connection's ride.v1 logic as a state machine, without sockets: a decoded message in,
/// actions out (frames, store jobs, subscription changes, a close). The lws side (Shard,
/// Dispatch.swift) only performs the actions, so this is unit-tested without a socket.
///
/// Ordering: while the store worker holds requests of this connection (`inFlight`), any answer
/// made here is routed through the worker too (a `.lookup` job handing it back), so the peer
/// gets its answers in the order it asked.
package struct Connection {
    var pre: Int { Int(pre32) }
    /// What the token allows (nil until authenticated, and always with auth off). Boxed: the
    /// claims inline would add about 80 bytes to every connection, most of which carry none
    /// or the same few.
    package var access: Access? { accessBox?.access }
    private var accessBox: AccessBox?
    /// The token's `exp` (Unix seconds; .max without one), checked by the once-a-second sweep.
    package private(set) var tokenExp: Int64 = .max
    /// Rides this connection is subscribed to, in the order it subscribed (kept compactly).
    private(set) var subscribed: [String] {
        get { rideIDs.array }
        set { rideIDs = RideIDs(newValue) }
    }
    private var rideIDs = RideIDs()
    /// Control-message rate limit: a one-second window, and strikes for messages over it.
    private var windowStart: Int64 = 0
    // The counts as Int32 (each far below it) with the flags after them: 57 bytes, where Ints
    // take 80, and with them the session's heap block is 192 bytes instead of 240.
    private let pre32: Int32
    private var inFlight32: Int32 = 0
    private var windowCount32: Int32 = 0
    private var strikes32: Int32 = 0
    /// The three flags in one byte: a Bool each would push the session into the next heap block.
    private var flags: UInt8 = 0
    private(set) var readingPaused: Bool {
        get { flags & 1 != 0 }
        set { flags = newValue ? flags | 1 : flags & ~1 }
    }
    private(set) var closing: Bool {
        get { flags & 2 != 0 }
        set { flags = newValue ? flags | 2 : flags & ~2 }
    }
    /// The operator feed runs for it (`watch_all` allowed and not undone): ended the moment
    /// the token no longer allows it (`authenticate`, `refuse`). Set by OpsRequests.swift.
    var watchingAll: Bool {
        get { flags & 4 != 0 }
        set { flags = newValue ? flags | 4 : flags & ~4 }
    }
    package private(set) var inFlight: Int {
        get { Int(inFlight32) }
        set { inFlight32 = Int32(newValue) }  // at most maxInFlight × 4 (Shard closes the connection there)
    }
    private var windowCount: Int {
        get { Int(windowCount32) }
        set { windowCount32 = Int32(clamping: newValue) }
    }
    private var strikes: Int {
        get { Int(strikes32) }
        set { strikes32 = Int32(clamping: newValue) }
    }

    /// Requests of one connection at the store worker before reading stops (TCP then pushes
    /// back on the client) until half of them are answered.
    package static let maxInFlight = 128

    init(pre: Int) { pre32 = Int32(pre) }

    package var authenticated: Bool { access != nil }

    // MARK: input

    /// A complete text message from the peer.
    package mutating func received(_ bytes: [UInt8], _ ctx: some ConnectionContext, from: Requester) -> [ConnectionAction] {
        guard !closing else { return [] }
        var out: [ConnectionAction] = []
        switch ClientCodec.decode(bytes) {
        case .success(let env): handle(env, ctx, from: from, inTurn: false, &out)
        case .failure(let e):
            // Not a rider's message: perhaps an operator's (OpsRequests.swift).
            if e.code == .unknownType, let req = OpsRequest.decode(bytes) {
                operatorRequest(req, ctx, from: from, inTurn: false, &out)
                return out
            }
            ctx.count("invalid", e.code.rawValue)
            answer(ServerMessages.error(e, prefix: pre), from: from, inTurn: false, &out)
        }
        return out
    }

    /// An error the socket side found (too large, binary), answered in turn.
    package mutating func failed(_ e: ProtocolError, from: Requester) -> [ConnectionAction] {
        var out: [ConnectionAction] = []
        answer(ServerMessages.error(e, prefix: pre), from: from, inTurn: false, &out)
        return out
    }

    /// A token that came with the upgrade (`?token=` or `Authorization`): checked, not answered.
    package mutating func upgradeToken(_ token: String, _ ctx: some ConnectionContext) -> [ConnectionAction] {
        var out: [ConnectionAction] = []
        authenticate(token, id: nil, reply: false, ctx, &out)
        return out
    }

    /// The store worker's answer to one of this connection's jobs.
    package mutating func answered() -> [ConnectionAction] {
        inFlight -= 1
        if readingPaused, inFlight <= Self.maxInFlight / 2 {
            readingPaused = false
            return [.resumeReading]
        }
        return []
    }

    /// A lookup the store worker handed back: everything asked before it has been answered.
    package mutating func resumed(_ then: Continuation, found: LiveRide?, failure: ProtocolError?, _ ctx: some ConnectionContext,
                          from: Requester) -> [ConnectionAction] {
        var out: [ConnectionAction] = []
        if !closing {
            switch then {
            case .bytes(let frame): out.append(.send(frame))
            case .http, .nothing: break
            case .ops(let req): operatorRequest(req, ctx, from: from, inTurn: true, &out)
            case .message(let env):
                // Deferred behind the worker: the token may have expired or changed since.
                if case .auth = env.message {} else if let e = authorization(ctx, id: env.id) {
                    refuse(e, ctx, &out)
                    break
                }
                if let ride = Self.rideOf(env.message), !(Self.isShare(env.message) && ctx.verifier == nil) {
                    complete(env, ride, found ?? ctx.ride(ride), failure, ctx, from: from, &out)
                } else {
                    handle(env, ctx, from: from, inTurn: true, &out)
                }
            }
        }
        out += answered()
        return out
    }

    /// The once-a-second sweep: a token that expired since it was checked ends the connection.
    package mutating func sweep(_ ctx: some ConnectionContext) -> [ConnectionAction] {
        guard !closing, tokenExpired(ctx.wallSeconds()) else { return [] }
        var out: [ConnectionAction] = []
        refuse(ProtocolError(.unauthorized, "token expired; reconnect with a new one"), ctx, &out)
        return out
    }

    /// Still not authenticated after the handshake timeout (auth on): closed, 4401.
    package mutating func authTimedOut(_ ctx: some ConnectionContext) -> [ConnectionAction] {
        guard !closing, ctx.verifier != nil, access == nil else { return [] }
        var out: [ConnectionAction] = []
        refuse(ProtocolError(.unauthorized, "not authenticated within \(ctx.config.handshakeTimeout) s of connecting"), ctx, &out)
        return out
    }

    /// The socket side closed the connection for its own reasons (slow consumer, flooding).
    mutating func closed(code: UInt16, reason: String) -> [ConnectionAction] {
        guard !closing else { return [] }
        closing = true
        return [.close(code: code, reason: reason)]
    }

    // MARK: messages

    private mutating func handle(_ env: ClientEnvelope, _ ctx: some ConnectionContext, from: Requester, inTurn: Bool,
                                 _ out: inout [ConnectionAction]) {
        // Reads and subscriptions wait behind this connection's requests at the worker, so
        // their answers (and a new subscription's first tick) follow the earlier replies.
        // Positions go to the worker anyway, in this connection's order: no detour.
        if !inTurn, !env.message.isControl, inFlight > 0, !Self.isPosition(env.message) {
            return submit(.lookup(Self.rideOf(env.message), from: from, then: .message(env)), &out)
        }
        if case .auth(let token) = env.message {
            return authenticate(token, id: env.id, reply: true, ctx, &out)
        }
        if let e = authorization(ctx, id: env.id) { return refuse(e, ctx, &out) }
        if env.message.isRateLimited, !withinRate(ctx) {
            ctx.rateLimited()
            answer(ServerMessages.error(ProtocolError(.rateLimited, "more than \(ctx.config.controlRate) control messages per second; slow down", id: env.id), prefix: pre), from: from, inTurn: inTurn, &out)
            strikes += 1
            if strikes > ctx.config.controlRate * 5 {
                closing = true
                out.append(.close(code: 1008, reason: "flooding"))
            }
            return
        }
        let scope = access?.rider ?? ""
        switch env.message {
        case .start(let ride, let plan, let limit):
            if let a = access, !a.mayStart() {
                return answer(ServerMessages.error(ProtocolError(.forbidden, "this token may only watch rides", id: env.id), prefix: pre), from: from, inTurn: inTurn, &out)
            }
            submit(.request(.start(ride: ride, plan: plan, limit: limit, owner: access?.rider), id: env.id, scope: scope,
                            access: access, from: from, geo: env.zoneFields), &out)
        case .control(let cmd, let ride, let metres):
            submit(.request(.command(cmd, ride: ride, metres: metres), id: env.id, scope: scope, access: access, from: from,
                            geo: env.zoneFields), &out)
        case .share(let ride) where ctx.verifier == nil:
            out.append(.send(ServerMessages.share(ride: ride, id: env.id, url: "/?ride=\(ride)", token: "", prefix: pre)))
        case .unsubscribe(let ride) where subscribed.contains(ride):
            complete(env, ride, nil, nil, ctx, from: from, &out)
        case .subscribe(let ride), .get(let ride), .share(let ride), .unsubscribe(let ride):
            // In memory: at once. Otherwise the store worker reads it, and this thread goes on.
            if let live = ctx.ride(ride) { return complete(env, ride, live, nil, ctx, from: from, &out) }
            submit(.lookup(ride, from: from, then: .message(env)), &out)
        case .quote(let planID, let seconds, let paused):
            guard let plan = ctx.plan(planID) else {
                return out.append(.send(ServerMessages.error(ProtocolError(.planNotFound, "no plan \"\(planID ?? "")\"", id: env.id), prefix: pre)))
            }
            let q = FareEngine.quote(plan, riding: seconds, paused: paused)
            out.append(.send(ServerMessages.quote(id: env.id, plan: plan, quote: q, seconds: seconds, paused: paused, prefix: pre)))
        case .auth:
            break
        case .position(let p):
            // Decided by the store worker (GeoDesk), which owns the trace; counted in flight
            // like any job, so a flood of positions pauses this socket's reading.
            submit(.position(p, id: env.id, access: access, from: from), &out)
        case .push(let r):
            // Issue 38 (PushRegistrations.swift): the token's scope here, the ride's owner and
            // the write at the store worker, answered in turn like a read.
            if let e = PushRegistrations.refusal(r, access: access, id: env.id) {
                return answer(ServerMessages.error(e, prefix: pre), from: from, inTurn: inTurn, &out)
            }
            submit(.read(from: from, http: nil, work: PushRegistrations.work(r, access: access, id: env.id, pre: pre)), &out)
        }
    }

    /// Answers a message about one ride, now that it is known whether the ride exists.
    private mutating func complete(_ env: ClientEnvelope, _ ride: String, _ live: LiveRide?, _ failure: ProtocolError?,
                                   _ ctx: some ConnectionContext, from: Requester, _ out: inout [ConnectionAction]) {
        func error(_ e: ProtocolError) -> ConnectionAction {
            var e = e
            e.id = env.id
            return .send(ServerMessages.error(e, prefix: pre))
        }
        if case .unsubscribe = env.message {
            if let i = subscribed.firstIndex(of: ride) {
                subscribed.remove(at: i)
                out.append(.unsubscribe(ride))
            } else if live == nil {
                return out.append(error(failure ?? ProtocolError(.rideNotFound, "no ride \"\(ride)\"")))
            }
            return out.append(.send(ServerMessages.unsubscribed(ride: ride, id: env.id, prefix: pre)))
        }
        guard let live else { return out.append(error(failure ?? ProtocolError(.rideNotFound, "no ride \"\(ride)\""))) }
        let state = ctx.snapshot(live)
        switch env.message {
        case .subscribe:
            if let a = access, !a.mayWatch(rideID: ride, rideOwner: state.owner) {
                return out.append(error(ProtocolError(.forbidden, "this token may not watch ride \"\(ride)\"")))
            }
            if !subscribed.contains(ride) {
                guard subscribed.count < ctx.config.maxSubscriptions else {
                    return out.append(error(ProtocolError(.tooManySubscriptions, "at most \(ctx.config.maxSubscriptions) subscriptions per connection")))
                }
                subscribed.append(ride)
                out.append(.subscribe(live))
            }
            ctx.count("subscribe", "ok")
            let t = ctx.trace(live)
            out.append(.send(ServerMessages.state(ride: state, plan: live.plan, at: ctx.now(), id: env.id, prefix: pre,
                                                  distance: t?.distance, position: t?.position)))
        case .get:
            if let a = access, !a.mayWatch(rideID: ride, rideOwner: state.owner) {
                return out.append(error(ProtocolError(.forbidden, "this token may not watch ride \"\(ride)\"")))
            }
            // Operators also get the journal, which the store worker reads (OpsRequests.swift).
            if access?.claims.ops == true {
                return submit(.read(from: from, http: nil, work: OpsReads.journalState(live, id: env.id, pre: pre)), &out)
            }
            let t = ctx.trace(live)
            out.append(.send(ServerMessages.state(ride: state, plan: live.plan, at: ctx.now(), id: env.id, prefix: pre,
                                                  distance: t?.distance, position: t?.position)))
        case .share:
            // A watch-only link for one ride, for its owner (or ops), valid for two hours.
            guard let a = access, a.mayControl(rideOwner: state.owner) else {
                return out.append(error(ProtocolError(.forbidden, "only the ride's rider may share it")))
            }
            // Share links are RidePush's own HS256 tokens; with only an identity provider's
            // public keys there is nothing to sign them with.
            guard let signer = ctx.signer else {
                return out.append(error(ProtocolError(.forbidden, "sharing needs an HS256 secret (--jwt-secret-file); this server only verifies the identity provider's tokens")))
            }
            let token = signer.sign(TokenClaims.share(ride: ride, now: ctx.wallSeconds(), ttl: 2 * 3600))
            out.append(.send(ServerMessages.share(ride: ride, id: env.id, url: "/?ride=\(ride)&token=\(token)", token: token, prefix: pre)))
        default:
            break
        }
    }

    private mutating func authenticate(_ token: String, id: String?, reply: Bool, _ ctx: some ConnectionContext,
                                       _ out: inout [ConnectionAction]) {
        guard let verifier = ctx.verifier else {
            if reply { out.append(.send(authenticatedMessage(id: id, sub: nil, scope: nil))) }
            return
        }
        let claims: TokenClaims
        do { claims = try verifier.verify(token, now: ctx.wallSeconds()) } catch {
            return refuse(ProtocolError(.unauthorized, "token refused: \(error.message)", id: id), ctx, &out)
        }
        let a = Access(claims)
        accessBox = AccessBox(a)
        tokenExp = claims.exp ?? .max
        // The new token decides what this connection may watch from now on: a subscription
        // the old one allowed (a share link's ride) ends unless this one allows it too.
        var kept: [String] = []
        for ride in subscribed {
            let owner = ctx.ride(ride).map { ctx.snapshot($0).owner } ?? nil
            if a.mayWatch(rideID: ride, rideOwner: owner) {
                kept.append(ride)
            } else {
                out.append(.unsubscribe(ride))
                out.append(.send(ServerMessages.unsubscribed(ride: ride, id: nil, prefix: pre)))
            }
        }
        subscribed = kept
        // The operator feed too: it runs only for an ops token.
        if watchingAll, !a.claims.ops {
            watchingAll = false
            out.append(.unwatchAll(id: nil))
        }
        if reply { out.append(.send(authenticatedMessage(id: id, sub: claims.sub, scope: claims.scope.rawValue))) }
    }

    /// Unauthorized: say why, then close with 4401 (the client should get a new token, not
    /// retry). Its subscriptions end at once: no tick follows the error.
    mutating func refuse(_ e: ProtocolError, _ ctx: some ConnectionContext, _ out: inout [ConnectionAction]) {
        ctx.count("auth", "unauthorized")
        for ride in subscribed { out.append(.unsubscribe(ride)) }
        subscribed = []
        if watchingAll {
            watchingAll = false
            out.append(.endFeed)
        }
        out.append(.send(ServerMessages.error(e, prefix: pre)))
        closing = true
        out.append(.close(code: 4401, reason: "unauthorized"))
    }

    /// The one authorization decision every path that acts for the connection asks (messages,
    /// deferred messages, operator requests; the sweep and the feed ask `tokenExpired`): nil
    /// while its token holds, else why not. Auth off: always nil.
    func authorization(_ ctx: some ConnectionContext, id: String?) -> ProtocolError? {
        guard ctx.verifier != nil else { return nil }
        if access == nil {
            return ProtocolError(.unauthorized, "authenticate first: a token in ?token=, an Authorization header or an auth message", id: id)
        }
        // A token is checked when it arrives; one that has expired since may not act any more.
        if tokenExpired(ctx.wallSeconds()) { return ProtocolError(.unauthorized, "token expired; reconnect with a new one", id: id) }
        return nil
    }

    /// Whether the token's `exp` is past (with the leeway) at wall-clock second `wall`.
    func tokenExpired(_ wall: Int64) -> Bool { tokenExp <= wall - TokenSigner.leeway }

    /// Whether the operator feed may run for it now: auth off, or an unexpired ops token.
    func mayWatchAll(_ wall: Int64, authOn: Bool) -> Bool {
        !authOn || (access?.claims.ops == true && !tokenExpired(wall))
    }

    /// Sends a reply made here, behind any the store worker still owes this connection.
    mutating func answer(_ frame: [UInt8], from: Requester, inTurn: Bool, _ out: inout [ConnectionAction]) {
        if inTurn || inFlight == 0 { return out.append(.send(frame)) }
        submit(.lookup(nil, from: from, then: .bytes(frame)), &out)
    }

    mutating func submit(_ job: StoreJob, _ out: inout [ConnectionAction]) {
        inFlight += 1
        out.append(.submit(job))
        if inFlight >= Self.maxInFlight, !readingPaused {
            readingPaused = true
            out.append(.pauseReading)
        }
    }

    /// One-second windows of control messages per connection. Messages over the limit are
    /// strikes; strikes are forgiven only after a window that stayed within the limit, so a
    /// client that keeps sending even a little too fast is closed (1008) after `rate × 5` of them.
    mutating func withinRate(_ ctx: some ConnectionContext) -> Bool {
        let now = ctx.monotonic()
        if now - windowStart >= 1000 {
            if windowCount <= ctx.config.controlRate || now - windowStart >= 2000 { strikes = 0 }
            windowStart = now
            windowCount = 0
        }
        windowCount += 1
        return windowCount <= ctx.config.controlRate
    }

    private func authenticatedMessage(id: String?, sub: String?, scope: String?) -> [UInt8] {
        ServerMessages.authenticated(id: id, sub: sub, scope: scope, prefix: pre)
    }

    static func rideOf(_ m: ClientMessage) -> String? {
        switch m {
        case .subscribe(let r), .get(let r), .share(let r), .unsubscribe(let r): return r
        default: return nil
        }
    }

    static func isPosition(_ m: ClientMessage) -> Bool {
        if case .position = m { return true }
        return false
    }

    static func isShare(_ m: ClientMessage) -> Bool {
        if case .share = m { return true }
        return false
    }
}

package final class AccessBox: Sendable {
    let access: Access
    init(_ access: Access) { self.access = access }
}
