/// When to hand freed heap back to the kernel. glibc keeps what a crowd of connections freed
/// in its per-thread arenas: after 4,000 connections came and went the soak measured RSS 22 %
/// over its baseline, and malloc_trim(0) brought it back to 2 % (BENCHMARKS.md, soak). So once
/// the connections have fallen to half of their peak, and by at least `minimumDrop`, it is
/// time; a steady churn around one level never trims.
package struct HeapTrimPolicy {
    package init() {}

    /// Connections at the peak since the last trim.
    package private(set) var peak = 0
    static let minimumDrop = 500

    /// `connections` now; true: trim now (and the peak starts again from here).
    package mutating func observe(_ connections: Int) -> Bool {
        peak = max(peak, connections)
        guard peak - connections >= Self.minimumDrop, connections <= peak / 2 else { return false }
        peak = connections
        return true
    }
}
