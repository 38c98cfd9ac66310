import Foundation
import RideCore
import Synchronization

/// What a store worker runs: turns a group of queued jobs into writes (deciding them; it may
/// read the store), hears how the commit went, and once the group is durable tells everyone.
/// (SendableMetatype: the worker's threads start from closures that capture the worker, and
/// with it its `Client` type.)
public protocol GroupCommitClient: AnyObject, SendableMetatype {
    associatedtype Job: Sendable
    /// What `finish` keeps for `publish`: the group's replies and pushes.
    associatedtype Group
    /// The writes for `jobs`, in order. Called on the worker thread.
    func prepare(_ jobs: [Job], store: RideStore) -> [StoreWrite]
    /// The outcome of committing what `prepare` returned: per-write results, or the error that
    /// kept the whole group from committing (`.unavailable`). The store's state for the group
    /// is final (the next `prepare` decides from it), but it may not be on disk yet: nothing
    /// may be told to anyone here. Called on the worker thread.
    func finish(_ outcome: Result<[WriteResult], StoreError>, store: RideStore) -> Group
    /// `group` and every group before it are durable: tell everyone. Called once per group, in
    /// commit order, one call at a time: on the worker thread, or for a store that syncs apart
    /// (`LogSyncing`) on its sync thread while the worker decides later groups, so it must not
    /// touch what `prepare` and `finish` own.
    func publish(_ group: Group)
    /// Jobs `finish` found decided on a view the store had moved past (another writer
    /// committed first): the worker queues them ahead of everything else, to be decided again
    /// on the store's state. Called on the worker thread after each `finish`.
    func decideAgain() -> [Job]
}

extension GroupCommitClient {
    public func decideAgain() -> [Job] { [] }
}

/// The one thread that drives a store, with group commit: jobs are queued from any thread;
/// the worker takes everything queued, has the client decide it, and commits it as one
/// transaction. Whatever arrives while a commit is in flight goes into the next one, so under
/// load many requests share one fsync (the technique of PostgreSQL's and SQLite's WAL users).
///
/// With a store that can defer its sync (`LogSyncing`), a second thread syncs and publishes:
/// the worker writes a group, hands it over and goes on deciding and writing the next groups
/// while the disk works; the sync thread takes every group handed over since its last turn,
/// makes them durable with one sync, then publishes them in order. So a slow disk makes the
/// groups per sync more, never the worker idle, and nobody hears of a group before its sync.
///
/// A `.commitFailed` error (at COMMIT or at the sync) stops the process through `fatal`: the
/// fate of those transactions is unknown, and only a restart reading the file can tell what is
/// durable. Nobody has been told about them.
///
/// The worker also keeps its store's health (`StoreHealth`): since when a group and a sync have
/// been in flight, and the store's last success and failure. While the store is failing (or
/// says it cannot reach its data) and nothing is queued, the worker probes it on a backoff, so
/// health returns with the store and not with the next client's write.
public final class StoreWorker<Client: GroupCommitClient>: @unchecked Sendable {  // `queue`/`stopping` are guarded by `wake`, `handed`/`syncQuit` by `syncWake`; the worker thread alone calls prepare/finish, the store and its probe (`probeAt`/`probeBackoff`), asserted in debug builds; publish runs on one thread at a time (see GroupCommitClient)
    private let store: RideStore
    private let deferring: LogSyncing?
    private let client: Client
    /// Test-only fault points (RideStoreTesting, or the environment in debug builds); nil in a deployment.
    private let faults: (any StoreFaultInjection)?
    private let fatal: @Sendable (StoreError) -> Void
    private let wake = NSCondition()
    private var queue: [Client.Job] = []
    private var stopping = false
    private let syncWake = NSCondition()
    /// Groups the worker settled and the sync thread has not taken yet, in commit order, each
    /// with whether it wrote anything (a group that wrote nothing needs no sync of its own).
    private var handed: [(group: Client.Group, wrote: Bool)] = []
    private var syncQuit = false
    private let syncStopped = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    /// Most jobs in one group: bounds one commit's duration (and so every reply's wait).
    public let maxGroup: Int

    /// Transactions committed with at least one write.
    public let commits = Atomic<Int>(0)
    /// Writes committed (or refused one by one) in them.
    public let writes = Atomic<Int>(0)
    /// Log syncs done on the sync thread (one fsync each on SQLite).
    public let syncs = Atomic<Int>(0)
    /// Jobs waiting (for /healthz and tests).
    public var queued: Int { wake.lock(); defer { wake.unlock() }; return queue.count }
    /// What /healthz reads: groups and syncs in flight since when, last success and failure.
    public let health: StoreHealth
    /// Probes run by this worker (tests and /metrics).
    public let probes = Atomic<Int>(0)
    /// The first probe of a failing store comes this long after the failure, then doubling up
    /// to `maxProbeMillis`: short enough that /healthz is ok within about a second of the
    /// store's return, long enough that a dead store costs a round trip a second at most.
    public static var firstProbeMillis: Int64 { 250 }
    public static var maxProbeMillis: Int64 { 1_000 }
    /// Worker thread only: when the next probe is due (nil: none, the store is healthy).
    private var probeAt: Int64?
    private var probeBackoff: Int64 = 0
    /// The worker thread, once started: debug builds check the methods only it may run.
    private let workerThread = Locked<pthread_t?>(nil)

    public init(store: RideStore, client: Client, faults: (any StoreFaultInjection)? = nil, maxGroup: Int = 4096,
                health: StoreHealth = StoreHealth(),
                fatal: @escaping @Sendable (StoreError) -> Void) {
        self.store = store
        deferring = store as? LogSyncing
        self.client = client
        self.faults = faults
        self.maxGroup = maxGroup
        self.health = health
        self.fatal = fatal
    }

    /// Debug builds: stops at once when called off the worker thread (GRDB's
    /// `SerializedDatabase` precondition). The store and the client's decide/finish state
    /// belong to that thread alone; a call from elsewhere is a data race waiting to happen.
    @inline(__always) public func assertOnWorkerThread(_ what: @autoclosure () -> String = "", file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        let owner = workerThread.withLock { $0 }
        precondition(owner.map { pthread_equal($0, pthread_self()) != 0 } ?? false,
                     "store worker: \(what()) called off the ride-store thread", file: file, line: line)
        #endif
    }

    /// Starts the worker thread (and the sync thread, for a store that defers its sync). Each
    /// thread holds the worker only while it runs and says it stopped after letting go, so a
    /// worker whose stop() returned is freed with its owner (LeakSanitizer; HubLifetimeTests).
    public func start() {
        if let sync = deferring?.logSync {
            let syncStopped = syncStopped
            let s = Thread { [weak self] in
                if self?.syncLoop(sync) ?? true { syncStopped.signal() }
            }
            s.name = "ride-store-sync"
            s.start()
        } else {
            syncStopped.signal()
        }
        let stopped = stopped
        let t = Thread { [weak self] in
            if self?.run() ?? true { stopped.signal() }
        }
        t.name = "ride-store"
        t.start()
    }

    /// Queues a job; it is decided in the next group. Any thread.
    public func submit(_ job: Client.Job) {
        wake.lock()
        queue.append(job)
        wake.signal()
        wake.unlock()
    }

    /// Has the worker look at its probe schedule now: for tests that step the health clock by
    /// hand instead of waiting for the backoff to pass. Any thread.
    public func nudge() {
        wake.lock()
        wake.signal()
        wake.unlock()
    }

    public func submit(_ jobs: [Client.Job]) {
        guard !jobs.isEmpty else { return }
        wake.lock()
        queue.append(contentsOf: jobs)
        wake.signal()
        wake.unlock()
    }

    /// Finishes what is queued (and publishes it once durable), closes the store, then stops
    /// the threads and returns.
    public func stop() {
        wake.lock()
        stopping = true
        wake.signal()
        wake.unlock()
        stopped.wait()
    }

    /// The next group, or nil once stopping with nothing queued. While the store is failing and
    /// nothing is queued, waits no longer than the next probe and runs it (on this thread: a
    /// probe never races a commit).
    private func take() -> [Client.Job]? {
        while true {
            var due = probeDue()
            if let d = due, d <= 0 {
                probe()
                due = probeDue()
            }
            wake.lock()
            if queue.isEmpty && !stopping {
                if let d = due, d > 0 {
                    _ = wake.wait(until: Date(timeIntervalSinceNow: Double(d) / 1000))
                } else if due == nil {
                    wake.wait()
                }
            }
            if queue.isEmpty {
                let stop = stopping
                wake.unlock()
                if stop { return nil }
                continue
            }
            let jobs: [Client.Job]
            if queue.count <= maxGroup {
                jobs = queue
                queue.removeAll(keepingCapacity: true)
            } else {
                jobs = Array(queue.prefix(maxGroup))
                queue.removeFirst(maxGroup)
            }
            wake.unlock()
            return jobs
        }
    }

    /// Milliseconds until the next probe (≤ 0: due now), nil when the store needs none.
    private func probeDue() -> Int64? {
        assertOnWorkerThread("probeDue")
        let report = health.snapshot
        guard report.failing || !store.reachable else {
            probeAt = nil
            probeBackoff = 0
            return nil
        }
        let now = health.clock()
        if probeAt == nil {
            probeBackoff = Self.firstProbeMillis
            probeAt = (report.failing ? report.lastFailure ?? now : now) + probeBackoff
        }
        return probeAt! - now
    }

    /// One probe of a failing store; on failure the next waits twice as long (to a bound).
    private func probe() {
        assertOnWorkerThread("probe")
        probes.add(1, ordering: .relaxed)
        let began = health.clock()
        // In flight like a group: a probe that hangs (a store that accepts and never answers)
        // is a stall, not a silence.
        health.commitBegan()
        defer { health.commitEnded() }
        do throws(StoreError) {
            try store.probe()
            health.succeeded()
            probeAt = nil
            probeBackoff = 0
        } catch {
            health.failed(error.message)
            probeBackoff = min(probeBackoff * 2, Self.maxProbeMillis)
            probeAt = began + probeBackoff
        }
    }

    /// False when a fatal failure ended it (stop() then never returns: the process is ending).
    private func run() -> Bool {
        workerThread.withLock { $0 = pthread_self() }
        while let jobs = take() {
            guard commitGroup(jobs) else { return false }
        }
        syncWake.lock()
        syncQuit = true
        syncWake.signal()
        syncWake.unlock()
        syncStopped.wait()
        store.close()
        return true
    }

    /// Decides and writes one group; false when the process must stop (fate unknown).
    private func commitGroup(_ jobs: [Client.Job]) -> Bool {
        assertOnWorkerThread("commitGroup")
        defer { requeueFirst(client.decideAgain()) }
        health.commitBegan()
        let batch = client.prepare(jobs, store: store)
        guard !batch.isEmpty else {
            let group = client.finish(.success([]), store: store)
            health.commitEnded()
            settled(group, wrote: false)
            return true
        }
        faults?.beforeCommit()
        do throws(StoreError) {
            if let injected = faults?.commitFailure() { throw injected }
            let results: [WriteResult]
            if let deferring { results = try deferring.commitUnsynced(batch) } else { results = try store.commit(batch) }
            commits.add(1, ordering: .relaxed)
            writes.add(batch.count, ordering: .relaxed)
            health.succeeded()
            let group = client.finish(.success(results), store: store)
            health.commitEnded()
            settled(group, wrote: true)
        } catch {
            if error.kind == .commitFailed {
                fatal(error)
                return false
            }
            health.failed(error.message)
            let group = client.finish(.failure(error), store: store)
            health.commitEnded()
            settled(group, wrote: false)
        }
        return true
    }

    /// Puts `jobs` at the head of the queue, in their order: the next group decides them first.
    private func requeueFirst(_ jobs: [Client.Job]) {
        guard !jobs.isEmpty else { return }
        wake.lock()
        queue.insert(contentsOf: jobs, at: 0)
        wake.unlock()
    }

    /// Publishes at once when the commit was already durable; else hands the group to the sync
    /// thread, in order behind every group before it (one that wrote nothing may still have read
    /// a reply that is not durable yet).
    private func settled(_ group: Client.Group, wrote: Bool) {
        guard deferring != nil else { return client.publish(group) }
        syncWake.lock()
        handed.append((group, wrote))
        syncWake.signal()
        syncWake.unlock()
    }

    /// False when a failed sync ended it (fatal).
    private func syncLoop(_ sync: @Sendable () throws(StoreError) -> Void) -> Bool {
        while true {
            syncWake.lock()
            while handed.isEmpty && !syncQuit { syncWake.wait() }
            let groups = handed
            handed.removeAll(keepingCapacity: true)
            syncWake.unlock()
            if groups.isEmpty { break }
            if groups.contains(where: \.wrote) {
                health.syncBegan()
                faults?.beforeSync()
                do throws(StoreError) {
                    defer { health.syncEnded() }
                    if let injected = faults?.syncFailure() { throw injected }
                    try sync()
                    syncs.add(1, ordering: .relaxed)
                    health.succeeded()
                } catch {
                    fatal(error)
                    return false
                }
            }
            for g in groups { client.publish(g.group) }
        }
        return true
    }
}
