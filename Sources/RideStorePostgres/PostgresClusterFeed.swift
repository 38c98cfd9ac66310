import Foundation
import RideStore
import Synchronization

/// A node's ear on the shared journal: one thread holding the dedicated LISTEN connection.
/// It reads nothing itself; it tells the store worker what to read (`wake`), so every change
/// to the rides stays on the worker's thread:
/// - a NOTIFY from another node's commit → that ride's hint, coalesced, at once;
/// - every `catchUpEvery` (listening or not) and after every (re)connect → a full catch-up
///   read, because a notification sent while the listener was away is lost, never queued.
/// The listener also pings on that beat, so a dead server is noticed within the statement
/// deadline even when nothing is notified. Reconnects back off 250 ms → 5 s.
package final class PostgresClusterFeed: Sendable {
    private let settings: PostgresSettings
    private let ownBackend: BackendID
    /// Whether the listener is connected (the node is degraded while it is not).
    package let health = ConnectionHealth()
    package let reconnects = Atomic<Int>(0)
    private let catchUpEvery: Duration
    private let wake: @Sendable (_ hints: [String: Int64], _ catchUp: Bool) -> Void
    /// Where the feed's losses (`warning`) and reconnects are logged: the server's log, the
    /// store has none of its own.
    private let log: @Sendable (_ warning: Bool, _ message: String) -> Void
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)

    package init(settings: PostgresSettings, ownBackend: BackendID, catchUpEvery: Duration = .seconds(2),
         log: @escaping @Sendable (_ warning: Bool, _ message: String) -> Void,
         wake: @escaping @Sendable (_ hints: [String: Int64], _ catchUp: Bool) -> Void) {
        self.log = log
        self.settings = settings
        self.ownBackend = ownBackend
        self.catchUpEvery = catchUpEvery
        self.wake = wake
    }

    package func start() {
        let t = Thread { [self] in run() }
        t.name = "ride-cluster-feed"
        t.start()
    }

    /// Stops the thread (within one wait slice, 250 ms) and closes the connection.
    package func stop() {
        stopping.store(true, ordering: .relaxed)
        stopped.wait()
    }

    private func run() {
        var listener: PostgresListener?
        var backoff: Duration = .zero
        var retryAt = ContinuousClock.now
        var nextBeat = ContinuousClock.now + catchUpEvery
        while !stopping.load(ordering: .relaxed) {
            // The catch-up beat goes on while the listener is away: the worker reads through
            // its own connection, so transitions still arrive, seconds late instead of at once.
            if ContinuousClock.now >= nextBeat {
                nextBeat = ContinuousClock.now + catchUpEvery
                wake([:], true)
                if let l = listener {
                    do throws(StoreError) { try l.ping() } catch {
                        lost(error, &listener, &backoff, &retryAt)
                        continue
                    }
                }
            }
            guard let l = listener else {
                if ContinuousClock.now < retryAt {
                    pause(min(.milliseconds(250), ContinuousClock.now.duration(to: retryAt)))
                    continue
                }
                do throws(StoreError) {
                    listener = try PostgresListener(settings)
                    if backoff != .zero {
                        log(false, "cluster feed: listening again on \(settings.redacted)")
                        reconnects.add(1, ordering: .relaxed)
                    }
                    backoff = .zero
                    health.up()
                    wake([:], true)  // whatever was notified while away is lost: read it
                } catch {
                    if health.isUp { log(true, "cluster feed: \(error.message); reconnecting with backoff") }
                    health.down(error.message)
                    backoff = backoff == .zero ? .milliseconds(250) : min(backoff * 2, .seconds(5))
                    retryAt = ContinuousClock.now + backoff
                }
                continue
            }
            do throws(StoreError) {
                let notes = try l.wait(millis: 250)
                var hints: [String: Int64] = [:]
                let own = ownBackend.value
                for n in notes where n.senderPID != own || own == 0 {
                    for h in PostgresListener.hints(n.payload) { hints[h.ride] = max(hints[h.ride] ?? 0, h.seq) }
                }
                if !hints.isEmpty { wake(hints, false) }
            } catch {
                lost(error, &listener, &backoff, &retryAt)
            }
        }
        listener?.close()
        stopped.signal()
    }

    private func lost(_ error: StoreError, _ listener: inout PostgresListener?, _ backoff: inout Duration,
                      _ retryAt: inout ContinuousClock.Instant) {
        log(true, "cluster feed: \(error.message); reconnecting")
        health.down(error.message)
        listener?.close()
        listener = nil
        backoff = .milliseconds(250)
        retryAt = ContinuousClock.now + backoff
    }

    /// Sleeps in slices so `stop` is not kept waiting by a long backoff.
    private func pause(_ d: Duration) {
        let until = ContinuousClock.now + d
        while !stopping.load(ordering: .relaxed) && ContinuousClock.now < until {
            Thread.sleep(forTimeInterval: 0.05)
        }
    }
}

extension PostgresClusterFeed: ClusterFeed {
    package var reconnectCount: Int { reconnects.load(ordering: .relaxed) }
}

extension PostgresStore: ClusterFeedSource {
    public func clusterFeed(log: @escaping @Sendable (_ warning: Bool, _ message: String) -> Void,
                            wake: @escaping @Sendable (_ hints: [String: Int64], _ catchUp: Bool) -> Void) -> any ClusterFeed {
        PostgresClusterFeed(settings: settings, ownBackend: ownBackend, log: log, wake: wake)
    }
}
