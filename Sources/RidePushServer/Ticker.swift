import RideService
import CLibWebSockets
import RideCore
import Synchronization

/// The one shared timer of the process: an lws timer on service thread 0 (lws times it on
/// CLOCK_MONOTONIC) that fires at each whole second of the process clock, has the registry encode one tick per ride, and hands the batch
/// to every thread. So every message of one tick carries the same `seq` and `at`, however
/// many rides and threads there are.
final class Ticker {  // service thread 0 only: its timer callback
    private var schedule = TickSchedule(now: 0)
    /// The hourly prune and retention batches (RideService decides which are due).
    private var housekeeping: Housekeeping
    /// Where the last tick's time is kept for /healthz (RideServer.lastTick).
    private let service: RideServer
    private let clock: RideClock
    private let metrics: Metrics
    private let registry: RideRegistry
    /// The store worker: where due auto-ends, the hourly prune and retention batches go.
    private let jobs: any StoreJobSink
    /// How the batch reaches the other service threads: their mailboxes.
    private let mailboxes: Mailboxes
    private let threads: Int

    /// Made from what it uses, before the service threads exist (Hub.init).
    init(service: RideServer, jobs: any StoreJobSink, mailboxes: Mailboxes, threads: Int, retention: Retention? = nil) {
        housekeeping = Housekeeping(retention: retention)
        self.service = service
        clock = service.clock
        metrics = service.metrics
        registry = service.registry
        self.jobs = jobs
        self.mailboxes = mailboxes
        self.threads = threads
    }

    func start(on shard: Shard) {
        schedule = TickSchedule(now: clock.now())
        service.lastTick.store(monotonicMillis(), ordering: .relaxed)
        arm(shard)
    }

    func stop(on shard: Shard) {
        lws_sul_cancel(&shard.tickTimer.pointee.sul)
    }

    /// `ahead` µs earlier than the second: see the end of `fire`.
    private func arm(_ shard: Shard, ahead: Int64 = 0) {
        let delay = max(0, schedule.delay(now: clock.now()) - ahead)
        lws_sul_schedule(shard.context, 0, &shard.tickTimer.pointee.sul, { sul in
            guard let shard = TimerBox.owner(of: sul, as: Shard.self) else { return }
            shard.ticker.fire(shard)
        }, lws_usec_t(delay))
    }

    func fire(_ shard: Shard) {
        let began = monotonicMicros()
        let now = clock.now()
        guard let (seq, at) = schedule.fire(now: now) else {  // woke early: wait for the second
            arm(shard)
            return
        }
        metrics.lateness.observe(Double(now - at))
        metrics.add(metrics.tickRounds)
        service.lastTick.store(monotonicMillis(), ordering: .relaxed)
        Faults.tickRound(metrics.tickRounds.load(ordering: .relaxed))
        // The other threads get their share inside the registry's lock, so a tick encoded
        // before a transition committed is in their mailboxes before that transition's push.
        let (batch, pushes, autoEnds) = registry.tick(seq: seq, at: at) { batch, pushes in
            for i in 0..<threads where i != shard.index {
                var events = pushes.map { ShardEvent.push($0.0, $0.1, except: nil) }
                events.append(.tick(batch))
                mailboxes.post(i, events)
            }
        }
        // Limits that passed end through the store like any transition; their push follows
        // their commit, and the ride stops ticking meanwhile.
        jobs.submit(autoEnds)
        for (live, frame) in pushes { shard.push(live, frame, except: nil) }
        shard.fanOut(batch)
        if let c = clock as? ClockReport {
            for jump in c.takeSteps() {
                Log.warn("wall clock stepped \(jump >= 0 ? "forward" : "back") by \(abs(jump)) ms; not followed: slewing at most \(SlewingClock.maxSlewPPM / 1000) ms per second (offset now \(c.offsetMillis) ms)")
            }
        }
        let chores = housekeeping.due(at: at, now: clock.now())
        if !chores.isEmpty { jobs.submit(chores) }
        // lws 4.1 works out its next poll() timeout from the time it read before running this
        // callback (__lws_sul_service_ripe), so a fan-out that took N ms here would make the
        // next tick N ms late. Armed N ms early, the wait it works out ends at the second. (Waking
        // its own loop to work the wait out again would cost one more poll() over every socket
        // each second.) Should anything wake the loop in those N ms, the timer is
        // ripe, `fire` finds it early and arms again for the rest.
        arm(shard, ahead: monotonicMicros() - began)
    }
}
