import Foundation
import Glibc
import Synchronization

/// When to hand freed heap back to the kernel. glibc keeps what a crowd of connections freed
/// in its per-thread arenas: after 4,000 connections came and went the soak measured RSS 22 %
/// over its baseline, and malloc_trim(0) brought it back to 2 % (BENCHMARKS.md, soak). So once
/// the connections have fallen to half of their peak, and by at least `minimumDrop`, it is
/// time; a steady churn around one level never trims.
package struct HeapTrimPolicy {
    /// Connections at the peak since the last trim.
    private(set) var peak = 0
    static let minimumDrop = 500

    /// `connections` now; true: trim now (and the peak starts again from here).
    mutating func observe(_ connections: Int) -> Bool {
        peak = max(peak, connections)
        guard peak - connections >= Self.minimumDrop, connections <= peak / 2 else { return false }
        peak = connections
        return true
    }
}

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
