import Glibc

/// Which service thread the calling thread is (-1 for any other), for ownership checks.
enum ServiceThread {
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()

    /// Called once by each service thread when it starts.
    static func enter(_ index: Int) { pthread_setspecific(key, UnsafeRawPointer(bitPattern: index + 1)) }

    static var current: Int { Int(bitPattern: pthread_getspecific(key)) - 1 }
}

/// State that belongs to one service thread. Other threads may hold the wrapper (it travels
/// inside shared objects) but only the owner may reach the value: debug builds check every
/// access (the idea of SwiftNIO's NIOLoopBound), release builds pay nothing.
struct ThreadBound<Value: AnyObject>: @unchecked Sendable {  // `wrapped` is reached only through `value`, which asserts the owning thread
    let owner: Int
    private let wrapped: Value

    init(_ value: Value, owner: Int) {
        wrapped = value
        self.owner = owner
    }

    var value: Value {
        assert(ServiceThread.current == owner, "state of service thread \(owner) touched from thread \(ServiceThread.current)")
        return wrapped
    }
}
