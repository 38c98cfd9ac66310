import Foundation
import Glibc
import RideService
import Synchronization

/// Looks at the connection count every 2 s on its own thread, so a trim (a few ms of
/// madvise over the arenas) never runs on a service thread or the ticker.
package final class HeapTrimmer: Sendable {
    /// The open connections now, summed over the service threads (the adapter counts them).
    private let connections: @Sendable () -> Int
    /// Hands the freed heap back (malloc_trim(0), which the adapter's C headers declare).
    private let trim: @Sendable () -> Void
    private let stopped = Atomic<Bool>(false)

    package init(connections: @escaping @Sendable () -> Int, trim: @escaping @Sendable () -> Void) {
        self.connections = connections
        self.trim = trim
    }

    package func start() {
        let t = Thread { [self] in
            var policy = HeapTrimPolicy()
            while !stopped.load(ordering: .relaxed) {
                Thread.sleep(forTimeInterval: 2)
                let n = connections()
                if policy.observe(n) { trim() }
            }
        }
        t.name = "heap-trim"
        t.start()
    }

    package func stop() { stopped.store(true, ordering: .relaxed) }
}
