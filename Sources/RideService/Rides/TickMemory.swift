import Glibc

/// The bytes of one tick batch (every ticking ride's tick, back to back), in memory mapped for
/// that batch alone and unmapped when the last thread is done with it. From malloc, a 1.3 MB
/// batch (9,500 rides) stays resident between ticks: glibc raises its mmap threshold past the
/// first batch freed, so later ones come from thread 0's arena and are never given back
/// (0.07 KiB per subscriber of the 19,000 bench); mapped, it is resident only while the tick
/// is fanned out (a few ms a second). Its pages are faulted in up front, as many as the last
/// batch took (`prefault`), rather than one fault per 4 KiB written: ~1.3 ms less CPU in the
/// 14 MB batch of 100,000 watched rides (bench --tick-encode, issue 29).
///
/// Written only while the batch is built (under the registry's lock, before any thread sees
/// it); read-only after.
package final class TickMemory: @unchecked Sendable {  // mutated only by its builder before it is shared
    package private(set) var base: UnsafeMutablePointer<UInt8>
    package private(set) var count = 0
    private(set) var capacity: Int
    /// How many times it outgrew its room (each a copy of everything so far): for tests.
    private(set) var grown = 0
    private var mapped: Bool

    /// Room for about `bytes` (rounded up to whole pages; address space only, until written);
    /// it grows if that was too little. The first `prefault` bytes are backed at once.
    init(reserving bytes: Int, prefault: Int = 0) {
        capacity = Self.pages(max(bytes, 1))
        (base, mapped) = Self.allocate(capacity)
        if mapped && prefault > 0 {
            // Linux 5.14's MADV_POPULATE_WRITE (not in every libc's headers): one call instead of a
            // fault per page. An older kernel says EINVAL and the pages fault in as written.
            _ = madvise(base, min(Self.pages(prefault), capacity), 23)
        }
    }

    deinit { Self.free(base, capacity, mapped) }

    func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        if count + bytes.count > capacity { grow(count + bytes.count) }
        bytes.withUnsafeBufferPointer { (base + count).update(from: $0.baseAddress!, count: $0.count) }
        count += bytes.count
    }

    /// Where the next bytes go, with room for `most` of them: a tick is encoded there in place
    /// (TickFrame), not built in an array of its own and copied in. `wrote(upTo:room:)` then
    /// says where it stopped.
    @inline(__always)
    func room(_ most: Int) -> UnsafeMutablePointer<UInt8> {
        if count + most > capacity { grow(count + most) }
        return base + count
    }

    /// Takes in what was written since `room(most)`, up to `end`.
    @inline(__always)
    func wrote(upTo end: UnsafeMutablePointer<UInt8>, room most: Int) {
        let n = end - (base + count)
        precondition(n >= 0 && n <= most, "wrote \(n) bytes in room for \(most)")
        count += n
    }

    private func grow(_ needed: Int) {
        let bigger = Self.pages(max(capacity * 2, needed))
        let (p, m) = Self.allocate(bigger)
        p.update(from: base, count: count)
        Self.free(base, capacity, mapped)
        (base, capacity, mapped) = (p, bigger, m)
        grown += 1
    }

    private static func pages(_ n: Int) -> Int { (n + 4095) & ~4095 }

    private static func allocate(_ n: Int) -> (UnsafeMutablePointer<UInt8>, mapped: Bool) {
        let p = mmap(nil, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if let p, p != MAP_FAILED { return (p.assumingMemoryBound(to: UInt8.self), true) }
        return (.allocate(capacity: n), false)  // no mapping to be had: the heap still works
    }

    private static func free(_ p: UnsafeMutablePointer<UInt8>, _ n: Int, _ mapped: Bool) {
        if mapped { munmap(p, n) } else { p.deallocate() }
    }
}
