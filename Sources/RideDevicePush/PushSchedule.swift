import RideCore
import RideProtocol

/// What is pushed to which device, and when: a state machine with no I/O and no timers of its
/// own. The server tells it what happened (a registration, a committed transition, a limit
/// warning, a zone change, a fare step) and what each push's answer was; `poll` says what to
/// send now, `nextWake` when to poll again. Never once a second: the device counts the seconds.
///
/// Per target it holds at most one push waiting and one in flight. Newer content replaces
/// older content still waiting (keeping the higher priority and any alert), so a backlog
/// never builds up behind a slow or failing service; an `end` replaces anything and is never
/// replaced, and nothing but it is sent once the ride has ended.
public struct PushSchedule {
    public struct Settings: Sendable, Equatable {
        /// How long an ended activity stays on the lock screen (`--live-activity-dismiss-after`).
        public var dismissAfter: Int64 = 15 * 60_000
        /// Priority-5 pushes (fare steps) of one activity are at least this far apart.
        public var opportunisticGap: Int64 = 60_000
        /// `stale-date` is this long after the next expected change: a push a little late
        /// is not shown as stale.
        public var staleMargin: Int64 = 5_000
        /// 1 s, doubling, at most a minute between a target's tries.
        public var backoff = PushBackoff(first: 1_000, cap: 60_000)
        public init() {}
    }

    public enum Reason: Sendable, Equatable {
        /// The device registered this target: the ride as it is now.
        case registered
        /// A committed start, pause, resume or end.
        case transition
        /// 5 minutes or 1 minute left before the limit, with the alert to show.
        case limitWarning(DevicePush.Alert)
        case zone
        /// The fare changed while riding (asked for by a `.refresh` action).
        case fareStep
    }

    public enum Action: Sendable, Equatable {
        case send(PushTarget, DevicePush)
        /// The fare of `ride` has just changed: build its content and call `changed(_:reason: .fareStep)`.
        case refresh(ride: String)
        /// Stop keeping this target: its activity ended (the `end` was delivered or given up)
        /// or the service said the token is gone.
        case forget(PushTarget, reason: String)
    }

    private struct Slot {
        var waiting: DevicePush?
        var inFlight: DevicePush?
        var notBefore: UnixMillis = .min
        var attempts = 0
        var renewals = 0
        var lastOpportunistic: UnixMillis?
        /// An `end` has been queued: nothing else goes to this target.
        var ended = false
        /// The `at` of the newest content queued: older content is not queued after it (the
        /// device drops an update older than the one it shows; a transition's intent read after
        /// a registration's update is one).
        var newest: UnixMillis = .min
    }

    public let settings: Settings
    private let clock: any RideClock
    private var slots: [PushTarget: Slot] = [:]
    /// Ride → its targets, so a ride's change touches only them.
    private var byRide: [String: Set<PushTarget>] = [:]
    /// Targets with a push waiting and none in flight, by when it may go.
    private var ready = DueQueue<PushTarget>()
    /// Ride → when its fare next changes (riding rides with a target only).
    private var fareWakes = DueQueue<String>()

    /// Work done since start, for tests: targets a poll looked at, and targets a change
    /// queued for or skipped (each is O(log n); none scans all targets).
    public private(set) var counters = Counters()
    public struct Counters: Sendable, Equatable {
        public var polled = 0
        public var changedTouched = 0
    }

    public init(clock: any RideClock, settings: Settings = Settings()) {
        self.clock = clock
        self.settings = settings
    }

    /// The targets kept, for metrics and tests.
    public var targets: [PushTarget] { slots.keys.sorted(by: Self.order) }

    // MARK: - What happened

    /// A liveactivity or notification target registered for `content`'s ride: it gets the
    /// ride as it is now.
    public mutating func register(_ target: PushTarget, _ content: RideActivityContent) {
        add(target)
        enqueue(target, push(content, reason: .registered))
        noteFare(content)
    }

    public mutating func unregister(_ target: PushTarget) {
        drop(target)
        if let ride = target.ride, byRide[ride] == nil { fareWakes.remove(ride) }
    }

    /// The ride changed (or its fare did, or a warning is due): one push to each of its targets.
    public mutating func changed(_ content: RideActivityContent, reason: Reason) {
        let push = push(content, reason: reason)
        for t in byRide[content.ride] ?? [] where t.kind != .pushToStart {
            counters.changedTouched += 1
            enqueue(t, push)
        }
        noteFare(content)
    }

    /// A ride started for a rider with a push-to-start token and no activity for it: the
    /// activity is created on the device with these attributes.
    public mutating func start(_ target: PushTarget, _ content: RideActivityContent, attributes: DevicePush.StartAttributes,
                               alert: DevicePush.Alert) {
        add(target)
        var p = push(content, reason: .transition)
        p.event = .start
        p.attributes = attributes
        p.alert = alert
        enqueue(target, p)
    }

    // MARK: - Sending

    /// What to do now: every push whose time has come (one per target at a time), and every
    /// ride whose fare has just changed.
    public mutating func poll() -> [Action] {
        let now = clock.now()
        var out: [Action] = []
        for ride in fareWakes.popDue(now).sorted() { out.append(.refresh(ride: ride)) }
        for t in ready.popDue(now).sorted(by: Self.order) {
            counters.polled += 1
            guard var s = slots[t], let p = s.waiting, s.inFlight == nil else { continue }
            s.waiting = nil
            s.inFlight = p
            if p.priority == .opportunistic { s.lastOpportunistic = now }
            store(t, s)
            out.append(.send(t, p))
        }
        return out
    }

    /// Whether a push to `target` is waiting or in flight: what a change just queued for it
    /// is still owed (false: nothing was queued, or it merged into nothing that will be sent).
    public func owes(_ target: PushTarget) -> Bool {
        guard let s = slots[target] else { return false }
        return s.waiting != nil || s.inFlight != nil
    }

    /// When `poll` next has something to do, if anything is waiting.
    public func nextWake() -> UnixMillis? {
        switch (fareWakes.earliest, ready.earliest) {
        case let (a?, b?): min(a, b)
        case let (a, b): a ?? b
        }
    }

    /// The answer to the push in flight to `target`.
    public mutating func answered(_ target: PushTarget, _ verdict: PushVerdict) -> [Action] {
        guard var s = slots[target], let sent = s.inFlight else { return [] }
        let now = clock.now()
        s.inFlight = nil
        switch verdict {
        case .delivered:
            s.attempts = 0
            s.renewals = 0
            if sent.event == .end {
                drop(target)
                return [.forget(target, reason: "ended")]
            }
        case .dropTarget(let reason):
            drop(target)
            return [.forget(target, reason: reason)]
        case .renewCredentials:
            // Renewed credentials deserve one immediate try; after that it is not staleness.
            s.renewals += 1
            if s.renewals > 1 {
                s.attempts += 1
                s.notBefore = now + settings.backoff.delay(afterAttempt: s.attempts)
            }
            s.waiting = merge(older: sent, newer: s.waiting)
        case .retry(let after):
            s.attempts += 1
            s.notBefore = now + (after ?? settings.backoff.delay(afterAttempt: s.attempts))
            s.waiting = merge(older: sent, newer: s.waiting)
        case .failed(let reason):
            s.attempts = 0
            if sent.event == .end {
                drop(target)
                return [.forget(target, reason: reason)]
            }
        }
        store(target, s)
        return []
    }

    // MARK: - Inside

    private func push(_ c: RideActivityContent, reason: Reason) -> DevicePush {
        if c.state == .ended {
            return DevicePush(event: .end, priority: .immediate, content: c,
                              dismissalDate: secondsUp(c.at + settings.dismissAfter))
        }
        var p = DevicePush(event: .update, priority: reason == .fareStep ? .opportunistic : .immediate, content: c)
        if let next = c.fareNextAt { p.staleDate = secondsUp(next + settings.staleMargin) }
        if case .limitWarning(let alert) = reason { p.alert = alert }
        return p
    }

    private mutating func enqueue(_ t: PushTarget, _ p: DevicePush) {
        guard var s = slots[t], !s.ended else { return }
        if p.event != .end, p.content.at < s.newest { return }
        s.newest = max(s.newest, p.content.at)
        if p.event == .end { s.ended = true }
        s.waiting = merge(older: s.waiting, newer: p)
        store(t, s)
    }

    private mutating func add(_ t: PushTarget) {
        guard slots[t] == nil else { return }
        slots[t] = Slot()
        if let ride = t.ride { byRide[ride, default: []].insert(t) }
    }

    /// Writes a target's slot back and keeps the due queue in step with it: every change to
    /// a slot goes through here or `drop`.
    private mutating func store(_ t: PushTarget, _ s: Slot) {
        slots[t] = s
        if let p = s.waiting, s.inFlight == nil { ready.set(t, at: due(s, p)) } else { ready.remove(t) }
    }

    private mutating func drop(_ t: PushTarget) {
        guard slots.removeValue(forKey: t) != nil else { return }
        ready.remove(t)
        if let ride = t.ride {
            byRide[ride]?.remove(t)
            if byRide[ride]?.isEmpty == true { byRide[ride] = nil }
        }
    }

    /// The push to keep of two for one target: the newer content, with the more urgent
    /// priority and the older one's alert if it has none. An `end` always wins.
    private func merge(older: DevicePush?, newer: DevicePush?) -> DevicePush? {
        guard let older else { return newer }
        guard var newer else { return older }
        if older.event == .end, newer.event != .end { return older }
        if newer.event == .end { return newer }
        if older.priority == .immediate { newer.priority = .immediate }
        if newer.alert == nil { newer.alert = older.alert }
        if older.event == .start { newer.event = .start; newer.attributes = older.attributes }
        return newer
    }

    /// When a waiting push may go: after its backoff and, at priority 5, a minute after the
    /// previous priority-5 push.
    private func due(_ s: Slot, _ p: DevicePush) -> UnixMillis {
        var t = s.notBefore
        if p.priority == .opportunistic, let last = s.lastOpportunistic { t = max(t, last + settings.opportunisticGap) }
        return t
    }

    private mutating func noteFare(_ c: RideActivityContent) {
        let watched = byRide[c.ride]?.contains { $0.kind != .pushToStart } ?? false
        if c.state == .riding, watched, let next = c.fareNextAt { fareWakes.set(c.ride, at: next) } else { fareWakes.remove(c.ride) }
    }

    private static func order(_ a: PushTarget, _ b: PushTarget) -> Bool {
        (a.ride ?? "", a.platform.rawValue, a.kind.rawValue, a.token) < (b.ride ?? "", b.platform.rawValue, b.kind.rawValue, b.token)
    }
}
