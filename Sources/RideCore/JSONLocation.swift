/// One step of a path into a JSON document: an object key or an array index.
public enum JSONPathStep: Sendable, Equatable {
    case key(String)
    case index(Int)
}

/// Where a value sits in a JSON text, found again after `JSON.parse` (which keeps no offsets)
/// so a loader can point a person at the line and column of a bad field. Only ever run on the
/// way to an error, so the parse itself stays as lean as before.
public enum JSONLocation {
    /// `features[3].properties.rules[0].ride_end_allowed`
    public static func describe(_ path: [JSONPathStep]) -> String {
        var s = ""
        for step in path {
            switch step {
            case .key(let k): s += s.isEmpty ? k : "." + k
            case .index(let i): s += "[\(i)]"
            }
        }
        return s
    }

    /// Byte offset of the value at `path` in `text` (a document `JSON.parse` accepted), or of
    /// the deepest value on the way if the path goes further than the text (a missing key: the
    /// object that lacks it). A key given twice resolves to its last occurrence, as the parser does.
    public static func offset(of path: [JSONPathStep], in text: [UInt8]) -> Int {
        var s = Scanner(bytes: text)
        s.space()
        var at = s.i
        for step in path {
            guard s.i < text.count else { return at }
            switch step {
            case .key(let k):
                guard text[s.i] == UInt8(ascii: "{"), let found = s.lastValue(ofKey: Array(k.utf8)) else { return at }
                s.i = found
            case .index(let n):
                guard text[s.i] == UInt8(ascii: "["), let found = s.element(n) else { return at }
                s.i = found
            }
            at = s.i
        }
        return at
    }

    /// 1-based line and column (columns count UTF-8 bytes, as `JSON.ParseError.located` does).
    public static func lineColumn(of offset: Int, in text: [UInt8]) -> (line: Int, column: Int) {
        var line = 1, column = 1
        for b in text.prefix(offset) {
            if b == UInt8(ascii: "\n") { line += 1; column = 1 } else { column += 1 }
        }
        return (line, column)
    }

    private struct Scanner {
        let bytes: [UInt8]
        var i = 0

        mutating func space() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
        }

        /// Skips the string starting at `i` (its opening quote); returns its raw bytes between quotes.
        mutating func string() -> ArraySlice<UInt8> {
            let start = i + 1
            i += 1
            while i < bytes.count, bytes[i] != UInt8(ascii: "\"") {
                i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1
            }
            let raw = bytes[start..<min(i, bytes.count)]
            i += 1
            return raw
        }

        /// Skips one value starting at `i`.
        mutating func skipValue() {
            guard i < bytes.count else { return }
            switch bytes[i] {
            case UInt8(ascii: "\""):
                _ = string()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                repeat {
                    let c = bytes[i]
                    if c == UInt8(ascii: "\"") { _ = string(); continue }
                    if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
                    if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") { depth -= 1 }
                    i += 1
                } while depth > 0 && i < bytes.count
            default:
                while i < bytes.count, !",}] \n\r\t".utf8.contains(bytes[i]) { i += 1 }
            }
        }

        /// With `i` on `{`: the offset of the value of the last member named `key`.
        mutating func lastValue(ofKey key: [UInt8]) -> Int? {
            i += 1
            var found: Int?
            while true {
                space()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return found }
                let raw = string()
                space()
                i += 1  // ':'
                space()
                if Self.keyMatches(raw, key) { found = i }
                skipValue()
                space()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return found }
                i += 1
            }
        }

        /// With `i` on `[`: the offset of element `n`.
        mutating func element(_ n: Int) -> Int? {
            i += 1
            var k = 0
            while true {
                space()
                guard i < bytes.count, bytes[i] != UInt8(ascii: "]") else { return nil }
                if k == n { return i }
                skipValue()
                space()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ",") else { return nil }
                i += 1
                k += 1
            }
        }

        static func keyMatches(_ raw: ArraySlice<UInt8>, _ key: [UInt8]) -> Bool {
            if !raw.contains(UInt8(ascii: "\\")) { return raw.elementsEqual(key) }
            // An escaped key: decode it the parser's way.
            guard let decoded = try? JSON.parse([UInt8(ascii: "\"")] + raw + [UInt8(ascii: "\"")]).string else { return false }
            return decoded.utf8.elementsEqual(key)
        }
    }
}
