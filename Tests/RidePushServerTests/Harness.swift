@testable import RideService
import CLibWebSockets
import RideCore
import RideStore
import Synchronization
@testable import RidePushServer

/// Jobs queued by the registry, run by the test by hand (no worker thread).
final class JobQueue: StoreJobSink {
    let jobs = Mutex<[StoreJob]>([])
    func submit(_ js: [StoreJob]) { jobs.withLock { $0 += js } }
    func take() -> [StoreJob] { jobs.withLock { j in defer { j = [] }; return j } }
}

/// A store whose commits can be made to fail as a whole, and which counts them.
final class FlakyStore: RideStore {
    let inner = MemoryStore()
    var failNext: StoreError?
    var commits: [[StoreWrite]] = []
    /// Runs before each commit: another node's write landing between a group's reads and its commit.
    var beforeCommit: (() -> Void)?
    func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        if let e = failNext { failNext = nil; throw e }
        beforeCommit?()
        commits.append(batch)
        return try inner.commit(batch)
    }
    func openRides() throws(StoreError) -> [StoredRide] { try inner.openRides() }
    func ride(_ id: String) throws(StoreError) -> StoredRide? { try inner.ride(id) }
    func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? { try inner.trace(ride) }
    func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? { try inner.reply(for: key) }
    func prune(repliesBefore instant: UnixMillis) throws(StoreError) { try inner.prune(repliesBefore: instant) }
    func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        try inner.purgeEnded(before: instant, limit: limit)
    }
    func rides(_ page: RidePage, limit: Int) throws(StoreError) -> [StoredRide] { try inner.rides(page, limit: limit) }
    func close() { inner.close() }
}

/// The registry and the store worker's coordinator on the test thread: `run` does what one
/// turn of the worker does (decide the queued group, commit it once, publish and answer).
final class Harness {
    let clock: ManualClock
    let store = FlakyStore()
    let registry: RideRegistry
    var coordinator: StoreCoordinator!
    let queue = JobQueue()
    /// What the coordinator handed each of the two service threads.
    var events: [[ShardEvent]] = [[], []]
    let pre = Int(clws_pre())
    /// Groups whose outbox rows were reported durable (the sender's pokes).
    var eventPokes = 0

    /// `shared`: the store is shared with other nodes (as PostgreSQL is), which the test plays
    /// by writing to `store.inner` itself.
    init(_ clock: ManualClock, plans: [FarePlan] = [.standard], ops: OpsFeed? = nil, maxOpenRides: Int = 0, webhooks: [String] = [],
         shared: Bool = false) {
        self.clock = clock
        registry = RideRegistry(plans: plans, shards: 2, clock: clock, metrics: Metrics(), ops: ops, pre: Int(clws_pre()))
        coordinator = StoreCoordinator(book: RideBook(plans: plans), registry: registry, clock: clock, metrics: Metrics(),
                                       cluster: shared ? ClusterCatchUp(cursor: JournalCursor(txid: 0, position: 0)) : nil,
                                       maxOpenRides: maxOpenRides, webhooks: webhooks,
                                       eventsCommitted: { [unowned self] in eventPokes += 1 }) {
            [unowned self] i, e in events[i] += e
        }
    }

    /// What the service threads hand the store worker (Hub.submit), queued for `run`.
    func submit(_ job: StoreJob) { queue.submit([job]) }

    func run() {
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
    func request(_ r: RideBook.Request, id: String? = nil, scope: String = "") -> (reply: [UInt8]?, pushes: [[UInt8]]) {
        events = [[], []]
        submit(.request(r, id: id, scope: scope, access: nil, from: Requester(shard: 0, session: 1)))
        run()
        return (replies(to: 1).first, pushes(1))
    }

    func replies(to session: UInt64, shard: Int = 0) -> [[UInt8]] {
        events[shard].compactMap { if case .reply(session, let f, _) = $0 { return f } else { return nil } }
    }

    func pushes(_ shard: Int) -> [[UInt8]] {
        events[shard].compactMap { if case .push(_, let f, _) = $0 { return f } else { return nil } }
    }

    /// Counts a subscriber on ride `id` (as a session's subscribe does): only watched rides'
    /// ticks are encoded.
    func watch(_ id: String) {
        registry.find(id)!.subscriberCount.wrappingAdd(1, ordering: .relaxed)
    }

    /// One tick: encodes, runs the auto-ends it noticed through the worker's turn, and returns
    /// the batch and every push (warnings first, then committed ends) for thread 0.
    func tick(seq: Int64, at: UnixMillis) -> (TickBatch, [(LiveRide, [UInt8])]) {
        events = [[], []]
        let (batch, warnings, ends) = registry.tick(seq: seq, at: at) { _, _ in }
        queue.submit(ends)
        run()
        let ended = events[0].compactMap { e -> (LiveRide, [UInt8])? in
            if case .push(let l, let f, _) = e { return (l, f) } else { return nil }
        }
        return (batch, warnings + ended)
    }

    func json(_ frame: [UInt8]) -> JSON { try! JSON.parse(Array(frame[pre...])) }
}
