import Glibc

/// Which service thread the calling thread is (-1 for any other), for the ownership checks of
/// the lws callback (LwsCallback.swift) and of a ride's per-thread slots (LiveRide.swift).
package enum ServiceThread {
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()

    /// Called once by each service thread when it starts.
    package static func enter(_ index: Int) { pthread_setspecific(key, UnsafeRawPointer(bitPattern: index + 1)) }

    package static var current: Int { Int(bitPattern: pthread_getspecific(key)) - 1 }
}
