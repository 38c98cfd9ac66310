import Foundation
import Synchronization

/// What a store worker runs, on its thread only: turns a group of queued jobs into writes
/// (deciding them; it may read the store), hears how the commit went, and once the group is
/// durable tells everyone.
public protocol GroupCommitClient: AnyObject {
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
    /// `group` and every group before it are durable: tell everyone. Called on the worker
    /// thread, once per group, in commit order, between groups.
    func publish(_ group: Group)
}

/// The one thread that drives a store, with group commit: jobs are queued from any thread;
/// the worker takes everything queued, has the client decide it, and commits it as one
/// transaction. Whatever arrives while a commit is in flight goes into the next one, so under
/// load many requests share one fsync (the technique of PostgreSQL's and SQLite's WAL users).
///
/// With a store that can defer its sync (`LogSyncing`), the fsync runs on a second thread:
/// the worker writes a group, hands the sync over and goes on deciding and writing the next
/// groups while the disk works; when the sync returns, every group written before it began is
/// published, in order. One sync is in flight at a time and covers everything written before
/// it, so a slow disk makes groups bigger, never the worker idle.
///
/// A `.commitFailed` error (at COMMIT or at the sync) stops the process through `fatal`: the
/// fate of those transactions is unknown, and only a restart reading the file can tell what is
/// durable. Nobody has been told about them.
public final class StoreWorker<Client: GroupCommitClient>: @unchecked Sendable {  // `queue`, `stopping`, `syncDone` are guarded by `wake`, `syncAsked`/`syncQuit` by `syncWake`; store, client and the group lists are touched only by the worker thread
    private let store: RideStore
    private let deferring: LogSyncing?
    private let client: Client
    private let faults: StoreFaults
    private let fatal: @Sendable (StoreError) -> Void
    private let wake = NSCondition()
    private var queue: [Client.Job] = []
    private var stopping = false
    private var syncDone: Result<Void, StoreError>?
    private let syncWake = NSCondition()
    private var syncAsked = false
    private var syncQuit = false
    private let syncStopped = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    /// Written groups no sync has begun for, and those the sync in flight covers.
    private var written: [Client.Group] = []
    private var syncing: [Client.Group] = []
    private var syncInFlight = false
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

    private func run() {
        while true {
            wake.lock()
            while queue.isEmpty && syncDone == nil && !(stopping && !syncInFlight) { wake.wait() }
            let jobs = takeLocked()
            let done = syncDone
            syncDone = nil
            let quit = stopping && jobs.isEmpty && !syncInFlight && written.isEmpty
            wake.unlock()
            if let done {
                syncInFlight = false
                if case .failure(let e) = done {
                    fatal(e)
                    return
                }
                for group in syncing { client.publish(group) }
                syncing.removeAll()
            }
            if quit { break }
            if !jobs.isEmpty, !commitGroup(jobs) { return }
            if !syncInFlight && !written.isEmpty { beginSync() }
        }
        syncWake.lock()
        syncQuit = true
        syncWake.signal()
        syncWake.unlock()
        syncStopped.wait()
        store.close()
        stopped.signal()
    }

    private func takeLocked() -> [Client.Job] {
        if queue.count <= maxGroup {
            let jobs = queue
            queue.removeAll(keepingCapacity: true)
            return jobs
        }
        let jobs = Array(queue.prefix(maxGroup))
        queue.removeFirst(maxGroup)
        return jobs
    }

    /// Decides and writes one group; false when the process must stop (fate unknown).
    private func commitGroup(_ jobs: [Client.Job]) -> Bool {
        let batch = client.prepare(jobs, store: store)
        guard !batch.isEmpty else {
            hold(client.finish(.success([]), store: store), written: false)
            return true
        }
        faults.beforeCommit()
        do throws(StoreError) {
            if faults.commitFails() { throw StoreError(.commitFailed, "injected I/O error at COMMIT (RIDEPUSH_TEST_FAIL_COMMITS_WHILE)") }
            let results: [WriteResult]
            if let deferring { results = try deferring.commitUnsynced(batch) } else { results = try store.commit(batch) }
            commits.add(1, ordering: .relaxed)
            writes.add(batch.count, ordering: .relaxed)
            hold(client.finish(.success(results), store: store), written: deferring != nil)
        } catch {
            if error.kind == .commitFailed {
                fatal(error)
                return false
            }
            hold(client.finish(.failure(error), store: store), written: false)
        }
        return true
    }

    /// Publishes at once what needs no sync and has nothing unpublished before it; everything
    /// else waits its turn behind the next sync (a group that read a not yet durable reply
    /// must not be answered before the group that wrote it).
    private func hold(_ group: Client.Group, written needsSync: Bool) {
        if !needsSync && written.isEmpty && syncing.isEmpty {
            client.publish(group)
        } else {
            written.append(group)
        }
    }

    private func beginSync() {
        syncing = written
        written.removeAll()
        syncInFlight = true
        syncWake.lock()
        syncAsked = true
        syncWake.signal()
        syncWake.unlock()
    }

    private func syncLoop(_ sync: @Sendable () throws(StoreError) -> Void) {
        while true {
            syncWake.lock()
            while !syncAsked && !syncQuit { syncWake.wait() }
            let asked = syncAsked
            syncAsked = false
            syncWake.unlock()
            guard asked else { break }
            faults.beforeSync()
            let result: Result<Void, StoreError>
            do throws(StoreError) {
                if faults.syncFails() { throw StoreError(.commitFailed, "injected fsync error (RIDEPUSH_TEST_FAIL_SYNCS_WHILE)") }
                try sync()
                syncs.add(1, ordering: .relaxed)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            wake.lock()
            syncDone = result
            wake.signal()
            wake.unlock()
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
