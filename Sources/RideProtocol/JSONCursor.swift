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
        // Count the digits, then write them from the last one back: no scratch buffer.
        var n = 1
        var limit: UInt64 = 10
        while n < 20 && m >= limit {
            n += 1
            limit &*= 10
        }
        var p = position + n
        position = p
        repeat {
            p -= 1
            p.pointee = UInt8(truncatingIfNeeded: m % 10) &+ 0x30
            m /= 10
        } while m > 0
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
        var p = start
        for c in bytes {
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") {
                p.pointee = c
                p += 1
            } else {
                p = escape(c, to: p)
            }
        }
        return p
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
