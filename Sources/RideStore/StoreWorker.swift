import Foundation
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
public final class StoreWorker<Client: GroupCommitClient>: @unchecked Sendable {  // `queue`/`stopping` are guarded by `wake`, `handed`/`syncQuit` by `syncWake`; the worker thread alone calls prepare/finish and the store, publish runs on one thread at a time (see GroupCommitClient)
    private let store: RideStore
    private let deferring: LogSyncing?
    private let client: Client
    private let faults: StoreFaults
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

    public init(store: RideStore, client: Client, faults: StoreFaults = StoreFaults(), maxGroup: Int = 4096,
                fatal: @escaping @Sendable (StoreError) -> Void) {
        self.store = store
        deferring = store as? LogSyncing
        self.client = client
        self.faults = faults
        self.maxGroup = maxGroup
        self.fatal = fatal
    }

    /// Starts the worker thread (and the sync thread, for a store that defers its sync).
    public func start() {
        if let sync = deferring?.logSync {
            let s = Thread { [self] in syncLoop(sync) }
            s.name = "ride-store-sync"
            s.start()
        } else {
            syncStopped.signal()
        }
        let t = Thread { [self] in run() }
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

    private func take() -> [Client.Job]? {
        wake.lock()
        defer { wake.unlock() }
        while queue.isEmpty && !stopping { wake.wait() }
        if queue.isEmpty { return nil }
        if queue.count <= maxGroup {
            let jobs = queue
            queue.removeAll(keepingCapacity: true)
            return jobs
        }
        let jobs = Array(queue.prefix(maxGroup))
        queue.removeFirst(maxGroup)
        return jobs
    }

    private func run() {
        while let jobs = take() {
            guard commitGroup(jobs) else { return }
        }
        syncWake.lock()
        syncQuit = true
        syncWake.signal()
        syncWake.unlock()
        syncStopped.wait()
        store.close()
        stopped.signal()
    }

    /// Decides and writes one group; false when the process must stop (fate unknown).
    private func commitGroup(_ jobs: [Client.Job]) -> Bool {
        let batch = client.prepare(jobs, store: store)
        guard !batch.isEmpty else {
            settled(client.finish(.success([]), store: store), wrote: false)
            return true
        }
        faults.beforeCommit()
        do throws(StoreError) {
            if faults.commitFails() { throw StoreError(.commitFailed, "injected I/O error at COMMIT (RIDEPUSH_TEST_FAIL_COMMITS_WHILE)") }
            let results: [WriteResult]
            if let deferring { results = try deferring.commitUnsynced(batch) } else { results = try store.commit(batch) }
            commits.add(1, ordering: .relaxed)
            writes.add(batch.count, ordering: .relaxed)
            settled(client.finish(.success(results), store: store), wrote: true)
        } catch {
            if error.kind == .commitFailed {
                fatal(error)
                return false
            }
            settled(client.finish(.failure(error), store: store), wrote: false)
        }
        return true
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

    private func syncLoop(_ sync: @Sendable () throws(StoreError) -> Void) {
        while true {
            syncWake.lock()
            while handed.isEmpty && !syncQuit { syncWake.wait() }
            let groups = handed
            handed.removeAll(keepingCapacity: true)
            syncWake.unlock()
            if groups.isEmpty { break }
            if groups.contains(where: \.wrote) {
                faults.beforeSync()
                do throws(StoreError) {
                    if faults.syncFails() { throw StoreError(.commitFailed, "injected fsync error (RIDEPUSH_TEST_FAIL_SYNCS_WHILE)") }
                    try sync()
                    syncs.add(1, ordering: .relaxed)
                } catch {
                    fatal(error)
                    return
                }
            }
            for g in groups { client.publish(g.group) }
        }
        syncStopped.signal()
    }
}

/// Fault points for tests, all off unless asked for through the environment.
public struct StoreFaults: Sendable {
    /// While this file exists, every commit waits before it starts (a disk that stalls).
    public var stallWhileFileExists: String?
    /// While this file exists, a commit fails as an I/O error at COMMIT would (fate unknown).
    public var failWhileFileExists: String?
    /// While this file exists, the log sync waits before it starts (a slow fsync).
    public var stallSyncWhileFileExists: String?
    /// While this file exists, the log sync fails as a failed fsync would.
    public var failSyncWhileFileExists: String?

    public init(stallWhileFileExists: String? = nil, failWhileFileExists: String? = nil,
                stallSyncWhileFileExists: String? = nil, failSyncWhileFileExists: String? = nil) {
        self.stallWhileFileExists = stallWhileFileExists
        self.failWhileFileExists = failWhileFileExists
        self.stallSyncWhileFileExists = stallSyncWhileFileExists
        self.failSyncWhileFileExists = failSyncWhileFileExists
    }

    /// `RIDEPUSH_TEST_STALL_COMMITS_WHILE=<path>`, `RIDEPUSH_TEST_FAIL_COMMITS_WHILE=<path>`,
    /// `RIDEPUSH_TEST_STALL_SYNCS_WHILE=<path>`, `RIDEPUSH_TEST_FAIL_SYNCS_WHILE=<path>`
    /// (tests only; unset in any deployment).
    public static func fromEnvironment() -> StoreFaults {
        let env = ProcessInfo.processInfo.environment
        return StoreFaults(stallWhileFileExists: env["RIDEPUSH_TEST_STALL_COMMITS_WHILE"],
                           failWhileFileExists: env["RIDEPUSH_TEST_FAIL_COMMITS_WHILE"],
                           stallSyncWhileFileExists: env["RIDEPUSH_TEST_STALL_SYNCS_WHILE"],
                           failSyncWhileFileExists: env["RIDEPUSH_TEST_FAIL_SYNCS_WHILE"])
    }

    func beforeCommit() { Self.wait(while: stallWhileFileExists) }
    func beforeSync() { Self.wait(while: stallSyncWhileFileExists) }
    func commitFails() -> Bool { Self.exists(failWhileFileExists) }
    func syncFails() -> Bool { Self.exists(failSyncWhileFileExists) }

    private static func wait(while path: String?) {
        while exists(path) { usleep(2_000) }
    }

    private static func exists(_ path: String?) -> Bool {
        guard let path else { return false }
        return access(path, F_OK) == 0
    }
}
