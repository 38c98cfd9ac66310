/// A small JSON value and parser. Numbers keep their source text so money written as "0.10"
/// converts to minor units exactly, and so an integer field can refuse 1.5 or `true`.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var string: String? { if case .string(let s) = self { return s }; return nil }
    public var bool: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var array: [JSON]? { if case .array(let a) = self { return a }; return nil }
    public var object: [String: JSON]? { if case .object(let o) = self { return o }; return nil }
    /// An integer written without fraction or exponent.
    public var int: Int64? {
        if case .number(let n) = self { return Int64(n) }
        return nil
    }
    public var numberText: String? { if case .number(let n) = self { return n }; return nil }

    /// An integer-valued number in any JSON spelling (`60`, `60.0`, `6e1`, `600e-1`), as JSON
    /// Schema's `integer` accepts it, when it fits Int64; nil for a fraction (`1.5`) or a non-number.
    /// Exact: computed on the digits, never through a Double (`9007199254740993.0` stays itself).
    public var wholeNumber: Int64? {
        guard case .number(let text) = self else { return nil }
        var s = Substring(text)
        let negative = s.first == "-"
        if negative { s = s.dropFirst() }
        var exponent = 0
        if let e = s.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            guard let x = Int(s[s.index(after: e)...].drop { $0 == "+" }), abs(x) < 1000 else { return nil }
            exponent = x
            s = s[..<e]
        }
        var digits = s
        if let dot = s.firstIndex(of: ".") {
            let fraction = s[s.index(after: dot)...]
            digits = s[..<dot] + fraction
            exponent -= fraction.count
        }
        guard !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }) else { return nil }
        var mantissa = Substring(digits.drop { $0 == "0" })
        if mantissa.isEmpty { return 0 }
        // Trailing zeros pay for a negative exponent; any other digit there is a fraction.
        while exponent < 0, mantissa.last == "0" {
            mantissa = mantissa.dropLast()
            exponent += 1
        }
        guard exponent >= 0, mantissa.count + exponent <= 19 else { return nil }
        return Int64((negative ? "-" : "") + String(mantissa) + String(repeating: "0", count: exponent))
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let offset: Int
        public let reason: String
        public var description: String { "invalid JSON at byte \(offset): \(reason)" }

        /// The same, at line:column of `text` (1-based; columns count UTF-8 bytes), for a file
        /// a person edits.
        public func located(in text: [UInt8]) -> String {
            var line = 1, column = 1
            for b in text.prefix(offset) {
                if b == UInt8(ascii: "\n") { line += 1; column = 1 } else { column += 1 }
            }
            return "invalid JSON at line \(line), column \(column): \(reason)"
        }
    }

    public static func parse(_ bytes: some Collection<UInt8>) throws(ParseError) -> JSON {
        var p = Parser(bytes: Array(bytes))
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == p.bytes.count else { throw ParseError(offset: p.i, reason: "trailing characters") }
        return v
    }

    public static func parse(_ text: String) throws(ParseError) -> JSON {
        try parse(Array(text.utf8))
    }
}

private struct Parser {
    let bytes: [UInt8]
    var i = 0

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    func fail(_ reason: String) -> JSON.ParseError { JSON.ParseError(offset: i, reason: reason) }

    mutating func value(depth: Int) throws(JSON.ParseError) -> JSON {
        guard depth < 32 else { throw fail("nested too deeply") }
        guard i < bytes.count else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1
            var o: [String: JSON] = [:]
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let k = try string()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipSpace()
                o[k] = try value(depth: depth + 1)
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(o) }
                throw fail("expected ',' or '}'")
            }
        case UInt8(ascii: "["):
            i += 1
            var a: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
            while true {
                skipSpace()
                a.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(a) }
                throw fail("expected ',' or ']'")
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            return .number(try number())
        }
    }

    mutating func literal(_ word: StaticString) throws(JSON.ParseError) {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard i + w.count <= bytes.count, bytes[i..<i + w.count].elementsEqual(w) else { throw fail("unknown literal") }
        i += w.count
    }

    mutating func number() throws(JSON.ParseError) -> String {
        let start = i
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
        guard i > intStart else { throw fail("expected a value") }
        if i - intStart > 1, bytes[intStart] == 0x30 { throw fail("leading zero") }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            let f = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            guard i > f else { throw fail("expected digits after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            let e = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            guard i > e else { throw fail("expected exponent digits") }
        }
        return String(decoding: bytes[start..<i], as: UTF8.self)
    }

    mutating func hex4() throws(JSON.ParseError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt8
            switch c {
            case 0x30...0x39: d = c - 0x30
            case 0x41...0x46: d = c - 0x41 + 10
            case 0x61...0x66: d = c - 0x61 + 10
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    mutating func string() throws(JSON.ParseError) -> String {
        i += 1  // opening quote
        var out: [UInt8] = []
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
                return s
            }
            if c < 0x20 { throw fail("control character in string") }
            if c != UInt8(ascii: "\\") { out.append(c); i += 1; continue }
            i += 1
            guard i < bytes.count else { break }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("lone surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("bad surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad code point") }
                out.append(contentsOf: String(Character(u)).utf8)
            default: throw fail("bad escape")
            }
        }
        throw fail("unterminated string")
    }
}
