import Foundation
import RideCore
import RideProtocol
import XCTest
@testable import RidePushClient

// registerPush / unregisterPush (issue 38, item 7): the frame the SDK sends is the golden's,
// the server's acknowledgement of the same id answers the call, bad_request and forbidden are
// thrown as the server's errors (not retried), a registration waits and is resent with its id
// across a reconnect, and the content-state goldens decode to what a widget shows.

fileprivate let root = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A golden of protocol/examples/push without its final newline.
fileprivate func golden(_ side: String, _ name: String) throws -> String {
    let url = root.appendingPathComponent("protocol/examples/push").appendingPathComponent(side).appendingPathComponent(name + ".json")
    var s = try String(contentsOf: url, encoding: .utf8)
    while s.hasSuffix("\n") { s.removeLast() }
    return s
}

fileprivate let apnsToken = "7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f7b1f0c3e5a2d4f6b8c9e0a1b2c3d4e5f"

final class PushRegistrationCoreTests: XCTestCase {
    func connected() -> Harness {
        var h = Harness()
        h.do { $0.subscribe("r-0") }
        h.token("t")
        h.connectAndAuthenticate()
        h.server(stateJSON("r-0", elapsed: 0, at: h.clock.now(), id: Harness.id(h.frames.last!)))
        return h
    }

    func request(_ h: inout Harness, _ action: PushRequest.Action, _ target: PushTarget, timeout: Int64? = nil) -> String {
        var id = ""
        h.do { id = $0.request(.push(PushRequest(action, target)), timeout: timeout) }
        return id
    }

    /// The SDK's frame for each client golden's fields is the golden, but for the request id.
    func testTheFramesAreTheGoldensWithTheClientsIDs() throws {
        let cases: [(String, PushRequest.Action, PushTarget)] = [
            ("register_push.liveactivity", .register, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken)),
            ("register_push.push_to_start", .register, PushTarget(platform: .apns, kind: .pushToStart, ride: nil, token: apnsToken)),
            ("register_push.fcm", .register, PushTarget(platform: .fcm, kind: .notification, ride: "r-42",
                                                         token: "fGx3kQ2sR9e:APA91bH7vLq0zT4mN8pK2wYc6uJ1dE5rS3aX9oB0fV7gH2iQ4lM6nP8tU1yW3zC5")),
            ("unregister_push", .unregister, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken)),
        ]
        var h = connected()
        for (name, action, target) in cases {
            let g = try golden("client", name)
            let goldenID = try XCTUnwrap(Harness.id(g))
            let id = request(&h, action, target)
            XCTAssertEqual(h.frames.last, g.replacingOccurrences(of: #""id":"\#(goldenID)""#, with: #""id":"\#(id)""#), name)
        }
    }

    /// Each server golden, sent with the request's id, answers it with that acknowledgement.
    func testTheServersGoldensAnswerTheirRequests() throws {
        let cases: [(String, PushRequest.Action, PushTarget)] = [
            ("push_registered", .register, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken)),
            ("push_registered.push_to_start", .register, PushTarget(platform: .apns, kind: .pushToStart, ride: nil, token: apnsToken)),
            ("push_unregistered", .unregister, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken)),
        ]
        var h = connected()
        for (name, action, target) in cases {
            let g = try golden("server", name)
            let id = request(&h, action, target)
            h.server(g.replacingOccurrences(of: #""id":"\#(Harness.id(g)!)""#, with: #""id":"\#(id)""#))
            guard let (answered, result) = h.replies.last, answered == id, case .success(.push(let ack, let ackID)) = result else {
                return XCTFail("\(name): \(String(describing: h.replies.last))")
            }
            XCTAssertEqual(ackID, id)
            XCTAssertEqual(ack, PushAck(PushRequest(action, target)), name)
        }
        XCTAssertTrue(h.core.pending.isEmpty, "every request answered")
    }

    func testBadRequestAndForbiddenAreTheServersAnswersNotRetried() {
        var h = connected()
        let bad = request(&h, .register, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-0", token: "zz"))
        h.server(#"{"type":"error","id":"\#(bad)","code":"bad_request","message":"\"token\" must be an APNs device token: hex, 16-200 bytes"}"#)
        let theirs = request(&h, .register, PushTarget(platform: .fcm, kind: .notification, ride: "r-9", token: "abc"))
        h.server(#"{"type":"error","id":"\#(theirs)","code":"forbidden","message":"not your ride"}"#)
        XCTAssertEqual(h.replies.map(\.0), [bad, theirs])
        guard case .failure(.server(let e1)) = h.replies[0].1, case .failure(.server(let e2)) = h.replies[1].1 else {
            return XCTFail("\(h.replies)")
        }
        XCTAssertEqual(e1.code, .badRequest)
        XCTAssertTrue(e1.message.contains("APNs device token"), e1.message)
        XCTAssertEqual(e2.code, .forbidden)
        XCTAssertTrue(h.retries.isEmpty, "a refusal is final")
        XCTAssertTrue(h.core.pending.isEmpty)
    }

    /// A registration made offline waits, goes out once authenticated, and is sent again with
    /// the same id after the connection drops before its answer.
    func testARegistrationWaitsAndIsResentWithItsIDAfterAReconnect() {
        var h = Harness()
        let target = PushTarget(platform: .apns, kind: .pushToStart, ride: nil, token: apnsToken)
        let id = request(&h, .register, target)
        XCTAssertEqual(h.tokenFetches, 1, "the request starts the connection")
        h.token("t")
        h.connectAndAuthenticate()
        let first = h.frames.filter { $0.contains(#""type":"register_push""#) }
        XCTAssertEqual(first.count, 1)
        h.close(1006)
        h.advanceToWakeup()
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.filter { $0.contains(#""type":"register_push""#) }, first, "the same frame, the same id")
        h.server(#"{"type":"push_registered","id":"\#(id)","platform":"apns","kind":"push_to_start"}"#)
        guard case .success(.push(let ack, _))? = h.replies.last?.1 else { return XCTFail("\(h.replies)") }
        XCTAssertNil(ack.ride)
        XCTAssertEqual(ack.kind, .pushToStart)
    }

    func testNoAnswerWithinTheTimeoutThrowsTimedOut() {
        var h = connected()
        let id = request(&h, .unregister, PushTarget(platform: .apns, kind: .liveActivity, ride: "r-0", token: apnsToken), timeout: 2_000)
        h.advance(millis: 1_999)
        XCTAssertTrue(h.replies.isEmpty)
        h.advance(millis: 1)
        XCTAssertEqual(h.replies.count, 1)
        XCTAssertEqual(h.replies[0].0, id)
        guard case .failure(.timedOut(let after)) = h.replies[0].1 else { return XCTFail("\(h.replies)") }
        XCTAssertEqual(after, .seconds(2))
    }
}

final class PushRegistrationDriverTests: XCTestCase {
    func client(_ server: FakeServer) -> RidePushClient {
        RidePushClient(url: URL(string: "ws://127.0.0.1:1/ws")!, transport: server, clock: SystemClock(),
                       random: SystemRandomNumberGenerator(), timing: ClientCore.Timing()) { "t" }
    }

    func testRegisterAndUnregisterReturnTheAcknowledgements() async throws {
        let server = FakeServer()
        let c = client(server)
        defer { c.close() }
        let ack = try await c.registerPush(platform: .apns, kind: .liveActivity, ride: "r-42", token: apnsToken)
        XCTAssertEqual(ack, PushAck(.register, platform: .apns, kind: .liveActivity, ride: "r-42"))
        let start = try await c.registerPush(platform: .apns, kind: .pushToStart, ride: nil, token: apnsToken.uppercased())
        XCTAssertEqual(start, PushAck(.register, platform: .apns, kind: .pushToStart, ride: nil))
        let gone = try await c.unregisterPush(platform: .fcm, kind: .notification, ride: "r-42", token: "fcm:tok")
        XCTAssertEqual(gone, PushAck(.unregister, platform: .fcm, kind: .notification, ride: "r-42"))
        let sent = server.frames.filter { $0.contains("_push\"") }
        XCTAssertEqual(sent.count, 3)
        XCTAssertTrue(sent[1].hasSuffix(#","platform":"apns","kind":"push_to_start","token":"\#(apnsToken.uppercased())"}"#),
                      "no ride for push-to-start; the token as given (the server lower-cases it): \(sent[1])")
    }

    func testABadTokenThrowsBadRequestAndAnotherRidersRideForbidden() async throws {
        let server = FakeServer()
        let c = client(server)
        defer { c.close() }
        do {
            try await c.registerPush(platform: .apns, kind: .liveActivity, ride: "r-42", token: "not-hex")
            XCTFail("registered a bad token")
        } catch RidePushError.server(let e) {
            XCTAssertEqual(e.code, .badRequest)
        }
        do {
            try await c.registerPush(platform: .apns, kind: .liveActivity, ride: "theirs", token: apnsToken)
            XCTFail("registered on another rider's ride")
        } catch RidePushError.server(let e) {
            XCTAssertEqual(e.code, .forbidden)
        }
    }

    func testTheOtherActionsAcknowledgementIsAnUnexpectedReply() async throws {
        let server = FakeServer()
        let c = client(server)
        defer { c.close() }
        do {
            try await c.registerPush(platform: .apns, kind: .liveActivity, ride: "mixed-up", token: apnsToken)
            XCTFail("took push_unregistered for a registration")
        } catch RidePushError.unexpectedReply(let type) {
            XCTAssertEqual(type, "push_unregistered")
        }
    }
}

/// The content-state goldens as an app decodes them (the server's own encoder is checked in
/// RideProtocolTests), with the values a widget shows.
final class ActivityContentTests: XCTestCase {
    func decoded(_ name: String) throws -> RideActivityContent {
        try JSONDecoder().decode(RideActivityContent.self, from: Data(try golden("content-state", name).utf8))
    }

    func testRiding() throws {
        let c = try decoded("riding")
        XCTAssertEqual(c.state, .riding)
        XCTAssertTrue(c.timerRuns)
        // 192 s of riding at …192.750: the timer started at …000.750.
        XCTAssertEqual(c.timerStart, Date(timeIntervalSince1970: 1_764_430_000.750))
        XCTAssertEqual(c.date, Date(timeIntervalSince1970: 1_764_430_192.750))
        XCTAssertEqual(c.fareAmount, Decimal(1040))
        XCTAssertEqual(c.fareNextAmount, Decimal(1220))
        XCTAssertEqual(c.fareNextDate, Date(timeIntervalSince1970: 1_764_430_240))
        XCTAssertEqual(c.limitDate, Date(timeIntervalSince1970: 1_764_431_800))
        XCTAssertNil(c.zone)
    }

    func testPausedInAZone() throws {
        let c = try decoded("paused.zone")
        XCTAssertEqual(c.state, .paused)
        XCTAssertFalse(c.timerRuns, "a paused ride shows elapsed as it stands")
        XCTAssertEqual(c.elapsed, 192)
        XCTAssertNil(c.fareNextAmount)
        XCTAssertNil(c.fareNextDate)
        XCTAssertEqual(c.zone, RideActivityContent.Zone(name: "Trocadéro + Jardins", endAllowed: false))
    }

    func testEnded() throws {
        let c = try decoded("ended")
        XCTAssertEqual(c.state, .ended)
        XCTAssertFalse(c.timerRuns)
        XCTAssertEqual(c.fareAmount, Decimal(1040))
        XCTAssertNil(c.limitDate)
    }

    func testAmountsAreExactInMajorUnits() throws {
        func content(_ fare: Int64, _ currency: String) -> RideActivityContent {
            RideActivityContent(ride: "r", state: .riding, elapsed: 0, at: 0, fare: fare, currency: currency, fareNext: fare + 1)
        }
        XCTAssertEqual(content(1040, "USD").fareAmount, Decimal(string: "10.40"))
        XCTAssertEqual(content(1040, "USD").fareNextAmount, Decimal(string: "10.41"))
        XCTAssertEqual(content(1234, "KWD").fareAmount, Decimal(string: "1.234"))
        XCTAssertEqual(content(-5, "EUR").fareAmount, Decimal(string: "-0.05"))
        XCTAssertNil(content(100, "XXX").fareAmount, "an unknown currency's decimals are not guessed")
    }
}
