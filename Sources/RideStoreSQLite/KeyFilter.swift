import RideStore

/// A Bloom filter of the keys a table holds, so a lookup of a key that was never written needs
/// no statement: nearly every request id and every new ride id is one, and the store worker ran
/// one index seek for each (its replies and rides read-ahead). "Absent" is certain; "maybe"
/// means read the table. Keys are added before the statements that write them run, so a write
/// that is rolled back only leaves a false "maybe". Owned by the store's thread.
struct KeyFilter {
    private var words: [UInt64]
    private var mask: UInt64
    /// Keys added since the filter was sized; past `capacity` the false "maybe"s grow, and the
    /// owner rebuilds it from the table (`needsRebuild`).
    private(set) var count = 0
    /// 16 bits and 6 probes per key: about 1 false "maybe" in 1,000 at capacity.
    static let bitsPerKey = 16
    static let probes = 6

    /// Room for `capacity` keys before a rebuild (at least 32,768).
    init(capacity: Int) {
        var bits = 1 << 19
        while bits / Self.bitsPerKey < capacity { bits <<= 1 }
        words = [UInt64](repeating: 0, count: bits / 64)
        mask = UInt64(bits - 1)
    }

    var capacity: Int { words.count * 64 / Self.bitsPerKey }
    var needsRebuild: Bool { count > capacity }

    static func hash(_ key: String) -> UInt64 {
        var h = Hasher()
        h.combine(key)
        return UInt64(bitPattern: Int64(h.finalize()))
    }

    static func hash(_ scope: String, _ id: String) -> UInt64 {
        var h = Hasher()
        h.combine(scope)  // a String hashes with a terminator: ("a", "bc") is not ("ab", "c")
        h.combine(id)
        return UInt64(bitPattern: Int64(h.finalize()))
    }

    mutating func insert(_ hash: UInt64) {
        var p = hash & 0xFFFF_FFFF
        let step = hash >> 32 | 1
        for _ in 0..<Self.probes {
            let b = p & mask
            words[Int(b >> 6)] |= 1 << (b & 63)
            p &+= step
        }
        count += 1
    }

    func mayContain(_ hash: UInt64) -> Bool {
        var p = hash & 0xFFFF_FFFF
        let step = hash >> 32 | 1
        for _ in 0..<Self.probes {
            let b = p & mask
            if words[Int(b >> 6)] & (1 << (b & 63)) == 0 { return false }
            p &+= step
        }
        return true
    }
}
