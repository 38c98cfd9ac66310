import RideCore
import RideProtocol
import Testing
@testable import RideDevicePush

// The schedule at 10,000 activities: a change of one ride and a poll touch only what is
// theirs (counted by the schedule), not every target kept.

fileprivate let t0: UnixMillis = 1_764_430_000_000

@Suite struct PushScheduleScaleTests {
    private static func content(_ i: Int, at: UnixMillis) -> RideActivityContent {
        RideActivityContent(Ride(id: "r-\(i)", planID: "default", owner: nil, limit: nil, startedAt: t0), .standard, at: at)
    }

    private static func target(_ i: Int) -> PushTarget {
        PushTarget(platform: .apns, kind: .liveActivity, ride: "r-\(i)", token: "t\(i)")
    }

    @Test func aChangeOfOneRideAndAPollTouchOnlyItsTargetsAmongTenThousand() {
        let n = 10_000
        let clock = ManualClock(t0)
        var s = PushSchedule(clock: clock)
        for i in 0..<n { s.register(Self.target(i), Self.content(i, at: t0)) }
        let first = s.poll()
        #expect(first.count == n)
        #expect(s.counters.polled == n)
        for i in 0..<n { #expect(s.answered(Self.target(i), .delivered).isEmpty) }
        // Nothing waits; the next fare step of every ride is a minute away.
        #expect(s.nextWake() == t0 + 60_000)
        #expect(s.poll().isEmpty)
        #expect(s.counters.polled == n)

        clock.advance(seconds: 5)
        let before = s.counters
        s.changed(Self.content(4_321, at: clock.now()), reason: .zone)
        #expect(s.counters.changedTouched - before.changedTouched == 1)
        #expect(s.owes(Self.target(4_321)))
        #expect(!s.owes(Self.target(4_322)))
        #expect(s.nextWake().map { $0 <= clock.now() } == true)
        let sends = s.poll()
        #expect(sends.count == 1)
        if case .send(let t, _)? = sends.first { #expect(t == Self.target(4_321)) } else { Issue.record("no send: \(sends)") }
        #expect(s.counters.polled - before.polled == 1)

        // Its retry is the earliest thing due, found without looking at the others.
        #expect(s.answered(Self.target(4_321), .retry(retryAfter: nil)).isEmpty)
        #expect(s.nextWake() == clock.now() + 1_000)
        clock.advance(seconds: 1)
        #expect(s.poll().count == 1)
        #expect(s.counters.polled - before.polled == 2)
        #expect(s.answered(Self.target(4_321), .delivered).isEmpty)

        // At the minute every ride's fare steps: one refresh each, in ride order, no sends.
        clock.advance(seconds: 54)
        let refreshes = s.poll()
        #expect(refreshes.count == n)
        #expect(refreshes.first == .refresh(ride: "r-0"))
        #expect(s.counters.polled - before.polled == 2)
        #expect(s.nextWake() == nil)

        // A target unregistered leaves its ride's index: a change of the ride touches nothing.
        s.unregister(Self.target(7))
        let touched = s.counters.changedTouched
        s.changed(Self.content(7, at: clock.now()), reason: .zone)
        #expect(s.counters.changedTouched == touched)
        #expect(s.poll().isEmpty)
        #expect(s.targets.count == n - 1)
    }

    @Test func theDueQueueAgreesWithASortedList() {
        var q = DueQueue<Int>()
        var model: [Int: UnixMillis] = [:]
        var seed: UInt64 = 42
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
        for step in 0..<5_000 {
            let key = next(200)
            switch next(4) {
            case 0, 1:
                let at = UnixMillis(next(1_000))
                q.set(key, at: at)
                model[key] = at
            case 2:
                q.remove(key)
                model[key] = nil
            default:
                let now = UnixMillis(next(300))
                #expect(Set(q.popDue(now)) == Set(model.filter { $0.value <= now }.keys), "step \(step)")
                model = model.filter { $0.value > now }
            }
            #expect(q.count == model.count)
            #expect(q.earliest == model.values.min(), "step \(step)")
        }
    }
}
