/// Appends JSON to a byte buffer by hand: the tick path encodes one message per ride per
/// second, and Foundation's encoders would allocate per field.
public struct JSONWriter {
    public var bytes: [UInt8]
    private var needComma = false

    /// Writes after `prefix` zero bytes into `buffer`'s storage (emptied, capacity kept).
    public init(adopting buffer: consuming [UInt8], prefix: Int) {
        bytes = consume buffer
        bytes.removeAll(keepingCapacity: true)
        if prefix > 0 { bytes.append(contentsOf: repeatElement(0, count: prefix)) }
    }

    public init(reserving n: Int = 256, prefix: Int = 0) {
        bytes = []
        bytes.reserveCapacity(n + prefix)
        if prefix > 0 { bytes.append(contentsOf: repeatElement(0, count: prefix)) }
    }

    public mutating func beginObject() { comma(); bytes.append(UInt8(ascii: "{")); needComma = false }
    public mutating func endObject() { bytes.append(UInt8(ascii: "}")); needComma = true }
    public mutating func beginArray() { comma(); bytes.append(UInt8(ascii: "[")); needComma = false }
    public mutating func endArray() { bytes.append(UInt8(ascii: "]")); needComma = true }

    public mutating func key(_ k: StaticString) {
        comma()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount))
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needComma = false
    }

    public mutating func key(_ k: String) {
        string(k)
        bytes.append(UInt8(ascii: ":"))
        needComma = false
    }

    public mutating func string(_ s: String) {
        comma()
        bytes.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(c >> 4)], hex[Int(c & 15)]])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needComma = true
    }

    public mutating func int(_ v: Int64) {
        comma()
        if v < 0 { bytes.append(UInt8(ascii: "-")) }
        var m = v.magnitude
        if m == 0 { bytes.append(0x30); needComma = true; return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            while m > 0 { d[n] = UInt8(m % 10) + 0x30; m /= 10; n += 1 }
            for k in stride(from: n - 1, through: 0, by: -1) { bytes.append(d[k]) }
        }
        needComma = true
    }

    public mutating func bool(_ b: Bool) {
        comma()
        bytes.append(contentsOf: b ? Array("true".utf8) : Array("false".utf8))
        needComma = true
    }

    public mutating func null() { comma(); bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]); needComma = true }

    /// Pre-rendered JSON (e.g. a plan object computed once).
    public mutating func raw(_ json: [UInt8]) { comma(); bytes.append(contentsOf: json); needComma = true }

    public mutating func field(_ k: StaticString, _ v: String) { key(k); string(v) }
    public mutating func field(_ k: StaticString, _ v: Int64) { key(k); int(v) }
    public mutating func field(_ k: StaticString, _ v: Int64?) { key(k); if let v { int(v) } else { null() } }

    private mutating func comma() { if needComma { bytes.append(UInt8(ascii: ",")) } }
}
