import Glibc

/// A value behind a pthread mutex, for state several threads share. Used instead of
/// Synchronization.Mutex because ThreadSanitizer does not see that one's lock on Linux and
/// reports every value it guards as a race (checked: two threads bumping a Mutex-guarded
/// counter are reported; the same under a pthread mutex are not), which would hide real ones.
public final class Locked<Value>: @unchecked Sendable {  // `value` is only reached inside `withLock`, with `mutex` held
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` if the lock is free now; nil if another holder (or this thread) has it.
    public func withLockIfAvailable<R>(_ body: (inout Value) throws -> R) rethrows -> R? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
