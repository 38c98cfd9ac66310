import RideCore
import RideProtocol
import Testing
@testable import RideDevicePush

// The push schedule, driven by a manual clock advanced by hand: each scenario is a table of
// steps (what happened, how far the clock moved) and the actions `poll` and `answered` give.

fileprivate let t0: UnixMillis = 1_764_430_000_000
fileprivate let a = PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: "aa")
fileprivate let f = PushTarget(platform: .fcm, kind: .notification, ride: "r-42", token: "ff")
fileprivate let starter = PushTarget(platform: .apns, kind: .pushToStart, ride: nil, token: "ss")
fileprivate let warning = DevicePush.Alert(title: "5분 남았습니다", body: "r-42")

/// The ride r-42 on the standard plan through its journal, as content at the clock's instant.
fileprivate final class RideScript {
    var ride = Ride(id: "r-42", planID: "default", owner: "u-7", limit: nil, startedAt: t0)
    func content(_ clock: ManualClock) -> RideActivityContent { RideActivityContent(ride, .standard, at: clock.now()) }
    func apply(_ c: RideCommand, _ clock: ManualClock) -> RideActivityContent {
        if case .success(let (_, next)) = ride.step(c, at: clock.now()) { ride = next }
        return content(clock)
    }
}

fileprivate enum Step {
    /// The clock moves on this many seconds.
    case wait(Int64)
    case register(PushTarget)
    case command(RideCommand)
    case changed(PushSchedule.Reason)
    case start(PushTarget)
    case answer(PushTarget, PushVerdict, [String])
    case poll([String])
    case wakeIn(Int64?)
}

fileprivate func describe(_ action: PushSchedule.Action) -> String {
    switch action {
    case .send(let t, let p):
        var s = "send \(t.token) \(p.event.rawValue) p\(p.priority.rawValue) \(p.content.state.rawValue) \(p.content.fare)"
        if let d = p.staleDate { s += " stale+\(d - t0 / 1000)" }
        if let d = p.dismissalDate { s += " dismiss+\(d - t0 / 1000)" }
        if p.alert != nil { s += " alert" }
        if p.attributes != nil { s += " attributes" }
        return s
    case .refresh(let ride): return "refresh \(ride)"
    case .forget(let t, let reason): return "forget \(t.token) \(reason)"
    }
}

fileprivate func run(_ steps: [Step], settings: PushSchedule.Settings = .init()) -> PushSchedule {
    let clock = ManualClock(t0)
    let script = RideScript()
    var schedule = PushSchedule(clock: clock, settings: settings)
    for (i, step) in steps.enumerated() {
        switch step {
        case .wait(let s): clock.advance(seconds: s)
        case .register(let t): schedule.register(t, script.content(clock))
        case .command(let c): schedule.changed(script.apply(c, clock), reason: .transition)
        case .changed(let r): schedule.changed(script.content(clock), reason: r)
        case .start(let t):
            schedule.start(t, script.content(clock), attributes: .init(ride: "r-42", planName: "Standard"), alert: warning)
        case .answer(let t, let v, let expected):
            #expect(schedule.answered(t, v).map(describe) == expected, "step \(i)")
        case .poll(let expected):
            #expect(schedule.poll().map(describe) == expected, "step \(i)")
        case .wakeIn(let s):
            #expect(schedule.nextWake() == s.map { clock.now() + $0 * 1000 }, "step \(i)")
        }
    }
    return schedule
}

@Suite struct PushScheduleTests {
    @Test func oneRidesActivityFromRegistrationToEnd() {
        let s = run([
            .wait(10), .register(a),
            // The ride as it is: 500 KRW, stale 5 s after the first minute completes.
            .poll(["send aa update p10 riding 500 stale+65"]), .answer(a, .delivered, []),
            .wakeIn(50), .wait(49), .poll([]), .wait(1),
            // The fare changes at 1:00: asked for, then pushed at priority 5.
            .poll(["refresh r-42"]), .changed(.fareStep), .poll(["send aa update p5 riding 680 stale+125"]), .answer(a, .delivered, []),
            .wait(60), .poll(["refresh r-42"]), .changed(.fareStep), .poll(["send aa update p5 riding 860 stale+185"]),
            .answer(a, .delivered, []),
            // Five-minute warning, then pause: immediate; nothing while paused, however long.
            .wait(5), .changed(.limitWarning(warning)), .poll(["send aa update p10 riding 860 stale+185 alert"]), .answer(a, .delivered, []),
            .wait(5), .command(.pause), .poll(["send aa update p10 paused 860"]), .answer(a, .delivered, []),
            .wakeIn(nil), .wait(600), .poll([]),
            .command(.resume), .poll(["send aa update p10 riding 860 stale+785"]), .answer(a, .delivered, []),
            // The end: its dismissal 15 minutes after, and the target is done once delivered.
            .wait(30), .command(.end), .poll(["send aa end p10 ended 860 dismiss+1660"]),
            .answer(a, .delivered, ["forget aa ended"]), .wakeIn(nil),
        ])
        #expect(s.targets.isEmpty)
    }

    @Test func everyTargetOfTheRideGetsTheSamePushOnce() {
        _ = run([
            .register(a), .register(f),
            .poll(["send aa update p10 riding 500 stale+65", "send ff update p10 riding 500 stale+65"]),
            .answer(a, .delivered, []), .answer(f, .delivered, []),
            .wait(20), .command(.pause),
            .poll(["send aa update p10 paused 500", "send ff update p10 paused 500"]), .poll([]),
        ])
    }

    @Test func newerContentReplacesOlderStillWaitingAndAnEndIsNeverReplaced() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            // While that one is in flight: pause, then resume — only the latest waits.
            .wait(1), .command(.pause), .wait(1), .command(.resume), .poll([]),
            .answer(a, .delivered, []), .poll(["send aa update p10 riding 500 stale+66"]),
            // End, then anything after it: the end goes, nothing else.
            .wait(1), .command(.end), .changed(.zone), .changed(.fareStep),
            .answer(a, .delivered, []), .poll(["send aa end p10 ended 500 dismiss+903"]), .poll([]),
        ])
    }

    @Test func aFareStepReplacingAWarningKeepsItsPriorityAndAlert() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            .changed(.limitWarning(warning)), .wait(60), .changed(.fareStep),
                        // The step's content was built at 1:00, so no refresh is due until 2:00.
            .answer(a, .delivered, []), .poll(["send aa update p10 riding 680 stale+125 alert"]), .wakeIn(60),
        ])
    }

    @Test func fareStepsGoAtMostOnceAMinute() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]), .answer(a, .delivered, []),
            .wait(60), .poll(["refresh r-42"]), .changed(.fareStep), .poll(["send aa update p5 riding 680 stale+125"]),
            .answer(a, .delivered, []),
            // Another fare step 10 s later (a per-km plan would have one): held until a minute has passed.
            .wait(10), .changed(.fareStep), .poll([]), .wakeIn(50), .wait(50),
            // 2:00 is also the next fare step: refreshed content goes when asked for.
            .poll(["refresh r-42", "send aa update p5 riding 680 stale+125"]),
        ])
    }

    @Test func retriesBackOffFromOneSecondDoublingAndHonourRetryAfter() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .retry(retryAfter: nil), []), .poll([]), .wakeIn(1), .wait(1),
            .poll(["send aa update p10 riding 500 stale+65"]), .answer(a, .retry(retryAfter: nil), []), .wakeIn(2), .wait(2),
            .poll(["send aa update p10 riding 500 stale+65"]), .answer(a, .retry(retryAfter: nil), []), .wakeIn(4), .wait(4),
            .poll(["send aa update p10 riding 500 stale+65"]), .answer(a, .retry(retryAfter: 30_000), []), .wakeIn(30),
            // A pause while waiting replaces the content that waits; it goes when the wait is over.
            .wait(10), .command(.pause), .poll([]), .wait(20), .poll(["send aa update p10 paused 500"]),
            .answer(a, .delivered, []),
            .command(.resume), .poll(["send aa update p10 riding 500 stale+85"]),
        ])
    }

    @Test func theBackoffIsCapped() {
        var settings = PushSchedule.Settings()
        settings.backoff = PushBackoff(first: 1_000, cap: 4_000)
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .retry(retryAfter: nil), []), .wait(1), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .retry(retryAfter: nil), []), .wait(2), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .retry(retryAfter: nil), []), .wait(4), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .retry(retryAfter: nil), []), .wakeIn(4),
        ], settings: settings)
    }

    @Test func aGoneTokenIsForgottenAndGetsNothingMore() {
        let s = run([
            .register(a), .register(f), .poll(["send aa update p10 riding 500 stale+65", "send ff update p10 riding 500 stale+65"]),
            .answer(a, .dropTarget(reason: "Unregistered"), ["forget aa Unregistered"]), .answer(f, .delivered, []),
            .command(.pause), .poll(["send ff update p10 paused 500"]),
        ])
        #expect(s.targets == [f])
    }

    @Test func expiredCredentialsAreRenewedAndSentAgainAtOnceOnlyTheFirstTime() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .renewCredentials, []), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .renewCredentials, []), .poll([]), .wakeIn(1), .wait(1), .poll(["send aa update p10 riding 500 stale+65"]),
        ])
    }

    @Test func aFailedPushIsGivenUpButTheTargetKept() {
        let s = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
            .answer(a, .failed(reason: "413 PayloadTooLarge"), []), .poll([]),
            .wait(5), .command(.pause), .poll(["send aa update p10 paused 500"]),
        ])
        #expect(s.targets == [a])
    }

    @Test func aPushToStartCreatesTheActivityAndTheTokenIsKept() {
        let s = run([
            .start(starter), .poll(["send ss start p10 riding 500 stale+65 alert attributes"]), .answer(starter, .delivered, []),
            // Its pushes are not the ride's updates: those go to the activity's own token.
            .command(.pause), .poll([]),
        ])
        #expect(s.targets == [starter])
    }

    @Test func anUnregisteredTargetGetsNothingAndItsAnswerIsIgnored() {
        _ = run([
            .register(a), .poll(["send aa update p10 riding 500 stale+65"]),
        ])
        let clock = ManualClock(t0)
        var s = PushSchedule(clock: clock)
        s.register(a, RideActivityContent(Ride(id: "r-42", planID: "default", owner: nil, limit: nil, startedAt: t0), .standard, at: t0))
        #expect(s.poll().count == 1)
        s.unregister(a)
        #expect(s.answered(a, .delivered).isEmpty)
        clock.advance(seconds: 60)
        #expect(s.poll().isEmpty)
        #expect(s.nextWake() == nil)
    }
}
