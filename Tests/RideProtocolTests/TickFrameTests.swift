import XCTest
import RideCore
@testable import RideProtocol

/// The batch's tick encoder (`TickFrame`, through a `JSONCursor`) against the one encoder of a
/// tick, `ServerMessages.tick`: the same bytes for every field, state, number and escape, and
/// never more than the room it asks for.
final class TickFrameTests: XCTestCase {
    private let t0: UnixMillis = 1_764_430_000_000

    // MARK: helpers

    private func ride(_ ops: [(Int64, RideCommand)] = [], start: UnixMillis, id: String = "r-42", limit: Int64? = nil) -> Ride {
        var r = Ride(id: id, planID: "default", owner: nil, limit: limit, startedAt: start)
        var t = start
        for (ms, command) in ops {
            t += ms
            guard case .success((_, let next)) = r.step(command, at: t) else {
                XCTFail("\(command) at \(t)")
                return r
            }
            r = next
        }
        return r
    }

    /// What the one encoder writes.
    private func expected(_ r: Ride, plan: FarePlan = .standard, seq: Int64, at: UnixMillis,
                          distance: Int64? = nil, position: RidePosition? = nil) -> [UInt8] {
        var out: [UInt8] = []
        ServerMessages.tick(into: &out, ride: r, plan: plan, seq: seq, at: at, prefix: 0, distance: distance, position: position)
        return out
    }

    /// What `TickFrame` writes, in exactly `maxBytes` of room followed by guard bytes it must
    /// leave alone.
    private func written(_ r: Ride, plan: FarePlan = .standard, seq: Int64, at: UnixMillis,
                         distance: Int64? = nil, position: RidePosition? = nil,
                         file: StaticString = #filePath, line: UInt = #line) -> [UInt8] {
        let frame = TickFrame(seq: seq, at: at)
        let box = TickPlan(plan)
        let room = frame.maxBytes(ride: r.id, plan: box)
        let guardBytes = 64
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: room + guardBytes)
        defer { buffer.deallocate() }
        buffer.initialize(repeating: 0xEE, count: room + guardBytes)
        let n = frame.write(at: buffer, ride: r, plan: box, distance: distance, position: position) - buffer
        XCTAssertLessThanOrEqual(n, room, "wrote past the room it asked for", file: file, line: line)
        XCTAssertEqual(Array(UnsafeBufferPointer(start: buffer + room, count: guardBytes)), Array(repeating: 0xEE, count: guardBytes),
                       "touched the bytes after its room", file: file, line: line)
        return Array(UnsafeBufferPointer(start: buffer, count: n))
    }

    private func assertSame(_ r: Ride, plan: FarePlan = .standard, seq: Int64, at: UnixMillis,
                            distance: Int64? = nil, position: RidePosition? = nil,
                            file: StaticString = #filePath, line: UInt = #line) {
        let old = expected(r, plan: plan, seq: seq, at: at, distance: distance, position: position)
        let new = written(r, plan: plan, seq: seq, at: at, distance: distance, position: position, file: file, line: line)
        XCTAssertEqual(String(decoding: new, as: UTF8.self), String(decoding: old, as: UTF8.self), file: file, line: line)
        XCTAssertEqual(new, old, file: file, line: line)
    }

    private func cursorBytes(room: Int = 256, _ body: (inout JSONCursor) -> Void) -> [UInt8] {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: room)
        defer { buffer.deallocate() }
        var c = JSONCursor(buffer)
        body(&c)
        return Array(UnsafeBufferPointer(start: buffer, count: c.position - buffer))
    }

    // MARK: the tick, field by field

    func testARidingRideAsTheOneEncoderWritesIt() {
        assertSame(ride(start: t0), seq: 1234, at: t0 + 192_000)
        // The literal CodecTests holds the one encoder to.
        XCTAssertEqual(String(decoding: written(ride(start: t0), seq: 1234, at: t0 + 192_000), as: UTF8.self),
                       #"{"type":"tick","ride":"r-42","state":"riding","elapsed":192,"paused":0,"fare":1040,"currency":"KRW","seq":1234,"at":1764430192000}"#)
    }

    func testAPausedRideWithALimitHasItsRemainingSeconds() {
        let r = ride([(61_500, .pause)], start: t0 + 123, limit: 600)
        assertSame(r, seq: 7, at: t0 + 75_000)
        XCTAssertEqual(String(decoding: written(r, seq: 7, at: t0 + 75_000), as: UTF8.self),
                       #"{"type":"tick","ride":"r-42","state":"paused","elapsed":61,"paused":13,"fare":680,"currency":"KRW","remaining":539,"seq":7,"at":1764430075000}"#)
        // Resumed, and past the limit (remaining 0, not negative).
        let resumed = ride([(10_000, .pause), (5_000, .resume)], start: t0, limit: 30)
        assertSame(resumed, seq: 8, at: t0 + 20_000)
        assertSame(resumed, seq: 9, at: t0 + 90_000)
    }

    func testAnEndedRideLeavesRemainingOut() {
        let r = ride([(30_000, .pause), (10_000, .resume), (200_000, .end)], start: t0, limit: 600)
        XCTAssertEqual(r.state, .ended)
        assertSame(r, seq: 3, at: t0 + 500_000)
        XCTAssertFalse(String(decoding: written(r, seq: 3, at: t0 + 500_000), as: UTF8.self).contains("remaining"))
    }

    func testDistanceAndTheCompactPosition() {
        let r = ride(start: t0)
        assertSame(r, seq: 5, at: t0 + 5_000, distance: 0)
        assertSame(r, seq: 5, at: t0 + 5_000, distance: 1_234)
        assertSame(r, seq: 5, at: t0 + 5_000, distance: 12, position: RidePosition(lat: 48.8566, lon: 2.3522, at: t0 + 4_000))
        assertSame(r, seq: 5, at: t0 + 5_000, position: RidePosition(lat: 48.8566, lon: 2.3522, at: nil))
        // Whole degrees as integers, negative ones, zero (and minus zero) as 0.
        assertSame(r, seq: 5, at: t0 + 5_000, distance: 7, position: RidePosition(lat: -33, lon: 151, at: 0))
        assertSame(r, seq: 5, at: t0 + 5_000, position: RidePosition(lat: 0, lon: -0.0, at: -1))
        assertSame(r, seq: 5, at: t0 + 5_000, position: RidePosition(lat: -89.999999999, lon: -179.1234567890123, at: Int64.max))
        XCTAssertEqual(String(decoding: written(r, seq: 5, at: t0 + 5_000, distance: 12, position: RidePosition(lat: 48.8566, lon: 2, at: 9)),
                              as: UTF8.self),
                       #"{"type":"tick","ride":"r-42","state":"riding","elapsed":5,"paused":0,"fare":500,"currency":"KRW","distance":12,"position":[48.8566,2,9],"seq":5,"at":1764430005000}"#)
    }

    func testAnotherPlansFareAndCurrency() {
        let plan = FarePlan(id: "eu", names: ["en": "City"], currency: Currency(code: "EUR")!, price: 100,
                            perMinute: [FareSegment(start: 0, rate: 25, interval: 1), FareSegment(start: 30, rate: 15, interval: 1)],
                            perKm: [FareSegment(start: 0, rate: 40, interval: 1)],
                            cap: FareCap(duration: 60, price: 1_500), billing: .started, pauseRate: 5)
        let r = ride([(600_000, .pause), (120_000, .resume)], start: t0)
        for at in [t0, t0 + 61_000, t0 + 3_600_000, t0 + 86_400_000] {
            assertSame(r, plan: plan, seq: 11, at: at, distance: 5_400)
        }
        XCTAssertTrue(String(decoding: written(r, plan: plan, seq: 1, at: t0 + 1_000), as: UTF8.self).contains(#""currency":"EUR""#))
    }

    func testSeqAndAtAtTheirExtremes() {
        let r = ride(start: t0)
        for (seq, at) in [(Int64(0), t0), (1, t0 + 1), (Int64.max, t0 + 999), (9, Int64(0)), (10, Int64(-1_000)), (Int64.min, t0)] {
            assertSame(r, seq: seq, at: at)
        }
        // A ride started long ago: every figure has many digits.
        assertSame(ride(start: 0, limit: Int64.max / 2), seq: 123_456_789, at: t0)
    }

    func testRideIDsEscapedAsTheOneEncoderEscapesThem() {
        for id in ["", "r", "r-abcdefghij", "ride:with.all_the-valid:chars0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuv",
                   "quote\"back\\slash", "line\nfeed\rcr\ttab", "\u{1}\u{1f}\u{7f}", "기본 요금", "🚲 e-bike", String(repeating: "\u{0}", count: 64)] {
            assertSame(ride(start: t0, id: id), seq: 2, at: t0 + 2_000)
        }
    }

    /// The worst case for the room: every byte of the id escaped to six, every number at its
    /// longest, every optional field present.
    func testMaxBytesHoldsTheLongestTick() {
        let r = ride([(1_000, .pause)], start: Int64.min / 4, id: String(repeating: "\u{1}", count: 64), limit: Int64.max / 2)
        let position = RidePosition(lat: -2.2250738585072014e-308, lon: -1.7976931348623157e+308, at: Int64.min)
        assertSame(r, seq: Int64.min, at: Int64.max / 2, distance: Int64.max, position: position)
    }

    // MARK: the cursor

    func testIntegersAsTheWriterWritesThem() {
        var values: [Int64] = [0, 1, -1, 9, 10, 11, 99, 100, 101, -9, -10, -100, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1]
        var p: Int64 = 1
        for _ in 0..<18 {
            p *= 10
            values += [p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]
        }
        for v in values {
            var w = JSONWriter()
            w.int(v)
            let mine = cursorBytes { $0.int(v) }
            XCTAssertEqual(mine, w.bytes, "\(v)")
            XCTAssertLessThanOrEqual(mine.count, JSONCursor.maxIntBytes, "\(v)")
        }
    }

    func testStringsAsTheWriterEscapesThem() {
        var strings = ["", "a", "KRW", "r-abcdefghij", "exactly15bytes!", "sixteen bytes!!!", String(repeating: "long", count: 40),
                       "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{0}", "\u{1f}", " ", "\u{7f}", "é", "기본 요금", "🚲",
                       "mixed \"quotes\" and \\ and \u{2}\u{10} end"]
        for b in UInt8(0)..<0x80 { strings.append(String(decoding: [b, 0x41, b], as: UTF8.self)) }
        // A bridged-looking, non-native string: a Substring's copy and a string built byte by byte.
        strings.append(String("prefix-r-abc-suffix".dropFirst(7).dropLast(7)))
        for s in strings {
            var w = JSONWriter()
            w.string(s)
            let mine = cursorBytes(room: JSONCursor.maxStringBytes(s)) { $0.string(s) }
            XCTAssertEqual(mine, w.bytes, s.debugDescription)
            XCTAssertLessThanOrEqual(mine.count, JSONCursor.maxStringBytes(s), s.debugDescription)
        }
    }

    /// The eight-bytes-at-a-time test: any byte that needs escaping, at any place in a word of
    /// bytes that do not, is seen; a word of bytes that do not is never sent the slow way.
    func testAWordNeedsEscapingExactlyWhenOneOfItsBytesDoes() {
        for filler: UInt8 in [0x20, 0x41, 0x7F, 0x80, 0xFF] {
            for place in 0..<8 {
                for b in 0...255 {
                    var word = [UInt8](repeating: filler, count: 8)
                    word[place] = UInt8(b)
                    let w = word.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    XCTAssertEqual(JSONCursor.needsEscape(w), b < 0x20 || b == 0x22 || b == 0x5C, "byte \(b) at \(place) among \(filler)")
                }
            }
        }
        // Strings crossing the eight-byte steps with the byte to escape in each place.
        for length in 1...24 {
            for place in 0..<length {
                var bytes = [UInt8](repeating: UInt8(ascii: "r"), count: length)
                bytes[place] = UInt8(ascii: "\"")
                let s = String(decoding: bytes, as: UTF8.self)
                var w = JSONWriter()
                w.string(s)
                XCTAssertEqual(cursorBytes { $0.string(s) }, w.bytes, s)
            }
        }
    }

    func testDoublesAsTheEncodersWriteThem() {
        let values: [Double] = [0, -0.0, 1, -1, 2.5, 48.8566, -179.1234567890123, 1e14, 999_999_999_999_999, 1e15, -1e15, 1e16,
                                1e-7, 0.1 + 0.2, .pi, Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude,
                                Double.leastNonzeroMagnitude, Double.leastNormalMagnitude, -2.2250738585072014e-308,
                                .infinity, -.infinity, .nan]
        for d in values {
            var w = JSONWriter()
            writeNumber(&w, d)
            let mine = cursorBytes { $0.number(d) }
            XCTAssertEqual(mine, w.bytes, "\(d)")
            XCTAssertLessThanOrEqual(mine.count, JSONCursor.maxNumberBytes, "\(d)")
        }
    }

    func testRawPiecesAndBytes() {
        let piece: [UInt8] = Array(#","x":"#.utf8)
        let out = cursorBytes { c in
            c.raw(#"{"a":"#)
            c.int(1)
            piece.withUnsafeBufferPointer { c.raw($0) }
            c.raw(UnsafeBufferPointer(start: nil, count: 0))
            c.byte(UInt8(ascii: "2"))
            c.byte(UInt8(ascii: "}"))
        }
        XCTAssertEqual(String(decoding: out, as: UTF8.self), #"{"a":1,"x":2}"#)
    }
}
