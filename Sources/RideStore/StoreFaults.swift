import Foundation

/// Where a test may stall or fail the store worker: before a group's commit, before a log
/// sync, and the commit or sync itself. The worker holds none in a deployment. Called on the
/// worker thread (commit) and the sync thread (sync).
public protocol StoreFaultInjection: Sendable {
    /// May block: a disk that stalls before the commit starts.
    func beforeCommit()
    /// May block: a log sync that stalls before it starts.
    func beforeSync()
    /// An error to throw instead of committing (`.commitFailed`: an I/O error at COMMIT).
    func commitFailure() -> StoreError?
    /// An error to throw instead of syncing (`.commitFailed`: a failed fsync).
    func syncFailure() -> StoreError?
}

/// The faults the integration tests ask the real binary for through the environment. Only
/// debug builds read it: `ridepush` cannot depend on RideStoreTesting in debug builds alone
/// (SwiftPM has no per-configuration dependency), and tests/test_core.py needs these in the
/// binary it runs. A release build compiles `fromEnvironment` to `nil`.
public enum StoreFaults {
    /// `RIDEPUSH_TEST_STALL_COMMITS_WHILE=<path>`, `RIDEPUSH_TEST_FAIL_COMMITS_WHILE=<path>`,
    /// `RIDEPUSH_TEST_STALL_SYNCS_WHILE=<path>`, `RIDEPUSH_TEST_FAIL_SYNCS_WHILE=<path>`:
    /// while the file exists, commits (syncs) wait or fail. Nil when none is set, and always
    /// in release builds.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> (any StoreFaultInjection)? {
        #if DEBUG
        let f = FileGatedFaults(stallCommits: env["RIDEPUSH_TEST_STALL_COMMITS_WHILE"],
                                failCommits: env["RIDEPUSH_TEST_FAIL_COMMITS_WHILE"],
                                stallSyncs: env["RIDEPUSH_TEST_STALL_SYNCS_WHILE"],
                                failSyncs: env["RIDEPUSH_TEST_FAIL_SYNCS_WHILE"])
        return [f.stallCommits, f.failCommits, f.stallSyncs, f.failSyncs].allSatisfy { $0 == nil } ? nil : f
        #else
        return nil
        #endif
    }
}

#if DEBUG
/// Faults switched by the existence of files, so a test process steers a server process.
struct FileGatedFaults: StoreFaultInjection {
    let stallCommits: String?
    let failCommits: String?
    let stallSyncs: String?
    let failSyncs: String?

    func beforeCommit() { Self.wait(while: stallCommits) }
    func beforeSync() { Self.wait(while: stallSyncs) }
    func commitFailure() -> StoreError? {
        Self.exists(failCommits) ? StoreError(.commitFailed, "injected I/O error at COMMIT (RIDEPUSH_TEST_FAIL_COMMITS_WHILE)") : nil
    }
    func syncFailure() -> StoreError? {
        Self.exists(failSyncs) ? StoreError(.commitFailed, "injected fsync error (RIDEPUSH_TEST_FAIL_SYNCS_WHILE)") : nil
    }

    private static func wait(while path: String?) {
        while exists(path) { usleep(2_000) }
    }

    private static func exists(_ path: String?) -> Bool {
        guard let path else { return false }
        return access(path, F_OK) == 0
    }
}
#endif
