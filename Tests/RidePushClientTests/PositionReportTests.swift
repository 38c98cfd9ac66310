import Foundation
import RideCore
import RideProtocol
import XCTest
@testable import RidePushClient

/// Positions, zone pushes and the zone fields of start/end through the pure core: what goes
/// out is compared byte for byte with protocol/examples/zones; time is a ManualClock.
final class PositionReportTests: XCTestCase {
    let t0: Int64 = 1_764_430_000_000
    var tok: String { token(exp: t0 / 1000 + 3600) }

    static let zones = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/examples/zones")

    func golden(_ side: String, _ name: String) throws -> String {
        let text = try String(contentsOf: Self.zones.appendingPathComponent(side).appendingPathComponent(name + ".json"), encoding: .utf8)
        return text.trimmingCharacters(in: .newlines)
    }

    /// The golden with its request id swapped for the one the core drew.
    func golden(_ side: String, _ name: String, id: String) throws -> String {
        let text = try golden(side, name)
        let old = try XCTUnwrap(Harness.id(text))
        return text.replacingOccurrences(of: #""id":"\#(old)""#, with: #""id":"\#(id)""#)
    }

    let goldenFix = PositionReport(ride: "r-42", lat: 37.5665, lon: 126.978, at: 1_764_430_061_000, accuracy: 8)

    func connected() -> Harness {
        var h = Harness(jitter: [0])
        h.token(tok)
        h.do { $0.subscribe("r-42") }
        h.connectAndAuthenticate()
        return h
    }

    func testAPositionWhileConnectedGoesOutAtOnceAsTheGolden() throws {
        var h = connected()
        h.do { $0.report(goldenFix) }
        XCTAssertEqual(h.frames.last, try golden("client", "position"))
        XCTAssertTrue(h.core.positions.isEmpty)
        XCTAssertTrue(h.replies.isEmpty, "fire-and-forget: nothing waits for an answer")
        XCTAssertTrue(h.core.pending.isEmpty, "no request is pending for it")
    }

    func testWhileDisconnectedOnlyTheNewestPositionPerRideWaits() throws {
        var h = connected()
        h.close(1006)
        XCTAssertEqual(Harness.waitDelay(h.lastState), 0)
        let seoul = [37.5, 37.501, 37.502, 37.503, 37.504], paris = [48.8, 48.801, 48.802, 48.803, 48.804]
        for i in 0..<5 {
            h.do { $0.report(PositionReport(ride: "r-42", lat: seoul[i], lon: 126.9, at: t0 + Int64(i) * 1000, accuracy: 5)) }
            h.do { $0.report(PositionReport(ride: "r-7", lat: paris[i], lon: 2.29, at: t0 + Int64(i) * 1000, accuracy: 5)) }
        }
        // A late fix older than the waiting one does not replace it.
        h.do { $0.report(PositionReport(ride: "r-42", lat: 1, lon: 1, at: t0, accuracy: 5)) }
        XCTAssertEqual(h.core.positions.count, 2)
        XCTAssertEqual(h.core.positionOrder, ["r-42", "r-7"])
        XCTAssertEqual(h.core.positions["r-42"]?.at, t0 + 4000)
        h.advance(millis: 0)
        h.open()
        XCTAssertFalse(h.frames.contains { $0.contains(#""type":"position""#) }, "not before auth")
        h.connectAndAuthenticate()
        let sent = h.frames.filter { $0.contains(#""type":"position""#) }
        XCTAssertEqual(sent, [
            #"{"type":"position","ride":"r-42","lat":37.504,"lon":126.9,"at":1764430004000,"accuracy":5}"#,
            #"{"type":"position","ride":"r-7","lat":48.804,"lon":2.29,"at":1764430004000,"accuracy":5}"#,
        ])
        XCTAssertTrue(h.core.positions.isEmpty)
        // Sent once: the next reconnect has nothing to resend.
        h.close(1006)
        h.advance(millis: 0)
        h.connectAndAuthenticate()
        XCTAssertFalse(h.frames.contains { $0.contains(#""type":"position""#) })
    }

    func testAPositionStartsTheConnectionAndGoesAfterAuth() throws {
        var h = Harness(jitter: [0])
        h.token(tok)
        h.do { $0.report(goldenFix) }
        XCTAssertEqual(h.connects, [1])
        h.connectAndAuthenticate()
        XCTAssertEqual(h.frames.count, 2)
        XCTAssertTrue(h.frames[0].contains(#""type":"auth""#))
        XCTAssertEqual(h.frames[1], try golden("client", "position"))
    }

    func testAWaitingPositionGoesBeforeItsRidesEndAndAfterItsStart() throws {
        var h = Harness(jitter: [0])
        h.token(tok)
        let start = h.core.request(.start(ride: "r-42", plan: "default", limit: nil))
        h.do { $0.report(goldenFix) }
        let end = h.core.request(.control(.end, ride: "r-42", metres: nil))
        h.run()
        h.connectAndAuthenticate()
        let position = try golden("client", "position")
        XCTAssertEqual(Array(h.frames.dropFirst()), [
            #"{"type":"start","id":"\#(start)","ride":"r-42","plan":"default"}"#,
            position,
            #"{"type":"end","id":"\#(end)","ride":"r-42"}"#,
        ])
    }

    func testSuspendKeepsTheWaitingPositionAndCloseDropsIt() {
        var h = connected()
        h.do { $0.suspend() }
        h.do { $0.report(goldenFix) }
        XCTAssertEqual(h.core.positions.count, 1)
        XCTAssertEqual(h.connects.count, 1, "suspended: a position does not reconnect")
        h.do { $0.close() }
        XCTAssertTrue(h.core.positions.isEmpty)
        h.do { $0.report(goldenFix) }
        XCTAssertTrue(h.core.positions.isEmpty, "closed for good: nothing is kept")
    }

    func testARefusedPositionSurfacesAsAnUnansweredErrorAndClosesNothing() {
        var h = connected()
        h.do { $0.report(goldenFix) }
        let refusal = #"{"type":"error","code":"unknown_type","message":"unknown message type \"position\" (this server does not take positions yet)"}"#
        h.server(refusal)
        XCTAssertEqual(h.unanswered, [ProtocolError(.unknownType, #"unknown message type "position" (this server does not take positions yet)"#)])
        XCTAssertTrue(h.replies.isEmpty)
        XCTAssertTrue(h.disconnects.isEmpty)
        XCTAssertEqual(h.lastState, .connected)
        // An error that carries an id still answers its request, not this stream.
        let id = h.core.request(.get(ride: "r-42"))
        h.run()
        h.server(#"{"type":"error","id":"\#(id)","code":"ride_not_found","message":"no ride r-42"}"#)
        XCTAssertEqual(h.unanswered.count, 1)
        XCTAssertEqual(h.replies.count, 1)
    }

    func testZonePushesReachTheFeedAfterItsSnapshot() throws {
        var h = Harness(jitter: [0])
        h.token(tok)
        h.do { $0.subscribe("r-42") }
        h.connectAndAuthenticate()
        // Before the subscribe's snapshot, a zone push is not shown (the snapshot comes first).
        h.server(try golden("server", "zone"))
        XCTAssertTrue(h.events.isEmpty)
        let sub = try XCTUnwrap(h.frames.last.flatMap(Harness.id))
        h.server(stateJSON(elapsed: 60, at: t0, id: sub))
        h.server(try golden("server", "zone"))
        h.server(try golden("server", "zone.outside"))
        h.server(#"{"type":"zone","ride":"r-9","zone":null,"rules":{"ride_start_allowed":true,"ride_end_allowed":true,"ride_through_allowed":true,"maximum_speed_kph":null}}"#)
        XCTAssertEqual(h.events.map(\.1), [
            .state(try snapshot(stateJSON(elapsed: 60, at: t0, id: sub))),
            .zone(name: "Trocadéro + Jardins", rules: ZoneRules(rideStartAllowed: false, rideEndAllowed: false, rideThroughAllowed: false, maximumSpeedKph: 2)),
            .zone(name: nil, rules: .unrestricted),
        ])
    }

    func testStartAtAPlaceAndAForcedEndAreTheGoldens() throws {
        var h = connected()
        let start = h.core.request(.start(ride: "r-42", plan: "default", limit: nil),
                                   zoneFields: ZoneFields(position: GeoPoint(lat: 48.8616, lon: 2.2892), vehicleType: "escooter_paris"))
        h.run()
        XCTAssertEqual(h.frames.last, try golden("client", "start", id: start))
        let end = h.core.request(.control(.end, ride: "r-42", metres: nil), zoneFields: ZoneFields(force: true))
        h.run()
        XCTAssertEqual(h.frames.last, try golden("client", "end.force", id: end))
        // Refused ends are answered to the call with the server's sentence.
        h.server(try golden("server", "error.end_not_allowed", id: end))
        guard case .failure(.server(let e))? = h.replies.last?.1 else { return XCTFail("no refusal") }
        XCTAssertEqual(e.code, .endNotAllowed)
        XCTAssertEqual(e.message, #"rides may not end in zone "Trocadéro + Jardins""#)
    }

    func testSnapshotsKeepDistanceAndPositionAndTicksUpdateThem() throws {
        var h = Harness(jitter: [0])
        h.token(tok)
        h.do { $0.subscribe("r-42") }
        h.connectAndAuthenticate()
        let sub = try XCTUnwrap(h.frames.last.flatMap(Harness.id))
        var state = stateJSON(elapsed: 60, at: t0, id: sub)
        state = state.replacingOccurrences(of: #""owner":"u1","#, with: #""owner":"u1","distance":120,"position":{"lat":37.5665,"lon":126.978,"at":\#(t0 - 500)},"#)
        h.server(state)
        XCTAssertEqual(h.latest["r-42"]?.distance, 120)
        XCTAssertEqual(h.latest["r-42"]?.position, RidePosition(lat: 37.5665, lon: 126.978, at: t0 - 500))
        // A tick with a distance only keeps the known position; a compact position replaces it.
        var tick = tickJSON(elapsed: 61, at: t0 + 1000)
        tick = tick.replacingOccurrences(of: #","seq""#, with: #","distance":130,"seq""#)
        h.server(tick)
        XCTAssertEqual(h.latest["r-42"]?.distance, 130)
        XCTAssertEqual(h.latest["r-42"]?.position?.lat, 37.5665)
        tick = tickJSON(elapsed: 62, at: t0 + 2000, seq: 2)
        tick = tick.replacingOccurrences(of: #","seq""#, with: #","distance":141,"position":[37.5666,126.9781,\#(t0 + 1900)],"seq""#)
        h.server(tick)
        XCTAssertEqual(h.latest["r-42"]?.distance, 141)
        XCTAssertEqual(h.latest["r-42"]?.position, RidePosition(lat: 37.5666, lon: 126.9781, at: t0 + 1900))
        // A server without positions: a tick without them keeps what is known.
        h.server(tickJSON(elapsed: 63, at: t0 + 3000, seq: 3))
        XCTAssertEqual(h.latest["r-42"]?.distance, 141)
        XCTAssertEqual(h.latest["r-42"]?.elapsed, 63)
    }

    func testOlderServersSnapshotsDecodeWithoutDistanceOrPosition() throws {
        let s = try snapshot(stateJSON(elapsed: 60, at: t0, id: "x"))
        XCTAssertNil(s.distance)
        XCTAssertNil(s.position)
        // And a bad position is refused with the field named, not guessed at.
        let bad = stateJSON(elapsed: 60, at: t0).replacingOccurrences(of: #""owner":"u1","#, with: #""owner":"u1","position":{"lat":91,"lon":0},"#)
        guard case .failure(let e) = ServerCodec.decode(Array(bad.utf8)) else { return XCTFail("accepted lat 91") }
        XCTAssertTrue(e.message.contains("\"position\""), e.message)
    }

    func testTheSDKRefusesWhatTheServerWouldRefuseBeforeQueueing() {
        XCTAssertNil(PositionReport(ride: "r-42", lat: 37.5, lon: 126.9, at: t0, accuracy: 5).refusal)
        XCTAssertEqual(PositionReport(ride: "r-42", lat: 91, lon: 126.9, at: t0, accuracy: 5).refusal,
                       "\"lat\" must be a number of degrees from -90 to 90")
        XCTAssertEqual(PositionReport(ride: "r-42", lat: 37.5, lon: 126.9, at: t0, accuracy: -1).refusal,
                       "\"accuracy\" must be a number of metres from 0 to 100000")
        XCTAssertNotNil(PositionReport(ride: "r-42", lat: .nan, lon: 126.9, at: t0, accuracy: 5).refusal)
        XCTAssertEqual(Position(lat: 1, lon: 2, timestamp: Date(timeIntervalSince1970: 1_764_430_061.0004), accuracy: 3).at,
                       1_764_430_061_000)
    }

    func snapshot(_ json: String) throws -> RideSnapshot {
        guard case .success(.state(let s, _)) = ServerCodec.decode(Array(json.utf8)) else { throw XCTSkip("not a state") }
        return s
    }
}
