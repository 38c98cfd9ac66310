import Foundation
import Synchronization

/// What a store worker runs, on its thread only: turns a group of queued jobs into writes
/// (deciding them; it may read the store), then hears how the commit went.
public protocol GroupCommitClient: AnyObject {
    associatedtype Job: Sendable
    /// The writes for `jobs`, in order. Called on the worker thread.
    func prepare(_ jobs: [Job], store: RideStore) -> [StoreWrite]
    /// The outcome of committing what `prepare` returned: per-write results, or the error that
    /// kept the whole group from committing (`.unavailable`). Called on the worker thread.
    func finish(_ outcome: Result<[WriteResult], StoreError>, store: RideStore)
}

/// The one thread that drives a store, with group commit: jobs are queued from any thread;
/// the worker takes everything queued, has the client decide it, and commits it as one
/// transaction. Whatever arrives while a commit is in flight goes into the next one, so under
/// load many requests share one fsync (the technique of PostgreSQL's and SQLite's WAL users).
///
/// A `.commitFailed` error stops the process through `fatal`: the fate of that transaction is
/// unknown, and only a restart reading the file can tell what is durable.
public final class StoreWorker<Client: GroupCommitClient>: @unchecked Sendable {  // `queue` is guarded by `wake`; store and client are touched only by the worker thread
    private let store: RideStore
    private let client: Client
    private let faults: StoreFaults
    private let fatal: @Sendable (StoreError) -> Void
    private let wake = NSCondition()
    private var queue: [Client.Job] = []
    private var stopping = false
    private let stopped = DispatchSemaphore(value: 0)
    /// Most jobs in one group: bounds one commit's duration (and so every reply's wait).
    public let maxGroup: Int

    /// Transactions committed with at least one write (one fsync each on SQLite).
    public let commits = Atomic<Int>(0)
    /// Writes committed (or refused one by one) in them.
    public let writes = Atomic<Int>(0)
    /// Jobs waiting (for /healthz and tests).
    public var queued: Int { wake.lock(); defer { wake.unlock() }; return queue.count }

    public init(store: RideStore, client: Client, faults: StoreFaults = StoreFaults(), maxGroup: Int = 4096,
                fatal: @escaping @Sendable (StoreError) -> Void) {
        self.store = store
        self.client = client
        self.faults = faults
        self.maxGroup = maxGroup
        self.fatal = fatal
    }

    /// Starts the worker thread.
    public func start() {
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

    /// Finishes what is queued, closes the store, then stops the thread and returns.
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
            let batch = client.prepare(jobs, store: store)
            if batch.isEmpty {
                client.finish(.success([]), store: store)
                continue
            }
            faults.beforeCommit()
            do throws(StoreError) {
                if faults.commitFails() { throw StoreError(.commitFailed, "injected I/O error at COMMIT (RIDEPUSH_TEST_FAIL_COMMITS_WHILE)") }
                let results = try store.commit(batch)
                commits.add(1, ordering: .relaxed)
                writes.add(batch.count, ordering: .relaxed)
                client.finish(.success(results), store: store)
            } catch {
                if error.kind == .commitFailed {
                    fatal(error)
                    return
                }
                client.finish(.failure(error), store: store)
            }
        }
        store.close()
        stopped.signal()
    }
}

/// Fault points for tests, all off unless asked for through the environment.
public struct StoreFaults: Sendable {
    /// While this file exists, every commit waits before it starts (a disk that stalls).
    public var stallWhileFileExists: String?
    /// While this file exists, a commit fails as an I/O error at COMMIT would (fate unknown).
    public var failWhileFileExists: String?

    public init(stallWhileFileExists: String? = nil, failWhileFileExists: String? = nil) {
        self.stallWhileFileExists = stallWhileFileExists
        self.failWhileFileExists = failWhileFileExists
    }

    /// `RIDEPUSH_TEST_STALL_COMMITS_WHILE=<path>`, `RIDEPUSH_TEST_FAIL_COMMITS_WHILE=<path>`
    /// (tests only; unset in any deployment).
    public static func fromEnvironment() -> StoreFaults {
        let env = ProcessInfo.processInfo.environment
        return StoreFaults(stallWhileFileExists: env["RIDEPUSH_TEST_STALL_COMMITS_WHILE"],
                           failWhileFileExists: env["RIDEPUSH_TEST_FAIL_COMMITS_WHILE"])
    }

    func beforeCommit() {
        guard let path = stallWhileFileExists else { return }
        while access(path, F_OK) == 0 { usleep(2_000) }
    }

    func commitFails() -> Bool {
        guard let path = failWhileFileExists else { return false }
        return access(path, F_OK) == 0
    }
}
