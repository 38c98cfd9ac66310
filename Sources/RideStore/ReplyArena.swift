/// The memory store's recorded replies, kept small. Every reply it records is a `state`
/// message, and two of them differ in a few dozen bytes (ids, instants, figures) out of
/// 300-odd (the plan, the field names): each is kept as a delta against the first reply of
/// its page, about 40 bytes instead of a 336-byte array of its own (measured: 0.19 KiB per
/// subscriber of the 19,000-subscriber bench, whose rides each have a start reply).
///
/// A delta is a run of ops: `0x00...0x7F` = that many plus one literal bytes follow;
/// `0x80 | (n - 4)` = copy n (4...131) bytes of the page's reference from the 16-bit offset
/// that follows (little-endian).
struct ReplyArena {
    struct Handle {
        let page: Int32
        let offset: Int32
        let length: Int32
    }

    static let pageBytes = 64 * 1024
    /// Each page starts with the reply its deltas copy from.
    private var pages: [[UInt8]] = []
    /// The last page's reference (a copy: appending to the page must not share its buffer).
    private var current: [UInt8] = []
    /// For the last page: where each 4-byte sequence of its reference occurs (the last one).
    private var index = [Int32](repeating: -1, count: 1 << ReplyArena.indexBits)
    private static let indexBits = 12
    private static let minCopy = 4, maxCopy = 131, maxLiteral = 128

    var isEmpty: Bool { pages.isEmpty }

    mutating func add(_ reply: [UInt8]) -> Handle {
        // The worst delta: all literals, one op byte per 128.
        let worst = reply.count + reply.count / Self.maxLiteral + 1
        if pages.isEmpty || pages[pages.count - 1].count + worst > pages[pages.count - 1].capacity {
            startPage(reference: reply, room: worst)
        }
        let p = pages.count - 1
        let start = pages[p].count
        Self.encode(reply, reference: current, index: index, into: &pages[p])
        return Handle(page: Int32(p), offset: Int32(start), length: Int32(pages[p].count - start))
    }

    func bytes(_ h: Handle) -> [UInt8] {
        var out: [UInt8] = []
        pages[Int(h.page)].withUnsafeBufferPointer { b in
            var j = Int(h.offset)
            let end = j + Int(h.length)
            while j < end {
                let op = Int(b[j])
                if op < 0x80 {
                    out.append(contentsOf: b[(j + 1)..<(j + 2 + op)])
                    j += 2 + op
                } else {
                    let n = (op & 0x7F) + Self.minCopy
                    let from = Int(b[j + 1]) | Int(b[j + 2]) << 8
                    out.append(contentsOf: b[from..<(from + n)])
                    j += 3
                }
            }
        }
        return out
    }

    private mutating func startPage(reference: [UInt8], room: Int) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(max(Self.pageBytes, reference.count + room))
        bytes.append(contentsOf: reference)
        pages.append(bytes)
        current = reference
        for i in index.indices { index[i] = -1 }
        // Offsets are 16 bits: only the first 64 KiB of a (very long) reference is copied from.
        let usable = min(reference.count, 1 << 16)
        if usable >= Self.minCopy {
            for p in 0...(usable - Self.minCopy) { index[Self.hash(reference, p)] = Int32(p) }
        }
    }

    private static func hash(_ b: [UInt8], _ i: Int) -> Int {
        let v = UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
        return Int((v &* 2_654_435_761) >> (32 - UInt32(indexBits)))
    }

    /// Appends `input` as a delta against `reference` (which `index` indexes).
    private static func encode(_ input: [UInt8], reference: [UInt8], index: [Int32], into out: inout [UInt8]) {
        let n = input.count
        let referenceCount = reference.count
        let usable = min(referenceCount, 1 << 16)
        var i = 0, literal = 0
        /// Where in the reference the bytes after the last copy would continue: fields of the
        /// same length (instants, figures) then line up without a lookup.
        var follow = -1
        func flushLiterals(upTo end: Int, _ out: inout [UInt8]) {
            var s = literal
            while s < end {
                let k = min(Self.maxLiteral, end - s)
                out.append(UInt8(k - 1))
                out.append(contentsOf: input[s..<(s + k)])
                s += k
            }
        }
        func matchLength(_ p: Int) -> Int {
            guard p >= 0, p < usable else { return 0 }
            var m = 0
            while m < Self.maxCopy, i + m < n, p + m < referenceCount, reference[p + m] == input[i + m] { m += 1 }
            return m
        }
        while i + Self.minCopy <= n {
            let aligned = follow >= 0 ? follow + (i - literal) : -1
            var best = matchLength(aligned), from = aligned
            let candidate = Int(index[Self.hash(input, i)])
            if best < Self.maxCopy, candidate != aligned {
                let m = matchLength(candidate)
                if m > best { best = m; from = candidate }
            }
            if best >= Self.minCopy {
                flushLiterals(upTo: i, &out)
                out.append(UInt8(0x80 | (best - Self.minCopy)))
                out.append(UInt8(from & 0xFF))
                out.append(UInt8(from >> 8))
                i += best
                literal = i
                follow = from + best
            } else {
                i += 1
            }
        }
        flushLiterals(upTo: n, &out)
    }
}
