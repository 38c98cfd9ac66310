/// JSON written straight into memory the caller owns, for the tick batch (TickFrame.swift): no
/// array per message, and no capacity or uniqueness check per byte as `JSONWriter` makes. The
/// caller makes room first — at least the bound it works out from the `max…Bytes` below — and
/// takes `position` back when done. Values come out byte for byte as `JSONWriter` writes them
/// (JSONCursorTests holds the two equal); there are no commas to track: the caller writes
/// keys and separators as raw text.
public struct JSONCursor {
    /// Where the next byte goes.
    public private(set) var position: UnsafeMutablePointer<UInt8>

    public init(_ start: UnsafeMutablePointer<UInt8>) { position = start }

    /// The most an `int` writes: `-9223372036854775808`.
    public static let maxIntBytes = 20
    /// The most a `number` writes: an `int`, or a Double's shortest description
    /// (`-2.2250738585072014e-308` is 24).
    public static let maxNumberBytes = 32

    /// The most `string(s)` writes: quotes, and every byte as `\u00XX`.
    @inline(__always)
    public static func maxStringBytes(_ s: String) -> Int { 2 + 6 * s.utf8.count }

    @inline(__always)
    public mutating func byte(_ b: UInt8) {
        position.pointee = b
        position += 1
    }

    /// Text written as it is: keys, separators, a prepared piece.
    @inline(__always)
    public mutating func raw(_ s: StaticString) {
        position.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        position += s.utf8CodeUnitCount
    }

    @inline(__always)
    public mutating func raw(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let b = bytes.baseAddress else { return }
        position.update(from: b, count: bytes.count)
        position += bytes.count
    }

    /// A whole number in decimal, as `JSONWriter.int` writes it.
    public mutating func int(_ v: Int64) {
        if v < 0 { byte(UInt8(ascii: "-")) }
        var m = v.magnitude
        // Count the digits, then write them from the last one back, two at a time: no scratch
        // buffer, half the divisions.
        var n = 1
        var limit: UInt64 = 10
        while n < 20 && m >= limit {
            n += 1
            limit &*= 10
        }
        var p = position + n
        position = p
        let pairs: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        let table = UnsafeRawPointer(pairs.utf8Start)
        while m >= 100 {
            let q = m / 100
            let r = Int(truncatingIfNeeded: m &- q &* 100)
            p -= 2
            UnsafeMutableRawPointer(p).storeBytes(of: table.loadUnaligned(fromByteOffset: 2 * r, as: UInt16.self), as: UInt16.self)
            m = q
        }
        if m >= 10 {
            p -= 2
            UnsafeMutableRawPointer(p).storeBytes(of: table.loadUnaligned(fromByteOffset: 2 * Int(m), as: UInt16.self), as: UInt16.self)
        } else {
            p -= 1
            p.pointee = UInt8(truncatingIfNeeded: m) &+ 0x30
        }
    }

    /// A quoted string, escaped as `JSONWriter.string` escapes it (`\"`, `\\`, `\n`, `\r`,
    /// `\t`, other control bytes as `\u00XX`; everything else as it is).
    public mutating func string(_ s: String) {
        byte(UInt8(ascii: "\""))
        let p = position
        if let end = s.utf8.withContiguousStorageIfAvailable({ Self.escape($0, to: p) }) {
            position = end
        } else {
            for c in s.utf8 { position = Self.escape(c, to: position) }
        }
        byte(UInt8(ascii: "\""))
    }

    /// A JSON number as the encoders write a Double (`writeNumber`): whole values within
    /// ±1e15 as integers, others by their shortest description.
    public mutating func number(_ d: Double) {
        if d == d.rounded(), abs(d) < 1e15 {
            int(Int64(d))
        } else {
            var text = d.description
            text.withUTF8 { raw($0) }
        }
    }

    @inline(__always)
    private static func escape(_ bytes: UnsafeBufferPointer<UInt8>, to start: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        guard let from = bytes.baseAddress else { return start }
        var p = start
        var i = 0
        // Eight bytes at a time while none of them needs escaping (a ride id never does).
        while i + 8 <= bytes.count {
            let word = UnsafeRawPointer(from + i).loadUnaligned(as: UInt64.self)
            if needsEscape(word) { break }
            UnsafeMutableRawPointer(p).storeBytes(of: word, as: UInt64.self)
            p += 8
            i += 8
        }
        // The last few (fewer than eight, all after the words above) through the last eight,
        // overlapping what is already written, when none of those needs escaping either: the
        // output so far is the input, byte for byte.
        if i < bytes.count, bytes.count >= 8, i >= bytes.count - 8, i == p - start {
            let word = UnsafeRawPointer(from + bytes.count - 8).loadUnaligned(as: UInt64.self)
            if !needsEscape(word) {
                UnsafeMutableRawPointer(start + bytes.count - 8).storeBytes(of: word, as: UInt64.self)
                return start + bytes.count
            }
        }
        while i < bytes.count {
            let c = from[i]
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") {
                p.pointee = c
                p += 1
            } else {
                p = escape(c, to: p)
            }
            i += 1
        }
        return p
    }

    /// Whether any byte of `w` is below 0x20, a quote or a backslash (never a false "no"; a
    /// false "yes" only sends the bytes through the one-at-a-time path).
    @inline(__always)
    static func needsEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let below = (w &- ones &* 0x20) & ~w & highs
        let q = w ^ (ones &* 0x22), quote = (q &- ones) & ~q & highs
        let b = w ^ (ones &* 0x5C), backslash = (b &- ones) & ~b & highs
        return below | quote | backslash != 0
    }

    private static func escape(_ c: UInt8, to p: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        func put(_ a: UInt8, _ b: UInt8) -> UnsafeMutablePointer<UInt8> {
            p[0] = a
            p[1] = b
            return p + 2
        }
        switch c {
        case UInt8(ascii: "\""): return put(0x5C, 0x22)
        case UInt8(ascii: "\\"): return put(0x5C, 0x5C)
        case 0x0A: return put(0x5C, UInt8(ascii: "n"))
        case 0x0D: return put(0x5C, UInt8(ascii: "r"))
        case 0x09: return put(0x5C, UInt8(ascii: "t"))
        case 0..<0x20:
            let hex = UInt8(ascii: "0"), letter = UInt8(ascii: "a") - 10
            let hi = c >> 4, lo = c & 15
            p[0] = 0x5C
            p[1] = UInt8(ascii: "u")
            p[2] = 0x30
            p[3] = 0x30
            p[4] = hi < 10 ? hex + hi : letter + hi
            p[5] = lo < 10 ? hex + lo : letter + lo
            return p + 6
        default:
            p.pointee = c
            return p + 1
        }
    }
}
