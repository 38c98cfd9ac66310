import Foundation
import RideCore
import Testing
@testable import RideProtocol

// ride.v1's lock-screen messages and the content-state: the goldens in protocol/examples/push
// round-trip byte for byte and decode to these exact values; the content-state the server
// builds from a ride is the golden's; bad registrations get a sentence naming the field.

fileprivate let pushExamples = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("protocol/examples/push")

fileprivate func golden(_ side: String, _ name: String) throws -> [UInt8] {
    var bytes = Array(try Data(contentsOf: pushExamples.appendingPathComponent(side).appendingPathComponent(name + ".json")))
    if bytes.last == 0x0A { bytes.removeLast() }
    return bytes
}

fileprivate func names(_ side: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: pushExamples.appendingPathComponent(side).path)
        .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
}

fileprivate func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

fileprivate func refusal(_ s: String) -> ProtocolError? {
    if case .failure(let e) = ClientCodec.decode(Array(s.utf8)) { return e }
    return nil
}

fileprivate let apnsToken = "7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f"
fileprivate let t0: UnixMillis = 1_764_430_000_000

@Suite struct PushGoldenTests {
    @Test func theGoldensAreTheOnesThisFileChecks() throws {
        #expect(try names("client") == ["register_push.fcm", "register_push.liveactivity", "register_push.push_to_start", "unregister_push"])
        #expect(try names("server") == ["push_registered", "push_registered.push_to_start", "push_unregistered"])
        #expect(try names("content-state") == ["ended", "paused.zone", "riding"])
    }

    @Test func everyClientGoldenRoundTripsByteForByte() throws {
        for name in try names("client") {
            let bytes = try golden("client", name)
            let decoded = ClientCodec.decode(bytes)
            guard case .success(let env) = decoded else { Issue.record("\(name): \(decoded)"); continue }
            #expect(text(ClientCodec.encode(env)) == text(bytes), "\(name)")
        }
    }

    @Test func everyServerGoldenRoundTripsByteForByte() throws {
        for name in try names("server") {
            let bytes = try golden("server", name)
            let decoded = ServerCodec.decode(bytes)
            guard case .success(let m) = decoded else { Issue.record("\(name): \(decoded)"); continue }
            #expect(text(ServerCodec.encode(m)) == text(bytes), "\(name)")
            #expect(name.split(separator: ".").first.map(String.init) == m.type, "file named for its type")
        }
    }

    @Test func theClientGoldensDecodeToTheseValues() throws {
        #expect(ClientCodec.decode(try golden("client", "register_push.liveactivity"))
            == .success(ClientEnvelope(id: "q9", .push(PushRequest(.register, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken))))))
        #expect(ClientCodec.decode(try golden("client", "register_push.push_to_start"))
            == .success(ClientEnvelope(id: "q10", .push(PushRequest(.register, PushTarget(platform: .apns, kind: .pushToStart, ride: nil, token: apnsToken))))))
        #expect(ClientCodec.decode(try golden("client", "unregister_push"))
            == .success(ClientEnvelope(id: "q12", .push(PushRequest(.unregister, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken))))))
        guard case .success(let fcm) = ClientCodec.decode(try golden("client", "register_push.fcm")),
              case .push(let r) = fcm.message else { Issue.record("fcm golden"); return }
        #expect(r.target.platform == .fcm && r.target.kind == .notification && r.target.ride == "r-42")
        #expect(fcm.message.isControl == false)
    }

    @Test func theServerEncodesTheAcknowledgementOfARequest() throws {
        let request = PushRequest(.register, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken))
        #expect(text(ServerMessages.pushAck(PushAck(request), id: "q9")) == text(try golden("server", "push_registered")))
        let gone = PushRequest(.unregister, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken))
        #expect(text(ServerMessages.pushAck(PushAck(gone), id: "q12")) == text(try golden("server", "push_unregistered")))
        // Written after LWS_PRE's spare bytes like every other server frame.
        #expect(ServerMessages.pushAck(PushAck(request), id: "q9", prefix: 16).count == 16 + (try golden("server", "push_registered")).count)
        #expect(ServerMessage.push(PushAck(request), id: "q9").id == "q9")
    }
}

@Suite struct PushRegistrationRefusalTests {
    /// Each bad registration, and the sentence it gets (all `bad_request`, with the id).
    @Test(arguments: [
        (#"{"type":"register_push","id":"a","kind":"liveactivity","ride":"r","token":"00112233445566778899aabbccddeeff"}"#,
         #"missing "platform" ("apns" or "fcm")"#),
        (#"{"type":"register_push","id":"a","platform":"webpush","kind":"liveactivity","ride":"r","token":"00"}"#,
         #""platform" must be "apns" or "fcm""#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"banner","ride":"r","token":"00"}"#,
         #""kind" must be "liveactivity", "push_to_start" or "notification""#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"liveactivity","token":"00112233445566778899aabbccddeeff"}"#,
         #"missing "ride""#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"push_to_start","ride":"r","token":"00112233445566778899aabbccddeeff"}"#,
         #"a "push_to_start" token is the rider's, not a ride's: leave out "ride""#),
        (#"{"type":"register_push","id":"a","platform":"fcm","kind":"liveactivity","ride":"r","token":"abc"}"#,
         #""kind" must be "notification" for "fcm" (Live Activities are iOS)"#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"liveactivity","ride":"r"}"#,
         #"missing "token""#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"liveactivity","ride":"r","token":42}"#,
         #""token" must be a string"#),
        // 15 bytes: one short.
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"liveactivity","ride":"r","token":"00112233445566778899aabbccddee"}"#,
         #""token" must be an APNs device token: hex, 16-200 bytes"#),
        (#"{"type":"register_push","id":"a","platform":"apns","kind":"liveactivity","ride":"r","token":"00112233445566778899aabbccddeefg"}"#,
         #""token" must be an APNs device token: hex, 16-200 bytes"#),
        (#"{"type":"register_push","id":"a","platform":"fcm","kind":"notification","ride":"r","token":"has space"}"#,
         #""token" must be an FCM registration token: 1-4096 printable ASCII characters"#),
        (#"{"type":"unregister_push","id":"a","platform":"fcm","kind":"notification","ride":"r w","token":"t"}"#,
         #""ride" must be 1-64 characters of A-Z a-z 0-9 - _ . :"#),
    ])
    func refused(_ message: String, _ why: String) {
        let e = refusal(message)
        #expect(e?.code == .badRequest)
        #expect(e?.message == why)
        #expect(e?.id == "a")
    }

    @Test func tokenLengthsAtTheEdges() {
        func register(_ platform: String, _ kind: String, _ token: String) -> Result<ClientEnvelope, ProtocolError> {
            ClientCodec.decode(Array(#"{"type":"register_push","platform":"\#(platform)","kind":"\#(kind)","ride":"r","token":"\#(token)"}"#.utf8))
        }
        #expect((try? register("apns", "liveactivity", String(repeating: "ab", count: 16)).get()) != nil)
        #expect((try? register("apns", "liveactivity", String(repeating: "ab", count: 200)).get()) != nil)
        #expect((try? register("apns", "liveactivity", String(repeating: "ab", count: 201)).get()) == nil)
        #expect((try? register("apns", "liveactivity", String(repeating: "a", count: 33)).get()) == nil, "odd length")
        #expect((try? register("fcm", "notification", String(repeating: "x", count: 4096)).get()) != nil)
        #expect((try? register("fcm", "notification", String(repeating: "x", count: 4097)).get()) == nil)
    }

    @Test func apnsTokensAreKeptInLowerCase() {
        let upper = String(repeating: "AB", count: 32)
        let decoded = ClientCodec.decode(Array(#"{"type":"register_push","platform":"apns","kind":"liveactivity","ride":"r","token":"\#(upper)"}"#.utf8))
        guard case .success(let env) = decoded, case .push(let r) = env.message else { Issue.record("\(decoded)"); return }
        #expect(r.target.token == upper.lowercased())
    }
}

@Suite struct RideActivityContentTests {
    fileprivate static func decoded(_ name: String) throws -> RideActivityContent {
        try JSONDecoder().decode(RideActivityContent.self, from: Data(try golden("content-state", name)))
    }

    @Test func everyGoldenDecodesAndEncodesToTheSameBytes() throws {
        for name in try names("content-state") {
            let c = try Self.decoded(name)
            #expect(text(c.json()) == text(try golden("content-state", name)), "\(name)")
        }
    }

    @Test func aRidingRideOnTheStandardPlan() throws {
        // 3 min 12.75 s in: 500 + 3 × 180; the fourth minute completes at 4:00 (1,220).
        let ride = Ride(id: "r-42", planID: "default", owner: "u-7", limit: 1800, startedAt: t0)
        let c = RideActivityContent(ride, .standard, at: t0 + 192_750)
        #expect(c == (try Self.decoded("riding")))
        #expect(c.timerStart == Date(timeIntervalSince1970: Double(t0 + 750) / 1000))
    }

    @Test func aPausedRideInAZone() throws {
        guard case .success(let (_, paused)) = Ride(id: "r-42", planID: "default", owner: "u-7", limit: 1800, startedAt: t0)
            .step(.pause, at: t0 + 192_750) else { Issue.record("pause"); return }
        let c = RideActivityContent(paused, .standard, at: t0 + 300_000,
                                    zone: .init(name: "Trocadéro + Jardins", endAllowed: false))
        // No fare step while paused (the standard plan bills no pause); the limit moves with the pause.
        #expect(c == (try Self.decoded("paused.zone")))
    }

    @Test func anEndedRideCarriesItsReceiptTotal() throws {
        guard case .success(let (_, ended)) = Ride(id: "r-43", planID: "default", owner: nil, limit: nil, startedAt: t0)
            .step(.end, at: t0 + 192_750) else { Issue.record("end"); return }
        let c = RideActivityContent(ended, .standard, at: t0 + 192_750)
        #expect(c == (try Self.decoded("ended")))
        #expect(c.fare == RideSnapshot(ended, .standard, at: t0 + 192_750).receipt?.fare)
    }

    @Test func noFareStepPastTheLimit() {
        // 60 s limit, 4 s in: the next minute would complete exactly at the limit's end.
        let ride = Ride(id: "r", planID: "default", owner: nil, limit: 59, startedAt: t0)
        let c = RideActivityContent(ride, .standard, at: t0 + 4_000)
        #expect(c.limitAt == t0 + 59_000)
        #expect(c.fareNext == nil && c.fareNextAt == nil)
    }

    @Test func codableRoundTripIsTheSameValue() throws {
        let c = RideActivityContent(ride: "r", state: .riding, elapsed: 5, at: 10_000, fare: 500, currency: "KRW",
                                    fareNext: 680, fareNextAt: 65_000, limitAt: 100_000, zone: .init(name: nil, endAllowed: true))
        #expect(try JSONDecoder().decode(RideActivityContent.self, from: Data(c.json())) == c)
        #expect(text(c.json()).contains(#""zone":{"end_allowed":true}"#), "a nil name is left out")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(RideActivityContent.self, from: Data(#"{"ride":"r","state":"flying","elapsed":1,"at":1,"fare":1,"currency":"KRW"}"#.utf8))
        }
    }
}
