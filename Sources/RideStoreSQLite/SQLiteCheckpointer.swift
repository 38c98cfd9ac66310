import CSQLite
import Foundation
import RideStore
import Synchronization

/// Copies the WAL back into the database file on its own thread and connection, so the store
/// worker (the only writer) never pays for it. SQLite's default runs that checkpoint inside
/// whichever COMMIT crosses 1,000 log pages: on the worker, a pause of every reply behind it
/// and, under load, a third of the worker's time spent reading and rewriting pages.
///
/// A PASSIVE checkpoint never blocks the writer. But the log restarts from its beginning only
/// when a writer begins a transaction with every frame already copied, and under steady load
/// the writer always commits new frames while the helper copies. So the helper copies the
/// bulk, and the writer copies the last few frames itself (`writerShouldFinish`), cheaply,
/// right before its next transaction restarts the log. Past `hardCap` pages (a helper that
/// fell behind, a slow disk) the writer checkpoints whatever is left, so the log stays bounded.
final class SQLiteCheckpointer: @unchecked Sendable {  // `pending`/`stopping` are guarded by `wake`; `db` is touched only by the checkpoint thread
    /// Log pages that wake the helper: 4x SQLite's own autocheckpoint threshold, because a
    /// longer log lets one copy write a page many commits changed once (the tails of the
    /// B-trees): 17 % fewer bytes written per transition, measured with the transition bench.
    static let threshold: Int32 = 4_000
    /// Log pages past which the writer checkpoints inline (64 MiB of 4 KiB pages).
    static let hardCap: Int32 = 16_384
    /// Frames left uncopied that the writer copies itself to let the log restart.
    static let writerShare: Int32 = 256

    private let db: SQLiteConnection
    private let wake = NSCondition()
    private var pending = false
    private var stopping = false
    private let stopped = DispatchSemaphore(value: 0)
    /// Checkpoints run by the helper, and those that failed (retried at the next wake).
    let runs = Atomic<Int>(0)
    let failures = Atomic<Int>(0)
    /// Times the log started again from its beginning (seen by the writer's hook).
    let restarts = Atomic<Int>(0)
    private let last = Atomic<Int32>(0)
    /// Frames of the current log the helper has copied (its last checkpoint's count).
    private let copied = Atomic<Int32>(0)

    init(path: String) throws(StoreError) {
        db = try SQLiteConnection(path: path)
        do throws(StoreError) {
            try db.exec("PRAGMA busy_timeout = 1000")
            // Explicit because the writer runs at NORMAL: a checkpoint syncs the log before copying
            // it into the file and the file before the log may restart (at NORMAL and above).
            try db.exec("PRAGMA synchronous = FULL")
            // A connection finds the file in WAL mode only once it reads it; until then a
            // checkpoint on it does nothing (and reports -1).
            guard try db.scalarText("PRAGMA journal_mode")?.lowercased() == "wal" else {
                throw StoreError(.unavailable, "ride store \(path): not in WAL mode for the checkpoint connection")
            }
        } catch {
            db.close()
            throw error
        }
    }

    func start() {
        let t = Thread { [self] in run() }
        t.name = "ride-checkpoint"
        t.start()
    }

    /// Called by the writer's WAL hook after each commit, on the writer's thread, with the
    /// log's size in frames: whether the writer should copy the rest itself now.
    func logGrew(to pages: Int32) -> Bool {
        let done = copied.load(ordering: .acquiring)
        if pages < last.exchange(pages, ordering: .relaxed) { restarts.add(1, ordering: .relaxed) }
        if pages < done {
            copied.store(0, ordering: .releasing)  // the log restarted since the helper's run
        } else if done > 0 && pages - done <= Self.writerShare {
            return true
        }
        if pages >= Self.hardCap { return true }
        guard pages >= Self.threshold else { return false }
        wake.lock()
        pending = true
        wake.signal()
        wake.unlock()
        return false
    }

    /// After the writer's own checkpoint: the log restarts at its next transaction.
    func writerFinished() {
        copied.store(0, ordering: .releasing)
    }

    func stop() {
        wake.lock()
        stopping = true
        wake.signal()
        wake.unlock()
        stopped.wait()
    }

    private func run() {
        // The store may be opened before the server blocks its signals for its signal thread;
        // a thread that left SIGTERM deliverable would be chosen for it and the process die
        // with no clean close.
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, nil)
        while true {
            wake.lock()
            while !pending && !stopping { wake.wait() }
            let quit = stopping
            pending = false
            wake.unlock()
            if quit { break }
            do throws(StoreError) {
                // `log` may already count frames the writer added meanwhile; `done` is what
                // the file holds now.
                let (_, done) = try db.checkpoint()
                copied.store(done, ordering: .releasing)
                runs.add(1, ordering: .relaxed)
            } catch {
                // Nothing is lost: the frames stay in the log, and the next wake retries.
                failures.add(1, ordering: .relaxed)
            }
        }
        db.close()
        stopped.signal()
    }
}
