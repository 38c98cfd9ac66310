import XCTest
import RideCore
@testable import RideProtocol

/// ride.v1 both ways: `ClientCodec.decode` for every client message and every way one can be
/// wrong, and the exact bytes of the server's encoders (field order included).
final class CodecTests: XCTestCase {
    private let t0: UnixMillis = 1_764_430_000_000
    private let standardPlanJSON =
        #"{"id":"default","name":"Standard","currency":"KRW","price":500,"per_min":[{"start":0,"rate":180,"interval":1}],"billing":"completed"}"#

    // MARK: helpers

    private func decode(_ text: String) -> Result<ClientEnvelope, ProtocolError> {
        ClientCodec.decode(Array(text.utf8))
    }

    private func message(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ClientMessage? {
        switch decode(text) {
        case .success(let env): return env.message
        case .failure(let e):
            XCTFail("\(text) refused: \(e.code) \(e.message)", file: file, line: line)
            return nil
        }
    }

    private func failure(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ProtocolError? {
        switch decode(text) {
        case .success(let env):
            XCTFail("\(text) accepted as \(env)", file: file, line: line)
            return nil
        case .failure(let e): return e
        }
    }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private func ride(_ ops: [(Int64, RideCommand)], start: UnixMillis, id: String = "r-42", owner: String? = nil,
                      limit: Int64? = nil) -> Ride {
        var r = Ride(id: id, planID: "default", owner: owner, limit: limit, startedAt: start)
        var t = start
        for (ms, command) in ops {
            t += ms
            guard case .success(let tr) = r.transition(for: command, at: t),
                  case .success(let next) = r.applying(tr) else {
                XCTFail("\(command) at \(t)")
                return r
            }
            r = next
        }
        return r
    }

    // MARK: decode: every message type

    func testDecodesStart() {
        XCTAssertEqual(decode(#"{"type":"start","id":"q1","ride":"r-42"}"#),
                       .success(ClientEnvelope(id: "q1", message: .start(ride: "r-42", plan: nil, limit: nil))))
        XCTAssertEqual(message(#"{"type":"start"}"#), .start(ride: nil, plan: nil, limit: nil))
        XCTAssertEqual(message(#"{"type":"start","plan":"night","limit":1800}"#), .start(ride: nil, plan: "night", limit: 1800))
        XCTAssertEqual(message(#"{"type":"start","plan":null,"limit":null}"#), .start(ride: nil, plan: nil, limit: nil))
        XCTAssertEqual(message(#"{"type":"start","limit":1}"#), .start(ride: nil, plan: nil, limit: 1))
    }

    func testDecodesControlMessages() {
        XCTAssertEqual(message(#"{"type":"pause","ride":"r-42"}"#), .control(.pause, ride: "r-42", metres: nil))
        XCTAssertEqual(message(#"{"type":"resume","ride":"r-42"}"#), .control(.resume, ride: "r-42", metres: nil))
        XCTAssertEqual(message(#"{"type":"end","ride":"r-42"}"#), .control(.end, ride: "r-42", metres: nil))
        XCTAssertEqual(message(#"{"type":"end","ride":"r-42","distance":1500}"#), .control(.end, ride: "r-42", metres: 1500))
        XCTAssertEqual(message(#"{"type":"end","ride":"r-42","distance":0}"#), .control(.end, ride: "r-42", metres: 0))
    }

    func testDecodesSubscriptionsAndReads() {
        XCTAssertEqual(message(#"{"type":"subscribe","ride":"r-42"}"#), .subscribe(ride: "r-42"))
        XCTAssertEqual(message(#"{"type":"unsubscribe","ride":"r-42"}"#), .unsubscribe(ride: "r-42"))
        XCTAssertEqual(message(#"{"type":"get","ride":"r-42"}"#), .get(ride: "r-42"))
        XCTAssertEqual(message(#"{"type":"share","ride":"r-42"}"#), .share(ride: "r-42"))
        XCTAssertEqual(message(#"{"type":"auth","token":"a.b.c"}"#), .auth(token: "a.b.c"))
    }

    func testDecodesQuote() {
        XCTAssertEqual(message(#"{"type":"quote","seconds":192}"#), .quote(plan: nil, seconds: 192, paused: 0))
        XCTAssertEqual(message(#"{"type":"quote","plan":"default","seconds":0,"paused":30}"#),
                       .quote(plan: "default", seconds: 0, paused: 30))
        XCTAssertEqual(failure(#"{"type":"quote"}"#)?.code, .badRequest)
        XCTAssertEqual(failure(#"{"type":"quote","seconds":-1}"#)?.code, .badRequest)
        XCTAssertEqual(failure(#"{"type":"quote","seconds":10,"paused":-1}"#)?.code, .badRequest)
        XCTAssertEqual(failure(#"{"type":"quote","seconds":"10"}"#)?.code, .badRequest)
    }

    func testWhitespaceAndFieldOrderDoNotMatter() {
        XCTAssertEqual(decode(" {\n\t\"ride\" : \"r-1\" ,\r\n \"id\":\"x\", \"type\" : \"pause\" } \n"),
                       .success(ClientEnvelope(id: "x", message: .control(.pause, ride: "r-1", metres: nil))))
    }

    func testUnknownFieldsAreIgnored() {
        XCTAssertEqual(message(#"{"type":"subscribe","ride":"r-42","extra":{"deep":[1,2,3]}}"#), .subscribe(ride: "r-42"))
    }

    func testIsControl() {
        XCTAssertTrue(ClientMessage.start(ride: nil, plan: nil, limit: nil).isControl)
        XCTAssertTrue(ClientMessage.control(.end, ride: "r", metres: nil).isControl)
        XCTAssertFalse(ClientMessage.subscribe(ride: "r").isControl)
        XCTAssertFalse(ClientMessage.unsubscribe(ride: "r").isControl)
        XCTAssertFalse(ClientMessage.get(ride: "r").isControl)
        XCTAssertFalse(ClientMessage.quote(plan: nil, seconds: 1, paused: 0).isControl)
        XCTAssertFalse(ClientMessage.auth(token: "t").isControl)
        XCTAssertFalse(ClientMessage.share(ride: "r").isControl)
    }

    // MARK: decode: id

    func testIDIsCarriedOrAbsent() {
        guard case .success(let withID) = decode(#"{"type":"get","ride":"r","id":"req-7"}"#),
              case .success(let without) = decode(#"{"type":"get","ride":"r"}"#) else { return XCTFail() }
        XCTAssertEqual(withID.id, "req-7")
        XCTAssertNil(without.id)
    }

    func testIDUpTo64Bytes() {
        let id64 = String(repeating: "a", count: 64)
        guard case .success(let env) = decode(#"{"type":"get","ride":"r","id":"\#(id64)"}"#) else { return XCTFail() }
        XCTAssertEqual(env.id, id64)
        let e = failure(#"{"type":"get","ride":"r","id":"\#(id64)b"}"#)
        XCTAssertEqual(e?.code, .badRequest)
        XCTAssertNil(e?.id, "an id that is refused is not echoed")
        XCTAssertEqual(e?.message, "\"id\" must be a non-empty string of at most 64 bytes")

        // Bytes, not characters: 21 Hangul syllables are 63 bytes, 22 are 66.
        let ko21 = String(repeating: "가", count: 21), ko22 = String(repeating: "가", count: 22)
        guard case .success(let ko) = decode(#"{"type":"get","ride":"r","id":"\#(ko21)"}"#) else { return XCTFail() }
        XCTAssertEqual(ko.id, ko21)
        XCTAssertEqual(failure(#"{"type":"get","ride":"r","id":"\#(ko22)"}"#)?.code, .badRequest)
        // An escape counts as the byte it stands for.
        let escaped = String(repeating: #"\u0061"#, count: 64)
        guard case .success(let esc) = decode(#"{"type":"get","ride":"r","id":"\#(escaped)"}"#) else { return XCTFail() }
        XCTAssertEqual(esc.id, id64)
    }

    func testIDMustBeANonEmptyString() {
        for bad in [#"5"#, #"null"#, #"true"#, #"["q1"]"#, #"{"a":1}"#, #""""#] {
            let e = failure(#"{"type":"get","ride":"r","id":\#(bad)}"#)
            XCTAssertEqual(e?.code, .badRequest, "id \(bad)")
            XCTAssertNil(e?.id)
        }
    }

    func testErrorsAfterTheIDCarryIt() {
        let cases: [(String, ErrorCode)] = [
            (#"{"id":"q1"}"#, .badRequest),
            (#"{"id":"q1","type":7}"#, .badRequest),
            (#"{"id":"q1","type":"pause"}"#, .badRequest),
            (#"{"id":"q1","type":"pause","ride":42}"#, .badRequest),
            (#"{"id":"q1","type":"start","limit":"60"}"#, .badRequest),
            (#"{"id":"q1","type":"fly","ride":"r"}"#, .unknownType),
        ]
        for (text, code) in cases {
            let e = failure(text)
            XCTAssertEqual(e?.code, code, text)
            XCTAssertEqual(e?.id, "q1", text)
        }
    }

    // MARK: decode: malformed

    func testNotJSONIsBadRequest() {
        for bad in ["", " ", "hello", "{", #"{"type":"start""#, #"{"type":"start",}"#, #"{'type':'start'}"#,
                    #"{"type":"start"} x"#, "\u{FEFF}{}"] {
            let e = failure(bad)
            XCTAssertEqual(e?.code, .badRequest, bad)
            XCTAssertNil(e?.id)
            XCTAssertTrue(e?.message.hasPrefix("message is not valid JSON (") ?? false, e?.message ?? "")
        }
        XCTAssertEqual(failure(#"{"type":"start""#)?.message, "message is not valid JSON (unexpected end at byte 15)")
    }

    func testInvalidUTF8IsBadRequest() {
        let bytes: [UInt8] = Array(#"{"type":"get","ride":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        guard case .failure(let e) = ClientCodec.decode(bytes) else { return XCTFail() }
        XCTAssertEqual(e.code, .badRequest)
        XCTAssertTrue(e.message.contains("invalid UTF-8"), e.message)
    }

    func testNonObjectIsBadRequest() {
        for bad in ["[]", #"["type","start"]"#, "1", #""start""#, "null", "true"] {
            let e = failure(bad)
            XCTAssertEqual(e?.code, .badRequest, bad)
            XCTAssertEqual(e?.message, "message must be a JSON object", bad)
        }
    }

    func testMissingOrWrongTypedType() {
        XCTAssertEqual(failure("{}")?.message, "missing \"type\"")
        XCTAssertEqual(failure(#"{"type":1}"#)?.message, "\"type\" must be a string")
        XCTAssertEqual(failure(#"{"type":null}"#)?.message, "\"type\" must be a string")
        XCTAssertEqual(failure(#"{"type":["start"]}"#)?.code, .badRequest)
    }

    func testUnknownType() {
        let e = failure(#"{"type":"teleport","id":"q3"}"#)
        XCTAssertEqual(e?.code, .unknownType)
        XCTAssertEqual(e?.id, "q3")
        XCTAssertEqual(e?.message, "unknown message type \"teleport\"")
        XCTAssertEqual(failure(#"{"type":""}"#)?.code, .unknownType)
        XCTAssertEqual(failure(#"{"type":"START"}"#)?.code, .unknownType, "types are case-sensitive")
        let long = String(repeating: "x", count: 500)
        XCTAssertEqual(failure(#"{"type":"\#(long)"}"#)?.message,
                       "unknown message type \"\(String(repeating: "x", count: 40))\"", "the echo is kept short")
    }

    func testMissingOrWrongTypedRide() {
        for type in ["pause", "resume", "end", "subscribe", "unsubscribe", "get", "share"] {
            XCTAssertEqual(failure(#"{"type":"\#(type)"}"#)?.message, "missing \"ride\"", type)
            XCTAssertEqual(failure(#"{"type":"\#(type)","ride":42}"#)?.message, "\"ride\" must be a string", type)
            XCTAssertEqual(failure(#"{"type":"\#(type)","ride":null}"#)?.code, .badRequest, type)
            XCTAssertEqual(failure(#"{"type":"\#(type)","ride":["r"]}"#)?.code, .badRequest, type)
            XCTAssertEqual(failure(#"{"type":"\#(type)","ride":""}"#)?.code, .badRequest, type)
        }
        XCTAssertEqual(failure(#"{"type":"start","ride":42}"#)?.message, "\"ride\" must be a string")
    }

    func testLimitMustBeAPositiveWholeNumber() {
        let cases: [String] = [#""60""#, "1.5", "60.0", "1e3", "-1", "0", "true", "[60]", "99999999999999999999"]
        for bad in cases {
            let e = failure(#"{"type":"start","limit":\#(bad)}"#)
            XCTAssertEqual(e?.code, .badRequest, "limit \(bad)")
            XCTAssertEqual(e?.message, "\"limit\" must be a whole number ≥ 1", "limit \(bad)")
        }
        XCTAssertEqual(message(#"{"type":"start","limit":1000000000}"#),
                       .start(ride: nil, plan: nil, limit: 1_000_000_000))
    }

    func testHugeNumbersAreRefusedBeforeTheyCanOverflow() {
        // limit × 1000 or seconds × rate would trap on Int64 overflow and take the server down.
        let cases: [(String, String)] = [
            (#"{"type":"start","limit":9223372036854775807}"#, "limit"),
            (#"{"type":"start","limit":1000000001}"#, "limit"),
            (#"{"type":"quote","seconds":9223372036854775807}"#, "seconds"),
            (#"{"type":"quote","seconds":0,"paused":9223372036854775807}"#, "paused"),
            (#"{"type":"end","ride":"r","distance":9223372036854775807}"#, "distance"),
        ]
        for (text, field) in cases {
            let e = failure(text)
            XCTAssertEqual(e?.code, .badRequest, text)
            XCTAssertEqual(e?.message, "\"\(field)\" must be at most 1000000000", text)
        }
        XCTAssertEqual(message(#"{"type":"quote","seconds":1000000000,"paused":1000000000}"#),
                       .quote(plan: nil, seconds: 1_000_000_000, paused: 1_000_000_000))
        XCTAssertEqual(FareEngine.fare(.standard, riding: 1_000_000_000, paused: 1_000_000_000),
                       500 + 1_000_000_000 / 60 * 180, "the largest accepted quote is computed, not trapped")
    }

    func testDistanceMustBeANonNegativeWholeNumber() {
        for bad in ["-1", "1.5", #""100""#] {
            XCTAssertEqual(failure(#"{"type":"end","ride":"r","distance":\#(bad)}"#)?.message,
                           "\"distance\" must be a whole number ≥ 0", "distance \(bad)")
        }
    }

    func testStringFields() {
        XCTAssertEqual(failure(#"{"type":"start","plan":""}"#)?.message, "\"plan\" must be a non-empty string")
        XCTAssertEqual(failure(#"{"type":"start","plan":5}"#)?.code, .badRequest)
        XCTAssertEqual(failure(#"{"type":"auth"}"#)?.message, "\"token\" is required")
        XCTAssertEqual(failure(#"{"type":"auth","token":null}"#)?.code, .badRequest)
        XCTAssertEqual(failure(#"{"type":"auth","token":7}"#)?.code, .badRequest)
        let big = String(repeating: "t", count: 4097)
        XCTAssertEqual(failure(#"{"type":"auth","token":"\#(big)"}"#)?.code, .badRequest)
    }

    // MARK: decode: ride ids

    func testRideIDAlphabet() {
        for ok in ["r-42", "R_42", "a.b:c", "0", "abcXYZ019-_.:", String(repeating: "z", count: 64)] {
            XCTAssertTrue(ClientCodec.isValidRideID(ok), ok)
            XCTAssertEqual(message(#"{"type":"subscribe","ride":"\#(ok)"}"#), .subscribe(ride: ok))
        }
        let bad = ["", String(repeating: "z", count: 65), "r 42", "r/42", "r?x", "r#1", "ride%20", "라이드", "é",
                   "r\"x", "r\\x", "r\nx", "r\u{0}x", "<script>", "a,b", "r+1"]
        for b in bad {
            XCTAssertFalse(ClientCodec.isValidRideID(b), b.debugDescription)
            var w = JSONWriter()
            w.beginObject(); w.field("type", "pause"); w.field("ride", b); w.endObject()
            guard case .failure(let e) = ClientCodec.decode(w.bytes) else { XCTFail(b.debugDescription); continue }
            XCTAssertEqual(e.code, .badRequest, b.debugDescription)
            XCTAssertEqual(e.message, "\"ride\" must be 1-64 characters of A-Z a-z 0-9 - _ . :", b.debugDescription)
        }
    }

    func testErrorMessagesAreSentences() {
        let texts = ["nope", "[]", "{}", #"{"type":2}"#, #"{"type":"x"}"#, #"{"type":"pause"}"#,
                     #"{"type":"pause","ride":"a b"}"#, #"{"type":"start","limit":0}"#, #"{"id":1}"#]
        for t in texts {
            guard let e = failure(t) else { continue }
            XCTAssertGreaterThan(e.message.count, 10, t)
            XCTAssertFalse(e.message.contains("Optional("), t)
            XCTAssertFalse(e.message.contains("ParseError"), t)
        }
    }

    // MARK: server messages: tick

    func testTickBytesExactly() {
        let r = ride([], start: t0)
        var out: [UInt8] = []
        ServerMessages.tick(into: &out, ride: r, plan: .standard, seq: 1234, at: t0 + 192_000, prefix: 0)
        XCTAssertEqual(text(out),
                       #"{"type":"tick","ride":"r-42","state":"riding","elapsed":192,"paused":0,"fare":1040,"currency":"KRW","seq":1234,"at":1764430192000}"#)
    }

    func testTickOfAPausedRideWithALimit() {
        let r = ride([(61_500, .pause)], start: t0 + 123, limit: 600)
        var out: [UInt8] = []
        ServerMessages.tick(into: &out, ride: r, plan: .standard, seq: 7, at: t0 + 75_000, prefix: 0)
        XCTAssertEqual(text(out),
                       #"{"type":"tick","ride":"r-42","state":"paused","elapsed":61,"paused":13,"fare":680,"currency":"KRW","remaining":539,"seq":7,"at":1764430075000}"#)
    }

    func testTickReusesTheBufferAndReplacesItsContent() {
        var out: [UInt8] = Array(repeating: 0x41, count: 300)
        let r = ride([], start: t0)
        ServerMessages.tick(into: &out, ride: r, plan: .standard, seq: 1, at: t0 + 1_000, prefix: 0)
        let first = text(out)
        XCTAssertTrue(first.hasPrefix(#"{"type":"tick""#), first)
        XCTAssertGreaterThanOrEqual(out.capacity, 300)
        let base = out.withUnsafeBufferPointer { $0.baseAddress }
        ServerMessages.tick(into: &out, ride: r, plan: .standard, seq: 2, at: t0 + 2_000, prefix: 16)
        XCTAssertEqual(out.withUnsafeBufferPointer { $0.baseAddress }, base, "no new allocation per tick")
        XCTAssertEqual(Array(out.prefix(16)), Array(repeating: 0, count: 16))
        XCTAssertEqual(text(Array(out.dropFirst(16))),
                       #"{"type":"tick","ride":"r-42","state":"riding","elapsed":2,"paused":0,"fare":500,"currency":"KRW","seq":2,"at":1764430002000}"#)
    }

    // MARK: server messages: state

    func testStateOfARidingRide() {
        let r = ride([], start: t0)
        let bytes = ServerMessages.state(ride: r, plan: .standard, at: t0 + 192_500, id: "q1", prefix: 0)
        XCTAssertEqual(text(bytes),
                       #"{"type":"state","id":"q1","ride":"r-42","state":"riding","elapsed":192,"paused":0,"fare":1040,"currency":"KRW","at":1764430192500,"started_at":1764430000000,"ended_at":null,"paused_since":null,"plan":\#(standardPlanJSON)}"#)
    }

    func testReplyAndPushAreStateWithAndWithoutTheRequestID() {
        let r = ride([(30_500, .pause)], start: t0, owner: "rider-1", limit: 1_800)
        for id in ["q1", #"a "quoted" \ id"#, "이용-7", ""] {
            let (reply, push) = ServerMessages.stateReplyAndPush(ride: r, plan: .standard, at: t0 + 40_500, id: id, prefix: 16)
            XCTAssertEqual(reply, ServerMessages.state(ride: r, plan: .standard, at: t0 + 40_500, id: id, prefix: 16), id)
            XCTAssertEqual(push, ServerMessages.state(ride: r, plan: .standard, at: t0 + 40_500, id: nil, prefix: 16), id)
        }
        let (reply, push) = ServerMessages.stateReplyAndPush(ride: r, plan: .standard, at: t0 + 40_500, id: nil, prefix: 0)
        XCTAssertEqual(reply, push)
        XCTAssertEqual(text(Array(reply.prefix(40))), #"{"type":"state","ride":"r-42","state":"p"#)
    }

    func testStateOfAPausedRideWithLimitAndOwner() {
        let r = ride([(30_500, .pause)], start: t0, owner: "rider-1", limit: 1_800)
        let bytes = ServerMessages.state(ride: r, plan: .standard, at: t0 + 40_500, id: nil, prefix: 0)
        XCTAssertEqual(text(bytes),
                       #"{"type":"state","ride":"r-42","state":"paused","elapsed":30,"paused":10,"fare":500,"currency":"KRW","remaining":1770,"at":1764430040500,"limit":1800,"started_at":1764430000000,"ended_at":null,"paused_since":1764430030500,"owner":"rider-1","plan":\#(standardPlanJSON)}"#)
    }

    func testStateOfAnEndedRideCarriesItsReceipt() {
        let r = ride([(200_400, .end)], start: t0)
        // Asked much later: everything is frozen at the end.
        let bytes = ServerMessages.state(ride: r, plan: .standard, at: t0 + 999_000, id: "q9", prefix: 0)
        let receipt = #"{"elapsed":200,"paused":0,"fare":1040,"currency":"KRW","started_at":1764430000000,"ended_at":1764430200400,"reason":"rider","lines":[{"label":"unlock","amount":500},{"label":"riding","minutes":3,"amount":540}]}"#
        XCTAssertEqual(text(bytes),
                       #"{"type":"state","id":"q9","ride":"r-42","state":"ended","elapsed":200,"paused":0,"fare":1040,"currency":"KRW","at":1764430999000,"started_at":1764430000000,"ended_at":1764430200400,"paused_since":null,"plan":\#(standardPlanJSON),"receipt":\#(receipt)}"#)
    }

    func testReceiptOfATimeLimitEndWithDistance() {
        var r = Ride(id: "r-9", planID: "default", owner: nil, limit: 120, startedAt: t0)
        guard let tr = r.dueAutoEnd(at: t0 + 500_000, maxPauseSeconds: nil),
              case .success(let ended) = r.applying(tr) else { return XCTFail() }
        r = ended
        guard case .object(let doc)? = try? JSON.parse(ServerMessages.state(ride: r, plan: .standard, at: t0 + 500_000, id: nil, prefix: 0)),
              case .object(let receipt)? = doc["receipt"] else { return XCTFail("no receipt") }
        XCTAssertEqual(receipt["reason"], .string("time_limit"))
        XCTAssertEqual(receipt["ended_at"]?.int, t0 + 120_000)
        XCTAssertEqual(receipt["elapsed"]?.int, 120)
        XCTAssertEqual(receipt["fare"]?.int, 860)
        XCTAssertNil(doc["remaining"], "an ended ride has nothing left")
        XCTAssertEqual(doc["limit"]?.int, 120)

        let withKm = ride([(65_000, .pause), (5_000, .end)], start: t0)
        guard case .object(let d2)? = try? JSON.parse(ServerMessages.state(ride: withKm, plan: .standard, at: t0 + 80_000, id: nil, prefix: 0)),
              case .object(let r2)? = d2["receipt"] else { return XCTFail("no receipt") }
        XCTAssertEqual(r2["paused"]?.int, 5)
        XCTAssertEqual(r2["fare"], d2["fare"], "the receipt's total is the fare shown")
        XCTAssertEqual(r2["fare"]?.int, 680)
        let lines = r2["lines"]?.array ?? []
        XCTAssertEqual(lines.first, .object(["label": .string("unlock"), "amount": .number("500")]))
        XCTAssertEqual(lines.dropFirst().first, .object(["label": .string("riding"), "minutes": .number("1"), "amount": .number("180")]))
        let sum = lines.compactMap { $0["amount"]?.int }.reduce(0, +)
        XCTAssertEqual(sum, 680, "the lines add up to the total")
    }

    func testRideDocumentIsTheStateWithoutTypeOrID() {
        let r = ride([(10_000, .pause)], start: t0)
        let doc = text(ServerMessages.rideDocument(ride: r, plan: .standard, at: t0 + 12_000))
        let state = text(ServerMessages.state(ride: r, plan: .standard, at: t0 + 12_000, id: nil, prefix: 0))
        XCTAssertEqual("{" + #""type":"state","# + doc.dropFirst(), state)
    }

    // MARK: server messages: the others

    func testErrorMessage() {
        XCTAssertEqual(text(ServerMessages.error(ProtocolError(.rideNotFound, "no ride \"r-1\"", id: "q1"))),
                       #"{"type":"error","id":"q1","code":"ride_not_found","message":"no ride \"r-1\""}"#)
        XCTAssertEqual(text(ServerMessages.error(ProtocolError(.tooLarge, "frame over 4 KiB"))),
                       #"{"type":"error","code":"too_large","message":"frame over 4 KiB"}"#)
        // A decode error goes straight back out, id included.
        guard case .failure(let e) = decode(#"{"type":"nope","id":"q\"2"}"#) else { return XCTFail() }
        XCTAssertEqual(text(ServerMessages.error(e)),
                       #"{"type":"error","id":"q\"2","code":"unknown_type","message":"unknown message type \"nope\""}"#)
    }

    func testErrorCodesAreTheProtocolsNames() {
        let all: [ErrorCode] = [.badRequest, .unknownType, .rideNotFound, .invalidTransition, .conflict, .tooLarge]
        XCTAssertEqual(all.map(\.rawValue),
                       ["bad_request", "unknown_type", "ride_not_found", "invalid_transition", "conflict", "too_large"])
    }

    func testUnsubscribedWarningShare() {
        XCTAssertEqual(text(ServerMessages.unsubscribed(ride: "r-42", id: nil, prefix: 0)),
                       #"{"type":"unsubscribed","ride":"r-42"}"#)
        XCTAssertEqual(text(ServerMessages.unsubscribed(ride: "r-42", id: "u1", prefix: 0)),
                       #"{"type":"unsubscribed","id":"u1","ride":"r-42"}"#)
        XCTAssertEqual(text(ServerMessages.warning(ride: "r-42", remaining: 60, prefix: 0)),
                       #"{"type":"warning","ride":"r-42","remaining":60}"#)
        XCTAssertEqual(text(ServerMessages.share(ride: "r-42", id: "s", url: "http://h/?ride=r-42", token: "a.b.c", prefix: 0)),
                       #"{"type":"share","id":"s","ride":"r-42","url":"http://h/?ride=r-42","token":"a.b.c"}"#)
    }

    func testQuoteMessage() {
        let q = FareEngine.quote(.standard, riding: 192, paused: 0)
        XCTAssertEqual(text(ServerMessages.quote(id: "q", plan: .standard, quote: q, seconds: 192, paused: 0)),
                       #"{"type":"quote","id":"q","plan":"default","seconds":192,"paused":0,"fare":1040,"currency":"KRW","lines":[{"label":"unlock","amount":500},{"label":"riding","minutes":3,"amount":540}]}"#)
    }

    func testEveryEncoderPutsThePrefixBeforeTheJSON() {
        let r = ride([(5_000, .end)], start: t0)
        let q = FareEngine.quote(.standard, riding: 5, paused: 0)
        for n in [0, 1, 16, 40] {
            var tick: [UInt8] = []
            ServerMessages.tick(into: &tick, ride: r, plan: .standard, seq: 1, at: t0, prefix: n)
            let frames: [(String, [UInt8], [UInt8])] = [
                ("tick", tick, { var t: [UInt8] = []; ServerMessages.tick(into: &t, ride: r, plan: .standard, seq: 1, at: t0, prefix: 0); return t }()),
                ("state", ServerMessages.state(ride: r, plan: .standard, at: t0, id: "i", prefix: n),
                 ServerMessages.state(ride: r, plan: .standard, at: t0, id: "i", prefix: 0)),
                ("error", ServerMessages.error(ProtocolError(.conflict, "taken"), prefix: n),
                 ServerMessages.error(ProtocolError(.conflict, "taken"))),
                ("unsubscribed", ServerMessages.unsubscribed(ride: "r", id: nil, prefix: n),
                 ServerMessages.unsubscribed(ride: "r", id: nil, prefix: 0)),
                ("warning", ServerMessages.warning(ride: "r", remaining: 300, prefix: n),
                 ServerMessages.warning(ride: "r", remaining: 300, prefix: 0)),
                ("share", ServerMessages.share(ride: "r", id: nil, url: "u", token: "t", prefix: n),
                 ServerMessages.share(ride: "r", id: nil, url: "u", token: "t", prefix: 0)),
                ("quote", ServerMessages.quote(id: nil, plan: .standard, quote: q, seconds: 5, paused: 0, prefix: n),
                 ServerMessages.quote(id: nil, plan: .standard, quote: q, seconds: 5, paused: 0)),
            ]
            for (name, bytes, plain) in frames {
                XCTAssertEqual(bytes.count, plain.count + n, "\(name) prefix \(n)")
                XCTAssertEqual(Array(bytes.prefix(n)), Array(repeating: 0, count: n), "\(name) prefix \(n)")
                XCTAssertEqual(Array(bytes.dropFirst(n)), plain, "\(name) prefix \(n)")
                XCTAssertEqual(bytes.dropFirst(n).first, UInt8(ascii: "{"), "\(name) prefix \(n)")
            }
        }
    }

    func testEncodedMessagesParseBack() throws {
        let r = ride([(70_000, .pause), (3_000, .resume), (1_000, .end)], start: t0, id: "r:1.a_b-c", owner: "라이더 \"1\"", limit: 900)
        var tick: [UInt8] = []
        ServerMessages.tick(into: &tick, ride: r, plan: .standard, seq: 9, at: t0 + 80_000, prefix: 0)
        for bytes in [tick, ServerMessages.state(ride: r, plan: .standard, at: t0 + 80_000, id: "\u{1}\n\"", prefix: 0),
                      ServerMessages.rideDocument(ride: r, plan: .standard, at: t0 + 80_000),
                      ServerMessages.error(ProtocolError(.badRequest, "줄\n바꿈 \"따옴표\" \\", id: "é"))] {
            let v = try JSON.parse(bytes)
            XCTAssertNotNil(v.object, text(bytes))
        }
        let state = try JSON.parse(ServerMessages.state(ride: r, plan: .standard, at: t0 + 80_000, id: "\u{1}\n\"", prefix: 0))
        XCTAssertEqual(state["id"], .string("\u{1}\n\""))
        XCTAssertEqual(state["owner"], .string("라이더 \"1\""))
        XCTAssertEqual(state["ride"], .string("r:1.a_b-c"))
        XCTAssertEqual(state["state"], .string("ended"))
        XCTAssertEqual(state["elapsed"]?.int, 71)
        XCTAssertEqual(state["paused"]?.int, 3)
        XCTAssertEqual(state["ended_at"]?.int, t0 + 74_000)
        XCTAssertNil(state["remaining"], "an ended ride has no time left")
    }
}
