import Foundation
import RideCore
import RideDevicePush
import RideHTTPClient
import RideProtocol
import RideService
import RideStore
import RideWebhooks

/// The I/O around PushSchedule and IntentLedger (docs/push.md): one loop thread reads the push
/// intents the transitions committed, the ride's targets (and, at a start, the rider's
/// push-to-start tokens), feeds the schedule, sends what it says through the outbound HTTP
/// client (APNs on one HTTP/2 connection, FCM), and records an intent delivered once every
/// target's push for it was answered. Until then the row stays pending in the store: a crash
/// or a `kill -9` while APNs answers 503 loses nothing, the row is read again at the restart.
/// Nothing here runs on a service thread, the tick or the store worker.
public final class PushSender: DevicePushOutlet {
    public struct APNs: Sendable {
        public var credentials: APNsCredentials
        /// The app's bundle id (`--apns-topic`); the header is `BUNDLE_ID.push-type.liveactivity`.
        public var topic: String
        /// `--apns-url`: Apple's production or sandbox host, or a stand-in.
        public var url: String
        public init(credentials: APNsCredentials, topic: String, url: String) {
            self.credentials = credentials
            self.topic = topic
            self.url = url
        }
    }

    public struct FCM: Sendable {
        public var account: FCMServiceAccount
        /// `--fcm-url`.
        public var url: String
        public init(account: FCMServiceAccount, url: String) {
            self.account = account
            self.url = url
        }
    }

    public struct Settings: Sendable {
        public var apns: APNs?
        public var fcm: FCM?
        public var client: HTTPClient
        public var schedule = PushSchedule.Settings()
        /// How often the outbox is read when no commit pokes the loop (other nodes' intents).
        public var pollInterval: Int64 = 1_000
        /// Intents read at a time.
        public var batch = 512
        /// One request's deadline (APNs, FCM, the token endpoint).
        public var timeout: Int64 = 10_000
        /// How long APNs and FCM keep a push for a device that is off (`apns-expiration`, `ttl`).
        public var keepFor: Int64 = 3_600
        public init(client: HTTPClient) { self.client = client }
    }

    /// One push as it went, for the log and tests.
    public struct Attempt: Sendable {
        public let target: PushTarget
        public let push: DevicePush
        public let status: Int?
        public let verdict: PushVerdict
    }

    private let settings: Settings
    private let outbox: PushIntentOutbox
    private let clock: RideClock
    private let onAttempt: @Sendable (Attempt) -> Void
    private let providerTokens: ProviderTokenCache?
    private let accessTokens: FCMAccessTokenCache
    /// Sleeps and wakes the loop only; what it guards is `inbox`. Producers append under both
    /// (wake, then inbox) and broadcast, and the loop checks for work under both before it
    /// waits, so no hand-off is missed between the check and the wait.
    private let wake = NSCondition()
    /// What service threads and the HTTP client's thread hand the loop, under a lock of its
    /// own held only to append or to take everything: none of them waits while the loop works
    /// on the schedule under `state` (at 10,000 activities a pass is not instant).
    private let inbox = Locked(Inbox())
    private let state: Locked<LoopState>
    /// What `/metrics` shows, copied here by the loop after each pass.
    private let counts = Locked(Counts())
    private let thread = Locked<Thread?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    /// Handed to the loop, only inside `inbox.withLock`; the loop takes it all at once.
    private struct Inbox {
        var registrations: [(PushTarget, RideActivityContent)] = []
        var warnings: [(RideActivityContent, DevicePush.Alert)] = []
        var zones: [RideActivityContent] = []
        var results: [(PushTarget, PushVerdict, credential: String?, label: String)] = []
        var stopping = false
        var poked = false

        var hasWork: Bool {
            poked || stopping || !results.isEmpty || !registrations.isEmpty || !warnings.isEmpty || !zones.isEmpty
        }
    }

    private struct Counts {
        var sent: [String: [String: Int]] = [:]
        var stats = (pending: 0, targets: 0)
    }

    /// The loop's own state, only inside `state.withLock` (the loop, and `attach` once).
    private struct LoopState {
        var schedule: PushSchedule
        var ledger = IntentLedger()
        /// Targets the schedule holds, with their stored rows (a push-to-start token's rider).
        var known: [PushTarget: StoredPushTarget] = [:]
        /// Intents read but whose targets could not be read yet (the store failed): tried again.
        var unloaded: [OutboxRow] = []
        /// Fare steps read from the registry, to hand to the schedule.
        var steps: [RideActivityContent] = []
        var contentOf: (@Sendable (String) -> RideActivityContent?)?
        var sent: [String: [String: Int]] = [:]
        var stats = (pending: 0, targets: 0)
        var lastRead: UnixMillis?
    }

    public init(settings: Settings, outbox: PushIntentOutbox, clock: RideClock = SystemClock(),
                onAttempt: @escaping @Sendable (Attempt) -> Void = { _ in }) {
        self.settings = settings
        self.outbox = outbox
        self.clock = clock
        self.onAttempt = onAttempt
        providerTokens = settings.apns.map { ProviderTokenCache($0.credentials, clock: clock) }
        accessTokens = FCMAccessTokenCache(clock: clock)
        state = Locked(LoopState(schedule: PushSchedule(clock: clock, settings: settings.schedule)))
    }

    public func start() {
        let loop = Thread { [self] in run() }
        loop.name = "push-sender"
        thread.withLock { $0 = loop }
        loop.start()
    }

    /// Stops the loop and waits for it. Pushes in flight end by their deadline; their rows stay
    /// pending and are sent again after a restart (at least once).
    public func stop() {
        guard thread.withLock({ $0 }) != nil else { return }
        hand { $0.stopping = true }
        finished.wait()
        thread.withLock { $0 = nil }
    }

    public func poke() { hand { $0.poked = true } }

    public func registered(_ target: PushTarget, _ content: RideActivityContent) {
        guard target.kind != .pushToStart else { return }
        hand { $0.registrations.append((target, content)) }
    }

    public func attach(contentOf: @escaping @Sendable (String) -> RideActivityContent?) {
        state.withLock { $0.contentOf = contentOf }
    }

    public func zoneChanged(_ content: RideActivityContent) { hand { $0.zones.append(content) } }

    public func limitWarning(_ content: RideActivityContent, alert: DevicePush.Alert) {
        hand { $0.warnings.append((content, alert)) }
    }

    /// Gives the loop something (from any thread; returns at once) and wakes it.
    private func hand(_ change: (inout Inbox) -> Void) {
        wake.lock()
        inbox.withLock { change(&$0) }
        wake.broadcast()
        wake.unlock()
    }

    /// Every result label, so each series exists (at 0) before its first push.
    public static let resultLabels = ["delivered", "dropped", "retried", "renewed", "failed"]

    public func prometheusText() -> String {
        let (counts, s) = self.counts.withLock { ($0.sent, $0.stats) }
        var out = "# HELP ridepush_push_sent_total Pushes to APNs and FCM answered since start, by platform and result.\n"
        out += "# TYPE ridepush_push_sent_total counter\n"
        for platform in ["apns", "fcm"] {
            for r in Self.resultLabels { out += "ridepush_push_sent_total{platform=\"\(platform)\",result=\"\(r)\"} \(counts[platform]?[r] ?? 0)\n" }
        }
        out += "# HELP ridepush_push_pending Push intents in the outbox not yet answered for every target.\n"
        out += "# TYPE ridepush_push_pending gauge\nridepush_push_pending \(s.pending)\n"
        out += "# HELP ridepush_push_targets Push targets stored (activities, notifications, push-to-start tokens).\n"
        out += "# TYPE ridepush_push_targets gauge\nridepush_push_targets \(s.targets)\n"
        return out
    }

    // MARK: - The loop

    /// An intent read with what it needs: the ride's targets, and push-to-start tokens at a start.
    private struct Loaded {
        let seq: Int64
        let intent: PushIntent
        let targets: [StoredPushTarget]
        let starts: [StoredPushTarget]
    }

    /// What one pass found to do outside the lock.
    private struct Work {
        var done: [Int64] = []
        var gone: [StoredPushTarget] = []
        var sends: [(PushTarget, DevicePush)] = []
        var refresh: [String] = []
        var contentOf: (@Sendable (String) -> RideActivityContent?)?
        var isEmpty: Bool { done.isEmpty && gone.isEmpty && sends.isEmpty && refresh.isEmpty }
    }

    private func run() {
        defer { finished.signal() }
        while true {
            let now = clock.now()
            let got = inbox.withLock { box -> Inbox in
                defer { box = Inbox(stopping: box.stopping) }
                return box
            }
            if got.stopping { return }
            // Read the outbox when poked (a commit), and at least every poll interval (other nodes).
            let (read, retry) = state.withLock { st -> (Bool, [OutboxRow]) in
                guard got.poked || st.lastRead.map({ now - $0 >= settings.pollInterval }) ?? true else { return (false, []) }
                st.lastRead = now
                defer { st.unloaded = [] }
                return (true, st.unloaded)
            }
            if read {
                let (loaded, failed, skipped, lost) = self.read(retry)
                let latest = outbox.pushStats()
                let done = state.withLock { st -> [Int64] in
                    st.unloaded += failed
                    st.stats = latest
                    st.ledger.drop(lost)
                    return loaded.reduce(skipped) { $0 + Self.open($1, &st, settings: settings) }
                }
                for seq in done { outbox.delivered(seq: seq) }
            }
            let (work, latest) = state.withLock { st in
                (Self.pass(&st, got, providerTokens: providerTokens, accessTokens: accessTokens, now: now), Counts(sent: st.sent, stats: st.stats))
            }
            counts.withLock { $0 = latest }
            if !work.isEmpty {
                for seq in work.done { outbox.delivered(seq: seq) }
                // An ended activity's or a dead token's row goes; an ended ride's push-to-start
                // token is the rider's and stays unless the service said it is gone.
                for g in work.gone { outbox.deletePushTarget(ride: g.ride, rider: g.rider, token: g.token) }
                for (t, p) in work.sends { send(p, to: t) }
                // The fare changed: the ride as the registry has it now (memory, its lock).
                let fresh = work.refresh.compactMap { work.contentOf?($0) }
                if !fresh.isEmpty { state.withLock { $0.steps += fresh } }
                continue
            }
            wake.lock()
            let until = inbox.withLock({ $0.hasWork }) ? nil : state.withLock { st -> UnixMillis? in
                guard st.steps.isEmpty else { return nil }
                let nextRead = (st.lastRead ?? now) + settings.pollInterval
                return min(st.schedule.nextWake() ?? nextRead, nextRead)
            }
            if let until { _ = wake.wait(until: Date(timeIntervalSinceNow: Double(max(1, until - clock.now())) / 1000)) }
            wake.unlock()
        }
    }

    /// One pass over what was handed in and answered, under the lock: the schedule told, the
    /// ledger settled, and what to do outside the lock.
    private static func pass(_ st: inout LoopState, _ got: Inbox, providerTokens: ProviderTokenCache?, accessTokens: FCMAccessTokenCache,
                             now: UnixMillis) -> Work {
        var w = Work()
        for (t, content) in got.registrations {
            if st.known[t] == nil {
                st.known[t] = StoredPushTarget(platform: t.platform.rawValue, kind: t.kind.rawValue, ride: t.ride, rider: "",
                                               token: t.token, at: now)
            }
            st.schedule.register(t, content)
        }
        // To the targets known here: after a restart, those read with the ride's next intent.
        for (content, alert) in got.warnings { st.schedule.changed(content, reason: .limitWarning(alert)) }
        for content in got.zones { st.schedule.changed(content, reason: .zone) }
        // Only while riding: a pause or an end since the step came with its own intent.
        for content in st.steps where content.state == .riding { st.schedule.changed(content, reason: .fareStep) }
        st.steps.removeAll()
        for (t, verdict, credential, label) in got.results {
            if verdict == .renewCredentials, let credential {
                if t.platform == .apns { _ = providerTokens?.renew(replacing: credential) } else { accessTokens.invalidate(credential) }
            }
            st.sent[t.platform.rawValue, default: [:]][label, default: 0] += 1
            w.done += st.ledger.answered(t, verdict)
            for case .forget(let f, _) in st.schedule.answered(t, verdict) {
                w.done += st.ledger.forgot(f)
                if let stored = st.known.removeValue(forKey: f) { w.gone.append(stored) }
            }
        }
        for action in st.schedule.poll() {
            switch action {
            case .send(let t, let p):
                st.ledger.sent(t)
                w.sends.append((t, p))
            case .refresh(let ride):
                w.refresh.append(ride)
            case .forget:
                break
            }
        }
        w.contentOf = st.contentOf
        return w
    }

    /// Reads new intents and their targets (with `wake` not held). Returns those loaded, those
    /// whose targets could not be read (kept for the next read), those to drop unread (a body
    /// this build cannot read: logged, recorded done) and the rows lost to another node.
    private func read(_ retry: [OutboxRow]) -> ([Loaded], [OutboxRow], [Int64], Set<Int64>) {
        let rows = retry + outbox.newIntents(limit: settings.batch)
        let lost = outbox.takeLost()
        var loaded: [Loaded] = [], failed: [OutboxRow] = [], done: [Int64] = []
        for row in rows where !lost.contains(row.seq) {
            let intent: PushIntent
            do { intent = try PushIntent(body: row.body) } catch {
                Log.warn("push intent \(row.seq) of ride \(row.rideID): \(error); skipped")
                done.append(row.seq)
                continue
            }
            guard let targets = outbox.pushTargets(ride: row.rideID) else {
                failed.append(row)
                continue
            }
            var starts: [StoredPushTarget] = []
            let hasActivity = targets.contains { $0.kind != PushKind.pushToStart.rawValue }
            if intent.isStart, !hasActivity, settings.apns != nil {
                guard let tokens = outbox.pushToStartTokens(rider: intent.rider) else {
                    failed.append(row)
                    continue
                }
                starts = tokens.filter { $0.platform == PushPlatform.apns.rawValue }
            }
            loaded.append(Loaded(seq: row.seq, intent: intent, targets: targets, starts: starts))
        }
        if !failed.isEmpty, let e = outbox.lastError { Log.warn("push sender: cannot read push targets (retrying): \(e)") }
        return (loaded, failed, done, lost)
    }

    /// Hands one intent to the schedule (under the lock); returns it when it owes nothing.
    private static func open(_ l: Loaded, _ st: inout LoopState, settings: Settings) -> [Int64] {
        var owed: [PushTarget] = []
        for s in l.targets {
            // A target registered after the transition got the ride as it was at its
            // registration (`registered`), which is newer: this intent owes it nothing.
            guard let t = target(s), usable(t, settings), s.at <= l.intent.created else { continue }
            if st.known[t] == nil {
                st.known[t] = s
                st.schedule.register(t, l.intent.content)
            }
            owed.append(t)
        }
        st.schedule.changed(l.intent.content, reason: .transition)
        for s in l.starts {
            guard let t = target(s) else { continue }
            st.known[t] = s
            st.schedule.start(t, l.intent.content, attributes: DevicePush.StartAttributes(ride: l.intent.content.ride, planName: l.intent.planName),
                              alert: l.intent.alert ?? DevicePush.Alert(title: l.intent.planName, body: ""))
            owed.append(t)
        }
        // Owed only where something is now waiting or in flight: content older than what a
        // target was already sent (its registration's update) queues nothing.
        return st.ledger.opened(l.seq, targets: owed.filter { st.schedule.owes($0) })
    }

    private static func target(_ s: StoredPushTarget) -> PushTarget? {
        guard let platform = PushPlatform(rawValue: s.platform), let kind = PushKind(rawValue: s.kind) else { return nil }
        return PushTarget(platform: platform, kind: kind, ride: s.ride, token: s.token)
    }

    /// A target this node can send to: its platform is configured, and it is a ride's.
    private static func usable(_ t: PushTarget, _ settings: Settings) -> Bool {
        guard t.kind != .pushToStart else { return false }
        return t.platform == .apns ? settings.apns != nil : settings.fcm != nil
    }

    // MARK: - Sending (with `wake` not held)

    private func send(_ p: DevicePush, to t: PushTarget) {
        switch t.platform {
        case .apns: sendAPNs(p, to: t)
        case .fcm: sendFCM(p, to: t)
        }
    }

    private func sendAPNs(_ p: DevicePush, to t: PushTarget) {
        guard let apns = settings.apns, let bearer = providerTokens?.token() else {
            return answered(t, p, status: nil, .failed(reason: "APNs is not configured or the provider token cannot be signed"), credential: nil)
        }
        let request: APNsRequest
        do { request = try APNsRequest(p, token: t.token, bundleID: apns.topic, expiration: clock.now() / 1000 + settings.keepFor) } catch {
            return answered(t, p, status: nil, .failed(reason: "payload too large"), credential: nil)
        }
        let http = HTTPRequest(method: "POST", url: apns.url + request.path,
                               headers: request.headers.map { ($0.name, $0.value) } + [("authorization", "bearer " + bearer)],
                               body: request.body, timeout: settings.timeout, bodyLimit: 4096)
        settings.client.submit(http) { [self] outcome in
            switch outcome {
            case .success(let r): answered(t, p, status: r.status, APNsAnswer.verdict(status: r.status, body: r.body), credential: bearer)
            case .failure: answered(t, p, status: nil, APNsAnswer.verdict(status: nil, body: []), credential: bearer)
            }
        }
    }

    private func sendFCM(_ p: DevicePush, to t: PushTarget) {
        guard let fcm = settings.fcm else {
            return answered(t, p, status: nil, .failed(reason: "FCM is not configured"), credential: nil)
        }
        guard let bearer = accessTokens.token() ?? fetchAccessToken(fcm) else {
            return answered(t, p, status: nil, .retry(retryAfter: nil), credential: nil)
        }
        let http = HTTPRequest(method: "POST", url: fcm.url + FCMMessage.path(project: fcm.account.projectID),
                               headers: [("authorization", "Bearer " + bearer), ("content-type", "application/json")],
                               body: FCMMessage.body(p, token: t.token, ttl: settings.keepFor), timeout: settings.timeout, bodyLimit: 4096)
        settings.client.submit(http) { [self] outcome in
            switch outcome {
            case .success(let r):
                answered(t, p, status: r.status, FCMAnswer.verdict(status: r.status, body: r.body, retryAfter: r.header("retry-after")),
                         credential: bearer)
            case .failure: answered(t, p, status: nil, .retry(retryAfter: nil), credential: bearer)
            }
        }
    }

    /// An OAuth2 access token for FCM from the service account's `token_uri` (RFC 7523 JWT
    /// bearer), on this thread: one request, bounded by the timeout, then cached until it expires.
    private func fetchAccessToken(_ fcm: FCM) -> String? {
        guard let assertion = fcm.account.assertion(issuedAt: clock.now() / 1000) else { return nil }
        let request = HTTPRequest(method: "POST", url: fcm.account.tokenURI,
                                  headers: [("content-type", "application/x-www-form-urlencoded")],
                                  body: FCMServiceAccount.tokenRequestBody(assertion: assertion), timeout: settings.timeout, bodyLimit: 16_384)
        switch settings.client.send(request) {
        case .success(let r) where r.status == 200:
            return try? accessTokens.store(response: r.body)
        case .success(let r):
            Log.warn("FCM: the token endpoint \(fcm.account.tokenURI) answered \(r.status); retrying")
        case .failure(let e):
            Log.warn("FCM: the token endpoint \(fcm.account.tokenURI): \(e.message); retrying")
        }
        return nil
    }

    /// On the client's thread (or this one): only hand the answer over.
    private func answered(_ t: PushTarget, _ p: DevicePush, status: Int?, _ verdict: PushVerdict, credential: String?) {
        onAttempt(Attempt(target: t, push: p, status: status, verdict: verdict))
        let label: String = switch verdict {
        case .delivered: "delivered"
        case .dropTarget: "dropped"
        case .renewCredentials: "renewed"
        case .retry: "retried"
        case .failed: "failed"
        }
        hand { $0.results.append((t, verdict, credential, label)) }
    }
}
