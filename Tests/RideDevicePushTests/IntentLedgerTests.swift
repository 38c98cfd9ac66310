import RideCore
import RideProtocol
import Testing
@testable import RideDevicePush

// The push sender's bookkeeping of which outbox rows are still owed, driven beside a real
// PushSchedule on a manual clock (no sleeps): a row is done only once every target's push that
// carries it was answered, a retry keeps it, a dropped target or an answered `end` settles it.

fileprivate let t0: UnixMillis = 1_764_430_000_000
fileprivate let a = PushTarget(platform: .apns, kind: .liveActivity, ride: "r-1", token: "aa")
fileprivate let b = PushTarget(platform: .apns, kind: .liveActivity, ride: "r-1", token: "bb")

fileprivate func content(_ state: RideState, at: UnixMillis) -> RideActivityContent {
    RideActivityContent(ride: "r-1", state: state, elapsed: (at - t0) / 1000, at: at, fare: 500, currency: "KRW")
}

/// The sender's loop in miniature: queue a row for targets, poll, answer.
fileprivate struct Rig {
    let clock = ManualClock(t0)
    var schedule: PushSchedule
    var ledger = IntentLedger()
    var done: [Int64] = []

    init() { schedule = PushSchedule(clock: clock) }

    mutating func row(_ seq: Int64, _ c: RideActivityContent, _ targets: [PushTarget]) {
        for t in targets where !schedule.targets.contains(t) { schedule.register(t, c) }
        schedule.changed(c, reason: .transition)
        done += ledger.opened(seq, targets: targets.filter { schedule.owes($0) })
    }

    mutating func poll() -> [PushTarget] {
        var sent: [PushTarget] = []
        for case .send(let t, _) in schedule.poll() {
            ledger.sent(t)
            sent.append(t)
        }
        return sent
    }

    mutating func answer(_ t: PushTarget, _ v: PushVerdict) {
        done += ledger.answered(t, v)
        for case .forget(let f, _) in schedule.answered(t, v) { done += ledger.forgot(f) }
    }
}

@Test func aRowIsDoneOnlyWhenEveryTargetAnswered() {
    var r = Rig()
    r.row(1, content(.riding, at: t0), [a, b])
    #expect(r.poll() == [a, b])
    r.answer(a, .delivered)
    #expect(r.done.isEmpty, "b has not answered")
    r.answer(b, .retry(retryAfter: nil))
    #expect(r.done.isEmpty, "a retry keeps the row")
    r.clock.advance(millis: 1_000)
    #expect(r.poll() == [b])
    r.answer(b, .delivered)
    #expect(r.done == [1])
    #expect(r.ledger.openRows.isEmpty)
}

@Test func aRowWithNoTargetIsDoneAtOnce() {
    var r = Rig()
    r.row(7, content(.riding, at: t0), [])
    #expect(r.done == [7])
}

@Test func aNewerRowSupersedesAWaitingOneAndBothSettleWithOnePush() {
    var r = Rig()
    r.row(1, content(.riding, at: t0), [a])
    #expect(r.poll() == [a])
    r.answer(a, .retry(retryAfter: nil))  // APNs down: row 1 waits for its backoff
    r.clock.advance(millis: 200)
    r.row(2, content(.paused, at: t0 + 200), [a])  // a pause comes meanwhile: one push carries both
    r.clock.advance(millis: 1_000)
    #expect(r.poll() == [a])
    r.answer(a, .delivered)
    #expect(r.done.sorted() == [1, 2])
}

@Test func aDroppedTargetSettlesWhatItOwedAndAnAnsweredEndSettlesRowsQueuedBehindIt() {
    var r = Rig()
    r.row(1, content(.riding, at: t0), [a, b])
    _ = r.poll()
    r.answer(b, .dropTarget(reason: "Unregistered"))
    r.answer(a, .delivered)
    #expect(r.done == [1])
    r.clock.advance(millis: 1_000)
    r.row(2, content(.ended, at: t0 + 1_000), [a])
    #expect(r.poll() == [a])
    r.answer(a, .delivered)
    #expect(r.done == [1, 2])
    #expect(r.schedule.targets.isEmpty, "the activity ended: the target is forgotten")
}

@Test func olderContentThanATargetWasSentOwesNothing() {
    var r = Rig()
    // The registration's update (newer) went first; the start's intent is read after it.
    r.schedule.register(a, content(.riding, at: t0 + 50))
    #expect(r.poll() == [a])
    r.answer(a, .delivered)
    r.row(1, content(.riding, at: t0), [a])
    #expect(r.done == [1], "nothing queued, nothing owed")
    #expect(r.poll().isEmpty)
}

@Test func lostRowsAreForgottenNotDone() {
    var r = Rig()
    r.row(1, content(.riding, at: t0), [a])
    r.ledger.drop([1])
    #expect(r.ledger.openRows.isEmpty)
    _ = r.poll()
    r.answer(a, .delivered)
    #expect(r.done.isEmpty)
}

@Test func anIntentsBodyReadsBackAsWritten() throws {
    var c = content(.riding, at: t0 + 1_234)
    c.fareNext = 680
    c.fareNextAt = t0 + 60_000
    c.limitAt = t0 + 1_800_000
    c.zone = .init(name: "Seoul Forest", endAllowed: false)
    let intent = PushIntent(seq: 3, transition: "resume", content: c, rider: "u-7", planName: "기본", created: t0 + 1_234)
    #expect(try PushIntent(body: intent.body()) == intent)
    let start = PushIntent(seq: 1, transition: "start", content: c, rider: "u-7", planName: "기본", created: t0,
                           alert: DevicePush.Alert(title: "기본", body: "대여가 시작되었습니다"))
    #expect(try PushIntent(body: start.body()) == start)
    #expect(throws: PushIntent.DecodeError.self) { try PushIntent(body: Array("{\"seq\":1}".utf8)) }
}

@Test func alertsSpeakThePlansLanguage() {
    var ko = FarePlan.standard
    ko.names = ["ko": "기본 요금", "en": "Standard"]
    var en = FarePlan.standard
    en.names = ["en": "Standard"]
    #expect(PushAlerts.limitWarning(remaining: 300, plan: ko).title == "5분 남았습니다")
    #expect(PushAlerts.limitWarning(remaining: 60, plan: en).title == "1 minute left")
    #expect(PushAlerts.limitWarning(remaining: 299, plan: en).title == "5 minutes left")
    #expect(PushAlerts.started(plan: en) == DevicePush.Alert(title: "Standard", body: "Your ride has started"))
}
