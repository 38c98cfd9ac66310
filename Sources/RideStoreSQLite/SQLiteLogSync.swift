import Glibc
import RideCore
import RideStore

/// Makes the store's write-ahead log durable from the store worker's sync thread, through a
/// descriptor of its own: fsync works on the file, not the descriptor, so one `fdatasync`
/// covers every frame the writer connection (at `synchronous = NORMAL`, which does not sync
/// at COMMIT) wrote before the call.
///
/// SQLite deletes the log only when the last connection to the file closes, which this
/// store's connections do only at close; a descriptor left on a deleted log would still sync
/// without error and cover nothing, so each sync checks the file is still the one it opened.
final class SQLiteLogSync: Sendable {
    let path: String
    private let fd: Locked<Int32>
    /// The first fdatasync failure, answered by every later sync (written under `fd`'s lock).
    /// The kernel reports a writeback error once per descriptor, and two callers sync here (the
    /// store worker's sync thread, and `SQLitePushTargets` on the worker's): whichever sees it
    /// first must not let the other's next sync succeed over groups whose pages were dropped.
    private let poisoned = Locked<String?>(nil)

    init(logPath: String) throws(StoreError) {
        path = logPath
        let d = open(logPath, O_RDONLY | O_CLOEXEC)
        guard d >= 0 else { throw StoreError(.unavailable, "ride store log \(logPath): cannot open it to sync (\(String(cString: strerror(errno))))") }
        fd = Locked(d)
    }

    deinit { close() }

    func sync() throws(StoreError) {
        let failure: String? = fd.withLock { fd in
            if let earlier = poisoned.withLock({ $0 }) { return "earlier: " + earlier }
            guard fd >= 0 else { return "closed" }
            var mine = stat(), now = stat()
            if fstat(fd, &mine) == 0, stat(path, &now) == 0, mine.st_ino != now.st_ino || mine.st_dev != now.st_dev {
                let d = open(path, O_RDONLY | O_CLOEXEC)
                guard d >= 0 else { return "the log was replaced and cannot be opened again (\(String(cString: strerror(errno))))" }
                Glibc.close(fd)
                fd = d
            }
            // No retry: after a failed fsync the kernel may already have dropped the pages it
            // could not write, so a second fsync that succeeds would prove nothing.
            if fdatasync(fd) == 0 { return nil }
            let why = String(cString: strerror(errno))
            poisoned.withLock { $0 = why }
            return why
        }
        if let failure {
            throw StoreError(.commitFailed, "ride store log \(path): fdatasync failed (\(failure)); whether the last groups of transitions are on disk is unknown")
        }
    }

    func close() {
        fd.withLock { fd in
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }
    }
}
