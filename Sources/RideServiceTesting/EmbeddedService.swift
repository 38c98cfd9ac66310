import RideCore
import RideService
import RideStore
import RideStoreTesting
import RideWebhooks
import Synchronization

/// Jobs queued by the registry, run by the test by hand (no worker thread).
package final class JobQueue: StoreJobSink {
    package let jobs = Mutex<[StoreJob]>([])
    package init() {}
    package func submit(_ js: [StoreJob]) { jobs.withLock { $0 += js } }
    package func take() -> [StoreJob] { jobs.withLock { j in defer { j = [] }; return j } }
}

/// The ride service driven as the adapter and the store worker drive it, on the test's thread
/// and a manual clock, with no lws and no socket (in the manner of swift-nio's
/// EmbeddedChannel): requests and ticks in, each service thread's events out. `run` does what
/// one turn of the worker does (decide the queued group, commit it once, publish and answer,
/// and decide again what the store said was decided on a stale view).
package final class EmbeddedService {
    package let clock: ManualClock
    package let store = FlakyStore()
    package let registry: RideRegistry
    package var coordinator: StoreCoordinator!
    package let queue = JobQueue()
    /// What the coordinator handed each of the two service threads.
    package var events: [[ShardEvent]] = [[], []]
    /// The socket layer's headroom in front of every frame: lws's LWS_PRE on this build; the
    /// service only ever carries the number it is handed.
    package static let headroom = 16
    package let pre = EmbeddedService.headroom
    /// Groups whose outbox rows were reported durable (the sender's pokes).
    package var eventPokes = 0

    /// `shared`: the store is shared with other nodes (as PostgreSQL is), which the test plays
    /// by writing to `store.inner` itself.
    package init(_ clock: ManualClock, plans: [FarePlan] = [.standard], ops: OpsFeed? = nil, maxOpenRides: Int = 0, webhooks: [String] = [],
         shared: Bool = false) {
        self.clock = clock
        registry = RideRegistry(plans: plans, shards: 2, clock: clock, metrics: Metrics(), ops: ops, pre: EmbeddedService.headroom)
        coordinator = StoreCoordinator(book: RideBook(plans: plans), registry: registry, clock: clock, metrics: Metrics(),
                                       cluster: shared ? ClusterCatchUp(cursor: JournalCursor(txid: 0, position: 0)) : nil,
                                       maxOpenRides: maxOpenRides, webhooks: WebhookRoster(webhooks.map { WebhookEndpoint(url: $0) }),
                                       eventsCommitted: { [unowned self] in eventPokes += 1 }) {
            [unowned self] i, e in events[i] += e
        }
    }

    /// What the service threads hand the store worker (RideServer.submit), queued for `run`.
    package func submit(_ job: StoreJob) { queue.submit([job]) }

    package func run() {
        let jobs = queue.take()
        let writes = coordinator.prepare(jobs, store: store)
        if writes.isEmpty {
            coordinator.publish(coordinator.finish(.success([]), store: store))
        } else {
            do throws(StoreError) {
                coordinator.publish(coordinator.finish(.success(try store.commit(writes)), store: store))
            } catch {
                coordinator.publish(coordinator.finish(.failure(error), store: store))
            }
        }
        // As the worker does: what is to be decided again goes first, in the next group.
        let again = coordinator.decideAgain()
        if !again.isEmpty {
            queue.jobs.withLock { $0.insert(contentsOf: again, at: 0) }
            run()
        }
    }

    /// Submits one request from session 1 on thread 0, runs the worker's turn, and returns the
    /// reply to it and the pushes thread 1 got.
    @discardableResult
    package func request(_ r: RideBook.Request, id: String? = nil, scope: String = "") -> (reply: [UInt8]?, pushes: [[UInt8]]) {
        events = [[], []]
        submit(.request(r, id: id, scope: scope, access: nil, from: Requester(shard: 0, session: 1)))
        run()
        return (replies(to: 1).first, pushes(1))
    }

    package func replies(to session: UInt64, shard: Int = 0) -> [[UInt8]] {
        events[shard].compactMap { if case .reply(session, let f, _) = $0 { return f } else { return nil } }
    }

    package func pushes(_ shard: Int) -> [[UInt8]] {
        events[shard].compactMap { if case .push(_, let f, _) = $0 { return f } else { return nil } }
    }

    /// Counts a subscriber on ride `id` (as a session's subscribe does): only watched rides'
    /// ticks are encoded.
    package func watch(_ id: String) {
        registry.find(id)!.subscriberCount.wrappingAdd(1, ordering: .relaxed)
    }

    /// One tick: encodes, runs the auto-ends it noticed through the worker's turn, and returns
    /// the batch and every push (warnings first, then committed ends) for thread 0.
    package func tick(seq: Int64, at: UnixMillis) -> (TickBatch, [(LiveRide, [UInt8])]) {
        events = [[], []]
        let (batch, warnings, ends) = registry.tick(seq: seq, at: at) { _, _ in }
        queue.submit(ends)
        run()
        let ended = events[0].compactMap { e -> (LiveRide, [UInt8])? in
            if case .push(let l, let f, _) = e { return (l, f) } else { return nil }
        }
        return (batch, warnings + ended)
    }

    package func json(_ frame: [UInt8]) -> JSON { try! JSON.parse(Array(frame[pre...])) }
}
