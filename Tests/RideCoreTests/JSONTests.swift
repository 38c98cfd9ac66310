import XCTest
@testable import RideCore

/// The JSON parser (strict RFC 8259, numbers kept as text, depth-limited) and the hand-rolled
/// JSONWriter, which must round-trip through it.
final class JSONTests: XCTestCase {

    // MARK: helpers

    private func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSON? {
        do { return try JSON.parse(text) } catch {
            XCTFail("\(text.prefix(80)) refused: \(error)", file: file, line: line)
            return nil
        }
    }

    private func refusal(_ bytes: [UInt8]) -> JSON.ParseError? {
        do {
            _ = try JSON.parse(bytes)
            return nil
        } catch { return error }
    }

    private func refusal(_ text: String) -> JSON.ParseError? { refusal(Array(text.utf8)) }

    private func assertRefused(_ text: String, _ reason: String? = nil, at offset: Int? = nil,
                               file: StaticString = #filePath, line: UInt = #line) {
        guard let e = refusal(text) else { return XCTFail("accepted \(text.debugDescription)", file: file, line: line) }
        if let reason { XCTAssertEqual(e.reason, reason, text.debugDescription, file: file, line: line) }
        if let offset { XCTAssertEqual(e.offset, offset, text.debugDescription, file: file, line: line) }
    }

    private func written(_ build: (inout JSONWriter) -> Void) -> String {
        var w = JSONWriter()
        build(&w)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    // MARK: structure

    func testScalars() {
        XCTAssertEqual(parse("null"), .null)
        XCTAssertEqual(parse("true"), .bool(true))
        XCTAssertEqual(parse("false"), .bool(false))
        XCTAssertEqual(parse("0"), .number("0"))
        XCTAssertEqual(parse(#""""#), .string(""))
        XCTAssertEqual(parse(#""hi""#), .string("hi"))
        XCTAssertEqual(parse(" \t\r\n 7 \t\r\n "), .number("7"))
    }

    /// JSON Schema's `integer` accepts any integer-valued number; so does `wholeNumber`, exactly.
    func testWholeNumbersInEverySpelling() throws {
        let cases: [(String, Int64?)] = [
            ("60", 60), ("60.0", 60), ("60.000", 60), ("6e1", 60), ("6E+1", 60), ("600e-1", 60), ("0.6e2", 60),
            ("-3.0", -3), ("0", 0), ("-0.0", 0), ("0e5", 0), ("9007199254740993.0", 9_007_199_254_740_993),
            ("9223372036854775807.0", Int64.max), ("1.5", nil), ("15e-1", nil), ("1.55e1", nil),
            ("9223372036854775808", nil), ("1e19", nil), ("1e999999", nil),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(try JSON.parse(Array(text.utf8)).wholeNumber, expected, text)
        }
        XCTAssertNil(JSON.string("60").wholeNumber)
    }

    func testNested() {
        let v = parse(#"{"a":[1,{"b":[true,false,null,[]],"c":{}},"x"],"d":{"e":{"f":"g"}},"h":-2.5e+3}"#)
        XCTAssertEqual(v, .object([
            "a": .array([.number("1"), .object(["b": .array([.bool(true), .bool(false), .null, .array([])]), "c": .object([:])]), .string("x")]),
            "d": .object(["e": .object(["f": .string("g")])]),
            "h": .number("-2.5e+3"),
        ]))
        XCTAssertEqual(v?["d"]?["e"]?["f"]?.string, "g")
        XCTAssertEqual(v?["a"]?.array?.count, 3)
        XCTAssertNil(v?["missing"])
        XCTAssertNil(JSON.array([])["a"], "subscript of a non-object is nil")
    }

    func testWhitespaceEverywhere() {
        XCTAssertEqual(parse(" { \"a\" : [ 1 , 2 ] , \"b\" : { } } "),
                       .object(["a": .array([.number("1"), .number("2")]), "b": .object([:])]))
        assertRefused("\u{0B}1", "expected a value")  // vertical tab is not JSON whitespace
        assertRefused("[1\u{A0}]")  // nor is NBSP
    }

    func testDuplicateKeysLastWins() {
        XCTAssertEqual(parse(#"{"a":1,"a":2}"#), .object(["a": .number("2")]))
    }

    func testAccessors() {
        let v = JSON.object(["s": .string("x"), "b": .bool(true), "n": .number("12"), "f": .number("1.5"),
                             "a": .array([.null]), "o": .object([:])])
        XCTAssertEqual(v["s"]?.string, "x")
        XCTAssertNil(v["s"]?.int)
        XCTAssertEqual(v["b"]?.bool, true)
        XCTAssertNil(v["b"]?.int, "true is not a number")
        XCTAssertEqual(v["n"]?.int, 12)
        XCTAssertNil(v["f"]?.int, "1.5 is not a whole number")
        XCTAssertEqual(v["f"]?.numberText, "1.5")
        XCTAssertEqual(v["a"]?.array, [.null])
        XCTAssertEqual(v["o"]?.object, [:])
        XCTAssertNil(v["n"]?.string)
        XCTAssertNil(v.array)
    }

    func testStructuralErrors() {
        assertRefused("", "unexpected end", at: 0)
        assertRefused("   ", "unexpected end", at: 3)
        assertRefused("{", "expected a key", at: 1)
        assertRefused("[", "unexpected end", at: 1)
        assertRefused(#"{"a"}"#, "expected ':'", at: 4)
        assertRefused(#"{"a":}"#, "expected a value", at: 5)
        assertRefused(#"{"a":1,}"#, "expected a key", at: 7)
        assertRefused(#"{"a":1 "b":2}"#, "expected ',' or '}'", at: 7)
        assertRefused(#"{a:1}"#, "expected a key", at: 1)
        assertRefused(#"{1:1}"#, "expected a key")
        assertRefused("[1,]", "expected a value", at: 3)
        assertRefused("[1 2]", "expected ',' or ']'", at: 3)
        assertRefused("[,1]", "expected a value")
        assertRefused("[1}", "expected ',' or ']'")
        assertRefused(#"{"a":1]"#, "expected ',' or '}'")
        assertRefused(#"{"a":1"#, "unexpected end")
        assertRefused("tru", "unknown literal")
        assertRefused("nul", "unknown literal")
        assertRefused("True", "expected a value")
        assertRefused("undefined", "expected a value")
        assertRefused("'a'", "expected a value")
    }

    func testTrailingGarbage() {
        assertRefused("{} x", "trailing characters", at: 3)
        assertRefused("1 2", "trailing characters", at: 2)
        assertRefused("[1]]", "trailing characters", at: 3)
        assertRefused("truex", "trailing characters", at: 4)
        assertRefused(#""a""b""#, "trailing characters", at: 3)
        assertRefused("{}\u{0}", "trailing characters")
        assertRefused("null,", "trailing characters")
    }

    func testErrorDescriptionIsReadable() {
        XCTAssertEqual(refusal("[1,]")?.description, "invalid JSON at byte 3: expected a value")
    }

    func testErrorLocatedAsLineAndColumnForAFile() {
        let text = Array("{\n  \"a\": 1,\n  \"b\": ]\n}".utf8)
        do {
            _ = try JSON.parse(text)
            XCTFail("parsed")
        } catch {
            XCTAssertEqual(error.offset, 19)
            XCTAssertEqual(error.located(in: text), "invalid JSON at line 3, column 8: expected a value")
        }
        XCTAssertEqual(JSON.ParseError(offset: 0, reason: "x").located(in: []), "invalid JSON at line 1, column 1: x")
    }

    // MARK: nesting

    func testNestingUpTo32LevelsAndNoDeeper() {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        XCTAssertNotNil(parse(ok))
        assertRefused(String(repeating: "[", count: 33) + String(repeating: "]", count: 33), "nested too deeply", at: 32)
        let objects = String(repeating: #"{"a":"#, count: 31) + "1" + String(repeating: "}", count: 31)
        XCTAssertNotNil(parse(objects))
        let deepObjects = String(repeating: #"{"a":"#, count: 32) + "{}" + String(repeating: "}", count: 32)
        assertRefused(deepObjects, "nested too deeply")
    }

    func testVeryDeepInputFailsFastWithoutOverflowingTheStack() {
        assertRefused(String(repeating: "[", count: 1_000_000), "nested too deeply")
        assertRefused(String(repeating: #"{"k":"#, count: 200_000), "nested too deeply")
    }

    // MARK: numbers

    func testNumbersKeepTheirText() {
        for n in ["0", "-0", "0.10", "2.00", "-1.5", "1e5", "1E-2", "-0.0e+00", "123456789012345678901234567890",
                  "9223372036854775807", "-9223372036854775808", "1.000000000000000000001"] {
            XCTAssertEqual(parse(n), .number(n), n)
            XCTAssertEqual(parse("[\(n)]"), .array([.number(n)]), n)
        }
        XCTAssertEqual(parse(#"{"price":0.10}"#)?["price"]?.numberText, "0.10")
    }

    func testWholeNumbersAsInt64() {
        XCTAssertEqual(parse("42")?.int, 42)
        XCTAssertEqual(parse("-42")?.int, -42)
        XCTAssertEqual(parse("-0")?.int, 0)
        XCTAssertEqual(parse("9223372036854775807")?.int, Int64.max)
        XCTAssertEqual(parse("-9223372036854775808")?.int, Int64.min)
        XCTAssertNil(parse("9223372036854775808")?.int, "overflow is not an integer")
        XCTAssertNil(parse("1.0")?.int)
        XCTAssertNil(parse("1e3")?.int)
    }

    func testLeadingZerosAreRefused() {
        assertRefused("01", "leading zero", at: 2)
        assertRefused("-01", "leading zero")
        assertRefused("00", "leading zero")
        assertRefused("00.5", "leading zero")
        assertRefused("[007]", "leading zero")
        XCTAssertEqual(parse("0.5"), .number("0.5"))
        XCTAssertEqual(parse("10"), .number("10"))
        XCTAssertEqual(parse("0e1"), .number("0e1"))
    }

    func testMalformedNumbers() {
        assertRefused("-", "expected a value")
        assertRefused("+1", "expected a value")
        assertRefused(".5", "expected a value")
        assertRefused("1.", "expected digits after '.'")
        assertRefused("1.e3", "expected digits after '.'")
        assertRefused("1e", "expected exponent digits")
        assertRefused("1e+", "expected exponent digits")
        assertRefused("0x10", "trailing characters")
        assertRefused("1_000", "trailing characters")
        assertRefused("NaN", "expected a value")
        assertRefused("Infinity", "expected a value")
        assertRefused("-Infinity", "expected a value")
        assertRefused("--1", "expected a value")
    }

    // MARK: strings

    func testEscapes() {
        XCTAssertEqual(parse(#""\"\\\/\b\f\n\r\t""#), .string("\"\\/\u{8}\u{C}\n\r\t"))
        XCTAssertEqual(parse(#""\u0041\u00e9\u00E9\uAC00\u0000""#), .string("Aéé가\u{0}"))
        XCTAssertEqual(parse(#""a\u0020b""#), .string("a b"))
    }

    func testSurrogatePairs() {
        XCTAssertEqual(parse(#""\uD83D\uDE00""#), .string("😀"))
        XCTAssertEqual(parse(#""\ud83d\ude00x""#), .string("😀x"))
        XCTAssertEqual(parse(#""\uD800\uDC00""#), .string("\u{10000}"))
        XCTAssertEqual(parse(#""\uDBFF\uDFFF""#), .string("\u{10FFFF}"))
        assertRefused(#""\uD83D""#, "lone surrogate")
        assertRefused(#""\uD83Dx""#, "lone surrogate")
        assertRefused(#""\uD83D\n""#, "lone surrogate")
        assertRefused(#""\uD83D\u0041""#, "bad surrogate pair")
        assertRefused(#""\uD83D\uD83D""#, "bad surrogate pair")
        assertRefused(#""\uDE00""#, "bad code point")
        assertRefused(#""\uDE00\uD83D""#, "bad code point")
    }

    func testBadEscapes() {
        assertRefused(#""\x41""#, "bad escape")
        assertRefused(#""\'""#, "bad escape")
        assertRefused(#""\U0041""#, "bad escape")
        assertRefused(#""\u12""#, "short \\u escape")
        assertRefused(#""\u12G4""#, "bad \\u escape")
        assertRefused(#"["\u12", 1]"#, "bad \\u escape")
        assertRefused(#""\u12"#, "short \\u escape")
        assertRefused(#""\"#, "unterminated string")
        assertRefused(#""abc"#, "unterminated string")
    }

    func testRawControlCharactersAreRefused() {
        for c in [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x1F] as [UInt8] {
            let e = refusal([0x22, 0x61, c, 0x22])
            XCTAssertEqual(e?.reason, "control character in string", "byte \(c)")
            XCTAssertEqual(e?.offset, 2)
        }
        XCTAssertEqual(try? JSON.parse([0x22, 0x7F, 0x22]), .string("\u{7F}"), "DEL is allowed")
    }

    func testUTF8IsPassedThrough() {
        XCTAssertEqual(parse(#""기본 500원 + 분당 180원""#), .string("기본 500원 + 분당 180원"))
        XCTAssertEqual(parse(#"{"이름":"킥보드 🛴"}"#), .object(["이름": .string("킥보드 🛴")]))
    }

    func testInvalidUTF8IsRefused() {
        let bad: [[UInt8]] = [
            [0xFF],                    // never valid
            [0xC3, 0x28],              // bad continuation
            [0xC0, 0xAF],              // overlong '/'
            [0xE0, 0x80, 0xAF],        // overlong
            [0xED, 0xA0, 0x80],        // UTF-16 surrogate encoded in UTF-8
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xE2, 0x82],              // truncated
            [0x80],                    // lone continuation
        ]
        for b in bad {
            let e = refusal([0x22] + b + [0x22])
            XCTAssertEqual(e?.reason, "invalid UTF-8", "\(b)")
            let inKey = refusal(Array(#"{""#.utf8) + b + Array(#"":1}"#.utf8))
            XCTAssertEqual(inKey?.reason, "invalid UTF-8", "key \(b)")
        }
        XCTAssertNotNil(refusal([0xFF]), "outside a string too")
    }

    // MARK: size

    func testHugeInput() throws {
        let longString = String(repeating: "가나다라abc", count: 100_000)
        let v = try JSON.parse(#"{"s":""# + longString + #""}"#)
        XCTAssertEqual(v["s"]?.string, longString)

        let many = "[" + (0..<100_000).map(String.init).joined(separator: ",") + "]"
        let a = try JSON.parse(many).array
        XCTAssertEqual(a?.count, 100_000)
        XCTAssertEqual(a?.last, .number("99999"))

        let keys = "{" + (0..<20_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        XCTAssertEqual(try JSON.parse(keys).object?.count, 20_000)

        // A huge but broken input fails with the right offset, not a crash.
        let broken = Array(repeating: UInt8(ascii: " "), count: 1_000_000) + [UInt8(ascii: "x")]
        XCTAssertEqual(refusal(broken)?.offset, 1_000_000)
    }

    func testParsesAnyByteCollection() throws {
        let bytes: ArraySlice<UInt8> = Array(#"xx{"a":1}yy"#.utf8)[2..<9]
        XCTAssertEqual(try JSON.parse(bytes), .object(["a": .number("1")]))
        XCTAssertEqual(try JSON.parse(#"{"a":1}"#.utf8), .object(["a": .number("1")]))
    }

    // MARK: JSONWriter

    func testWriterEscapesExactly() {
        XCTAssertEqual(written { $0.string("a\"b\\c/d") }, #""a\"b\\c/d""#)
        XCTAssertEqual(written { $0.string("\n\r\t") }, #""\n\r\t""#)
        XCTAssertEqual(written { $0.string("\u{0}\u{1}\u{8}\u{C}\u{1F}") }, #""\u0000\u0001\u0008\u000c\u001f""#)
        XCTAssertEqual(written { $0.string("\u{7F} 가 🛴") }, "\"\u{7F} 가 🛴\"", "no escaping above 0x1F")
        XCTAssertEqual(written { $0.string("") }, #""""#)
    }

    func testWriterRoundTripsEveryASCIIAndKoreanThroughTheParser() throws {
        let samples = [
            String((0..<128).map { Character(Unicode.Scalar(UInt8($0))) }),
            "기본 500원 + 분당 180원, \"반납\"\\하기\n",
            "😀🛴\u{10FFFF}\u{FEFF}\u{2028}\u{2029}",
            "\u{1}\u{2}\u{3}\u{1E}\u{1F} \" \\ / \u{8}\u{C}",
        ]
        for s in samples {
            var w = JSONWriter()
            w.beginObject()
            w.key(s)          // keys escape too
            w.string(s)
            w.field("k", s)
            w.endObject()
            let back = try JSON.parse(w.bytes)
            XCTAssertEqual(back, .object([s: .string(s), "k": .string(s)]), s.debugDescription)
        }
    }

    func testWriterIntegers() throws {
        for v in [0, 1, -1, 9, 10, 99, 100, 1_764_430_000_000, Int64.max, Int64.min, -1_000_000] as [Int64] {
            let s = written { $0.int(v) }
            XCTAssertEqual(s, String(v))
            XCTAssertEqual(try JSON.parse(s).int, v)
        }
    }

    func testWriterStructureAndCommas() {
        let s = written { w in
            w.beginObject()
            w.field("a", Int64(1))
            w.field("b", "x")
            w.field("c", nil as Int64?)
            w.field("d", 5 as Int64?)
            w.key("e"); w.bool(true)
            w.key("f"); w.bool(false)
            w.key("g"); w.null()
            w.key("h")
            w.beginArray()
            w.int(1); w.string("2")
            w.beginObject(); w.endObject()
            w.beginArray(); w.endArray()
            w.beginObject(); w.field("z", Int64(0)); w.endObject()
            w.raw(Array(#"{"pre":"rendered"}"#.utf8))
            w.null()
            w.endArray()
            w.key("i"); w.beginObject(); w.endObject()
            w.endObject()
        }
        XCTAssertEqual(s, #"{"a":1,"b":"x","c":null,"d":5,"e":true,"f":false,"g":null,"h":[1,"2",{},[],{"z":0},{"pre":"rendered"},null],"i":{}}"#)
        XCTAssertNotNil(try? JSON.parse(s))
    }

    func testWriterPrefix() {
        var w = JSONWriter(reserving: 8, prefix: 4)
        XCTAssertEqual(w.bytes, [0, 0, 0, 0])
        w.beginObject(); w.endObject()
        XCTAssertEqual(w.bytes, [0, 0, 0, 0, UInt8(ascii: "{"), UInt8(ascii: "}")])
        XCTAssertEqual(JSONWriter(prefix: 0).bytes, [])
    }

    func testWriterAdoptingABufferEmptiesItAndKeepsItsStorage() {
        var buffer: [UInt8] = Array(repeating: 0x7A, count: 100)
        buffer.reserveCapacity(1_000)
        let capacity = buffer.capacity
        var w = JSONWriter(adopting: buffer, prefix: 2)
        buffer = []  // the caller gives its buffer away
        XCTAssertEqual(w.bytes, [0, 0])
        XCTAssertEqual(w.bytes.capacity, capacity)
        w.beginArray(); w.endArray()
        XCTAssertEqual(w.bytes, [0, 0, UInt8(ascii: "["), UInt8(ascii: "]")])
    }
}
