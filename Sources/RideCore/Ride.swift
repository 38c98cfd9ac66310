/// A ride's lifecycle: riding → paused → riding → … → ended.
public enum RideState: String, Sendable, Equatable {
    case riding, paused, ended
}

/// Why a ride ended; printed on the receipt.
public enum EndReason: String, Sendable, Equatable {
    case rider
    /// Ended by an operator (an ops token acting on someone else's ride).
    case byOperator = "operator"
    /// Ended by an ops token with `force` where the zone rules refused the end (issue 28).
    case forced = "operator_forced"
    case timeLimit = "time_limit"
    case pauseLimit = "pause_limit"
}

/// One recorded fact about a ride. The journal of these is the ride: every other field
/// (state, elapsed, paused) is derived by replaying them, so nothing is ever counted up.
public enum RideTransition: Sendable, Equatable {
    case start(at: UnixMillis)
    case pause(at: UnixMillis)
    case resume(at: UnixMillis)
    case end(at: UnixMillis, reason: EndReason, metres: Int64)

    public var at: UnixMillis {
        switch self {
        case .start(let t), .pause(let t), .resume(let t): return t
        case .end(let t, _, _): return t
        }
    }

    public var kind: String {
        switch self {
        case .start: return "start"
        case .pause: return "pause"
        case .resume: return "resume"
        case .end: return "end"
        }
    }
}

/// What a client asks of an existing ride.
public enum RideCommand: String, Sendable, Equatable {
    case pause, resume, end
}

public struct RideError: Error, Equatable, Sendable, CustomStringConvertible {
    public let state: RideState
    public let command: RideCommand
    public init(state: RideState, command: RideCommand) {
        self.state = state
        self.command = command
    }
    public var description: String {
        switch state {
        case .ended: return "ride has ended; cannot \(command.rawValue)"
        case .paused: return "ride is paused; cannot \(command.rawValue)"
        case .riding: return "ride is riding; cannot \(command.rawValue)"
        }
    }
}

/// A ride as derived from its transitions. Value type: the engine returns a new one.
///
/// Held three times per ride (the book, the registry's `LiveRide`, and every change in flight),
/// so it is laid out to pack: the optional instants are stored as `Int64` with `Ride.absent` for
/// nil (an `Int64?` takes 9 bytes and pads to 16), word-sized fields first, the two one-byte
/// enums last (106 bytes, a 112-byte stride, where the optionals in place took 136). Instants are
/// clock readings, never `Int64.min`.
public struct Ride: Sendable, Equatable {
    public let id: String
    public let planID: String
    /// The rider (token `sub`) who started it; nil when auth is off.
    public let owner: String?
    public let startedAt: UnixMillis
    /// Sum of finished pauses.
    public private(set) var pausedMillisBefore: Int64 = 0
    public private(set) var metres: Int64 = 0
    /// The last instant this ride recorded (start, pause, resume or end); time never runs
    /// backwards past it, so a clock stepping back cannot shrink elapsed or make a pause negative.
    public private(set) var lastInstant: UnixMillis
    private let limitOrAbsent: Int64
    private var pausedSinceOrAbsent: UnixMillis = Ride.absent
    private var endedAtOrAbsent: UnixMillis = Ride.absent
    public private(set) var state: RideState = .riding
    public private(set) var endReason: EndReason?

    /// What the stored optionals hold for nil.
    static let absent = Int64.min

    /// Maximum riding seconds for this ride (from `start`'s `limit` or the plan), if any.
    public var limit: Int64? { limitOrAbsent == Ride.absent ? nil : limitOrAbsent }
    /// Start of the pause in progress.
    public private(set) var pausedSince: UnixMillis? {
        get { pausedSinceOrAbsent == Ride.absent ? nil : pausedSinceOrAbsent }
        set { pausedSinceOrAbsent = newValue ?? Ride.absent }
    }
    public private(set) var endedAt: UnixMillis? {
        get { endedAtOrAbsent == Ride.absent ? nil : endedAtOrAbsent }
        set { endedAtOrAbsent = newValue ?? Ride.absent }
    }

    public init(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis) {
        self.id = id
        self.planID = planID
        self.owner = owner
        // A limit of Int64.min (no client can mean it) bills as one second above it, not as none.
        limitOrAbsent = limit.map { max($0, Ride.absent + 1) } ?? Ride.absent
        self.startedAt = startedAt
        self.lastInstant = startedAt
    }

    /// The state machine: a command at an instant gives the transition to record, or an error.
    public func transition(for command: RideCommand, at t: UnixMillis, metres: Int64 = 0) -> Result<RideTransition, RideError> {
        let at = max(t, lastInstant)  // a clock step backwards must not make time negative
        switch (state, command) {
        case (.riding, .pause): return .success(.pause(at: at))
        case (.paused, .resume): return .success(.resume(at: at))
        case (.riding, .end), (.paused, .end): return .success(.end(at: at, reason: .rider, metres: metres))
        default: return .failure(RideError(state: state, command: command))
        }
    }

    /// The state machine, once: what `command` at `t` records and the ride after it, or why not.
    public func step(_ command: RideCommand, at t: UnixMillis, metres: Int64 = 0, endedBy: EndReason = .rider) -> Result<(RideTransition, Ride), RideError> {
        let at = max(t, lastInstant)
        let tr: RideTransition
        switch command {
        case .pause: tr = .pause(at: at)
        case .resume: tr = .resume(at: at)
        case .end: tr = .end(at: at, reason: endedBy, metres: metres)
        }
        return applying(tr).map { (tr, $0) }
    }

    /// Applies a recorded transition. Replaying a journal calls this for each entry.
    public func applying(_ tr: RideTransition) -> Result<Ride, RideError> {
        var next = self
        // A recorded instant before the last one (a clock that stepped back) counts as the last one.
        let at = max(tr.at, lastInstant)
        next.lastInstant = at
        switch (state, tr) {
        case (.riding, .pause):
            next.state = .paused
            next.pausedSince = at
        case (.paused, .resume):
            next.pausedMillisBefore += at - (pausedSince ?? at)
            next.pausedSince = nil
            next.state = .riding
        case (.riding, .end(_, let reason, let m)), (.paused, .end(_, let reason, let m)):
            if let since = pausedSince { next.pausedMillisBefore += at - since }
            next.pausedSince = nil
            next.state = .ended
            next.endedAt = at
            next.endReason = reason
            next.metres = m
        default:
            let cmd: RideCommand
            switch tr {
            case .pause: cmd = .pause
            case .resume: cmd = .resume
            default: cmd = .end
            }
            return .failure(RideError(state: state, command: cmd))
        }
        return .success(next)
    }

    /// Milliseconds spent paused up to `now` (frozen once ended).
    public func pausedMillis(at now: UnixMillis) -> Int64 {
        var total = pausedMillisBefore
        if let since = pausedSince { total += max(0, now - since) }
        return total
    }

    /// Milliseconds spent riding up to `now`: wall time since start minus pauses.
    public func ridingMillis(at now: UnixMillis) -> Int64 {
        let end = endedAt ?? max(now, lastInstant)
        if let since = pausedSince { return max(0, since - startedAt - pausedMillisBefore) }
        return max(0, end - startedAt - pausedMillisBefore)
    }

    public func elapsedSeconds(at now: UnixMillis) -> Int64 { ridingMillis(at: now) / 1000 }
    public func pausedSeconds(at now: UnixMillis) -> Int64 {
        pausedMillis(at: endedAt ?? now) / 1000
    }

    /// Seconds of riding left before the time limit, if the ride has one.
    public func remainingSeconds(at now: UnixMillis) -> Int64? {
        guard let limit else { return nil }
        return max(0, limit - elapsedSeconds(at: now))
    }

    /// The transition the ride makes by itself by `now`, if a limit has passed: at the time
    /// limit (riding) or at the maximum pause (paused). The end is recorded at the instant the
    /// limit was reached, not when it was noticed, so the bill stops exactly there.
    public func dueAutoEnd(at now: UnixMillis, maxPauseSeconds: Int64?) -> RideTransition? {
        switch state {
        case .riding:
            guard let limit else { return nil }
            let due = Ride.instant(startedAt + pausedMillisBefore, plusSeconds: limit)
            return now >= due ? .end(at: due, reason: .timeLimit, metres: 0) : nil
        case .paused:
            guard let maxPause = maxPauseSeconds, let since = pausedSince else { return nil }
            let due = Ride.instant(since, plusSeconds: maxPause)
            return now >= due ? .end(at: due, reason: .pauseLimit, metres: 0) : nil
        case .ended:
            return nil
        }
    }

    /// `t` plus `seconds`, saturating: an absurd limit means "never", not an overflow trap.
    static func instant(_ t: UnixMillis, plusSeconds seconds: Int64) -> UnixMillis {
        let (ms, o1) = seconds.multipliedReportingOverflow(by: 1000)
        let (due, o2) = t.addingReportingOverflow(ms)
        if o1 || o2 { return seconds < 0 ? Int64.min : Int64.max }
        return due
    }

    /// Rebuilds a ride from its journal (the first entry must be its start).
    public static func replay(id: String, planID: String, owner: String?, limit: Int64?,
                              journal: [RideTransition]) -> Result<Ride, RideError>? {
        guard case .start(let t0)? = journal.first else { return nil }
        var ride = Ride(id: id, planID: planID, owner: owner, limit: limit, startedAt: t0)
        for tr in journal.dropFirst() {
            switch ride.applying(tr) {
            case .success(let r): ride = r
            case .failure(let e): return .failure(e)
            }
        }
        return .success(ride)
    }
}
