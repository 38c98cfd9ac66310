import CLibWebSockets
import RideCore

/// The one shared timer of the process: an lws timer on service thread 0 that fires at each
/// whole wall-clock second, has the registry encode one tick per ride, and hands the batch
/// to every thread. So every message of one tick carries the same `seq` and `at`, however
/// many rides and threads there are.
final class Ticker: @unchecked Sendable {  // service thread 0 only
    private var seq: Int64 = 0
    private var target: UnixMillis = 0
    private var lastPrune: UnixMillis = 0
    unowned let hub: Hub

    init(hub: Hub) { self.hub = hub }

    func start(on shard: Shard) {
        target = nextWholeSecond(after: hub.clock.now())
        arm(shard)
    }

    func stop(on shard: Shard) {
        lws_sul_cancel(&shard.tickTimer.pointee.sul)
    }

    private func arm(_ shard: Shard) {
        let delay = max(0, target - hub.clock.now()) * 1000
        lws_sul_schedule(shard.context, 0, &shard.tickTimer.pointee.sul, { sul in
            guard let shard = TimerBox.owner(of: sul, as: Shard.self) else { return }
            shard.hub.ticker.fire(shard)
        }, lws_usec_t(delay))
    }

    func fire(_ shard: Shard) {
        let now = hub.clock.now()
        if now < target {  // woke early (timer granularity): wait for the second to begin
            arm(shard)
            return
        }
        let at = target
        hub.metrics.lateness.observe(Double(now - at))
        seq += 1
        hub.metrics.add(hub.metrics.tickRounds)
        let (batch, pushes) = hub.registry.tick(seq: seq, at: at)
        for s in hub.shards {
            for (live, frame) in pushes { s === shard ? s.push(live, frame, except: nil) : s.post(.push(live, frame, except: nil)) }
            s === shard ? s.fanOut(batch) : s.post(.tick(batch))
        }
        // Overloaded past a whole second: skip to the next second rather than firing a burst.
        target = nextWholeSecond(after: max(hub.clock.now(), at))
        if at - lastPrune > 3_600_000 {
            lastPrune = at
            hub.registry.pruneReplies()
        }
        arm(shard)
    }
}
