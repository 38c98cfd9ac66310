import Foundation
import RideCore
import Testing
@testable import RideProtocol

// ride.v1's position and zone messages: the goldens in protocol/examples/zones round-trip byte
// for byte and decode to these exact values; bad input gets a sentence naming the field.

fileprivate let zonesExamples = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("protocol/examples/zones")

fileprivate func golden(_ side: String, _ name: String) throws -> [UInt8] {
    var bytes = Array(try Data(contentsOf: zonesExamples.appendingPathComponent(side).appendingPathComponent(name + ".json")))
    if bytes.last == 0x0A { bytes.removeLast() }
    return bytes
}

fileprivate func names(_ side: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: zonesExamples.appendingPathComponent(side).path)
        .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
}

fileprivate func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

fileprivate func clientError(_ s: String) -> String? {
    if case .failure(let e) = ClientCodec.decode(Array(s.utf8)) { return e.message }
    return nil
}

@Suite struct ZoneGoldenTests {
    @Test func theGoldensAreTheOnesThisFileChecks() throws {
        #expect(try names("client") == ["end.force", "position", "start"])
        #expect(try names("server") == ["error.end_not_allowed", "error.position_required", "error.start_not_allowed", "zone", "zone.outside"])
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

    @Test func theGoldensDecodeToTheseValues() throws {
        #expect(ClientCodec.decode(try golden("client", "position"))
            == .success(ClientEnvelope(id: nil, message: .position(PositionReport(ride: "r-42", lat: 37.5665, lon: 126.978,
                                                                                   at: 1_764_430_061_000, accuracy: 8)))))
        #expect(ClientCodec.decode(try golden("client", "start"))
            == .success(ClientEnvelope(id: "c1", message: .start(ride: "r-42", plan: "default", limit: nil),
                                       zoneFields: ZoneFields(position: GeoPoint(lat: 48.8616, lon: 2.2892), vehicleType: "escooter_paris"))))
        #expect(ClientCodec.decode(try golden("client", "end.force"))
            == .success(ClientEnvelope(id: "o7", message: .control(.end, ride: "r-42", metres: nil), zoneFields: ZoneFields(force: true))))
        #expect(ServerCodec.decode(try golden("server", "zone"))
            == .success(.zone(ZoneUpdate(ride: "r-42", zone: "Trocadéro + Jardins", rideStartAllowed: false, rideEndAllowed: false,
                                         rideThroughAllowed: false, maximumSpeedKph: 2))))
        #expect(ServerCodec.decode(try golden("server", "zone.outside"))
            == .success(.zone(ZoneUpdate(ride: "r-42", zone: nil, rideStartAllowed: true, rideEndAllowed: true,
                                         rideThroughAllowed: true, maximumSpeedKph: nil))))
        guard case .success(.error(let e)) = ServerCodec.decode(try golden("server", "error.end_not_allowed")) else {
            Issue.record("error.end_not_allowed")
            return
        }
        #expect(e.code == .endNotAllowed && e.id == "c4")
    }

    /// The server pushes what `ServerMessages.zone` writes from a decision; the typed encoder
    /// must write the same bytes, or goldens and server could drift apart.
    @Test func theServerWriterAndTheTypedEncoderAgree() throws {
        let d = ZoneDecision(zone: 58, name: "Trocadéro + Jardins",
                             rules: ZoneRules(rideStartAllowed: false, rideEndAllowed: false, rideThroughAllowed: false,
                                              maximumSpeedKph: 2, stationParking: true))
        let pushed = ServerMessages.zone(ride: "r-42", d)
        #expect(text(pushed) == text(try golden("server", "zone")))
        #expect(text(ServerMessages.zone(ride: "r-42", ZoneDecision(zone: nil, name: nil, rules: .unrestricted)))
            == text(try golden("server", "zone.outside")))
        guard case .success(let m) = ServerCodec.decode(pushed) else { Issue.record("decode"); return }
        #expect(ServerCodec.encode(m) == pushed)
        // Written after the frame header's spare bytes, like every server frame.
        #expect(Array(ServerMessages.zone(ride: "r-42", d, prefix: 16).dropFirst(16)) == pushed)
    }

    @Test func theNewErrorCodesRoundTrip() {
        for code in [ErrorCode.startNotAllowed, .endNotAllowed, .positionRequired] {
            let e = ProtocolError(code, "zone \"x\"", id: "q")
            #expect(ServerCodec.decode(ServerMessages.error(e)) == .success(.error(e)))
        }
    }
}

@Suite struct PositionDecodeTests {
    @Test func encodeDecodesBackToTheSameEnvelope() {
        let all: [ClientEnvelope] = [
            ClientEnvelope(id: nil, message: .position(PositionReport(ride: "r", lat: -33.8688, lon: 151.2093, at: 0, accuracy: 0))),
            ClientEnvelope(id: "p", message: .position(PositionReport(ride: "r", lat: 90, lon: -180, at: 1, accuracy: 12.5))),
            ClientEnvelope(id: nil, message: .position(PositionReport(ride: "r", lat: 1e-7, lon: 0.1 + 0.2, at: 5, accuracy: 3))),
            ClientEnvelope(id: "s", message: .start(ride: nil, plan: nil, limit: nil), zoneFields: ZoneFields(vehicleType: "bike")),
            ClientEnvelope(id: "s", message: .start(ride: "r", plan: nil, limit: 60),
                           zoneFields: ZoneFields(position: GeoPoint(lat: 37.5, lon: 127))),
            ClientEnvelope(id: "e", message: .control(.end, ride: "r", metres: 10), zoneFields: ZoneFields(force: true)),
        ]
        for e in all { #expect(ClientCodec.decode(ClientCodec.encode(e)) == .success(e), "\(text(ClientCodec.encode(e)))") }
    }

    @Test func theReportIsWhatTheTraceFilterReads() {
        let p = PositionReport(ride: "r", lat: 37.5, lon: 127, at: 1000, accuracy: 8)
        #expect(p.tracePoint == TracePoint(lat: 37.5, lon: 127, at: 1000, accuracy: 8))
    }

    @Test func fieldsOnlyCountOnTheirMessage() {
        // `force` on a pause and `lat` on an end are not theirs: ignored, as unknown fields are.
        #expect(ClientCodec.decode(Array(#"{"type":"pause","ride":"r","force":true}"#.utf8))
            == .success(ClientEnvelope(id: nil, message: .control(.pause, ride: "r", metres: nil))))
        #expect(ClientCodec.decode(Array(#"{"type":"end","ride":"r","lat":1,"lon":2,"force":false}"#.utf8))
            == .success(ClientEnvelope(id: nil, message: .control(.end, ride: "r", metres: nil))))
        #expect(ClientCodec.decode(Array(#"{"type":"start","lat":null,"lon":null,"vehicle_type":null}"#.utf8))
            == .success(ClientEnvelope(id: nil, message: .start(ride: nil, plan: nil, limit: nil))))
    }

    @Test func badPositionsAreNamed() {
        #expect(clientError(#"{"type":"position","lat":1,"lon":2,"at":1,"accuracy":1}"#) == "missing \"ride\"")
        #expect(clientError(#"{"type":"position","ride":"r","at":1,"accuracy":1}"#) == "\"lat\" and \"lon\" are required (degrees, WGS 84)")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"at":1,"accuracy":1}"#) == "\"lat\" and \"lon\" go together")
        #expect(clientError(#"{"type":"position","ride":"r","lat":90.5,"lon":2,"at":1,"accuracy":1}"#)
            == "\"lat\" must be a number of degrees from -90 to 90")
        #expect(clientError(#"{"type":"position","ride":"r","lat":"37.5","lon":2,"at":1,"accuracy":1}"#)
            == "\"lat\" must be a number of degrees from -90 to 90")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":180.01,"at":1,"accuracy":1}"#)
            == "\"lon\" must be a number of degrees from -180 to 180")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"accuracy":1}"#)
            == "\"at\" is required (Unix milliseconds of the fix)")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"at":1.5,"accuracy":1}"#)
            == "\"at\" must be Unix milliseconds (a whole number from 0 to 253402300799999)")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"at":253402300800000,"accuracy":1}"#)
            == "\"at\" must be Unix milliseconds (a whole number from 0 to 253402300799999)")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"at":1}"#) == "\"accuracy\" is required (metres)")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"at":1,"accuracy":-1}"#)
            == "\"accuracy\" must be a number of metres from 0 to 100000")
        #expect(clientError(#"{"type":"position","ride":"r","lat":1,"lon":2,"at":1,"accuracy":1e400}"#)
            == "\"accuracy\" must be a number of metres from 0 to 100000")
        #expect(clientError(#"{"type":"start","lat":1}"#) == "\"lat\" and \"lon\" go together")
        #expect(clientError(#"{"type":"start","vehicle_type":"e scooter"}"#)
            == "\"vehicle_type\" must be a GBFS vehicle type id (1-64 printable ASCII characters, no spaces)")
        #expect(clientError(#"{"type":"end","ride":"r","force":"yes"}"#) == "\"force\" must be true or false")
    }

    @Test func badZonePushesAreNamed() {
        func why(_ s: String) -> String? {
            if case .failure(let e) = ServerCodec.decode(Array(s.utf8)) { return e.message }
            return nil
        }
        #expect(why(#"{"type":"zone","ride":"r","rules":{}}"#) == "missing \"zone\"")
        #expect(why(#"{"type":"zone","ride":"r","zone":null}"#) == "missing \"rules\"")
        #expect(why(#"{"type":"zone","ride":"r","zone":null,"rules":{"ride_start_allowed":1}}"#) == "\"ride_start_allowed\" must be true or false")
        #expect(why(#"{"type":"zone","ride":"r","zone":null,"rules":{"ride_start_allowed":true,"ride_end_allowed":true,"ride_through_allowed":true}}"#)
            == "missing \"maximum_speed_kph\"")
    }
}
