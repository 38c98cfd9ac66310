import RideCore
import XCTest
@testable import RideProtocol

/// The operator feed both ways: every golden of protocol/examples/ops decodes to typed values
/// that re-encode to the same bytes; the fleet row's positions are the file's; what is wrong
/// in a frame is named.
final class OpsCodecTests: XCTestCase {
    private func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }

    func testEveryOpsServerGoldenRoundTripsByteForByte() throws {
        let goldens = try Goldens.all("ops/server")
        XCTAssertEqual(goldens.count, 6)
        var types = Set<String>()
        for (name, bytes) in goldens {
            switch OpsCodec.decode(bytes) {
            case .success(let m):
                XCTAssertEqual(text(OpsCodec.encode(m)), text(bytes), name)
                XCTAssertEqual(name.split(separator: ".").first.map(String.init), m.type, "file named for its type")
                types.insert(m.type)
            case .failure(let e):
                XCTFail("\(name): \(e.code) \(e.message)")
            }
        }
        XCTAssertEqual(types, ["fleet", "fleet_event", "fleet_warning", "snapshot", "state", "unwatched_all"])
    }

    func testEveryOpsClientGoldenRoundTripsByteForByte() throws {
        let goldens = try Goldens.all("ops/client")
        XCTAssertEqual(goldens.map(\.0), ["unwatch_all", "watch_all"])
        for (name, bytes) in goldens {
            guard let r = OpsRequest.decode(bytes) else { XCTFail(name); continue }
            XCTAssertEqual(r.kind.rawValue, name)
            XCTAssertEqual(text(OpsCodec.encode(r)), text(bytes), name)
        }
    }

    func testTheGoldensDecodeToTheseValues() throws {
        guard case .success(.fleetEvent(let e)) = OpsCodec.decode(try Goldens.bytes("ops/server/fleet_event.json")) else { return XCTFail() }
        XCTAssertEqual(e.event, .pause)
        XCTAssertEqual(e.ride.ride.state, .paused)
        XCTAssertEqual(e.ride.ride.pausedSince, 1_796_121_703_002)
        XCTAssertEqual(e.ride.watchers, 1)
        XCTAssertNil(e.ride.journal)
        guard case .success(.state(let s, let id)) = OpsCodec.decode(try Goldens.bytes("ops/server/state.journal.json")) else { return XCTFail() }
        XCTAssertEqual(id, "g1")
        XCTAssertEqual(s.journal, [JournalEntry(event: .start, at: 1_796_121_703_003),
                                   JournalEntry(event: .end, at: 1_796_121_703_004, reason: .rider, distance: 1200)])
        XCTAssertEqual(s.ride.receipt?.reason, .rider)
        guard case .success(.snapshot(let snap)) = OpsCodec.decode(try Goldens.bytes("ops/server/snapshot.json")) else { return XCTFail() }
        XCTAssertEqual(snap.id, "w1")
        XCTAssertFalse(snap.more)
        XCTAssertEqual(snap.counts, RideCounts(riding: 1))
        XCTAssertEqual(snap.rides.map(\.ride), ["r-ops-1"])
        XCTAssertEqual(snap.rides.first?.limit, 1800)
        XCTAssertNil(snap.rides.first?.endedAt)
    }

    /// protocol/examples/ops/fleet-row.json names the row's positions; the encoder writes each
    /// field at its position (and tests/test_golden.py holds public/ops/ops.js to the same file).
    func testFleetRowPositionsAreTheExamplesColumns() throws {
        let columns = try JSON.parse(try Goldens.bytes("ops/fleet-row.json")).array?.compactMap(\.string)
        XCTAssertEqual(columns, FleetRow.columns)
        let row = FleetRow(ride: "r-x", state: .paused, elapsed: 11, paused: 22, fare: 33, remaining: 44, watchers: 55)
        let frame = OpsCodec.encode(.fleet(FleetFrame(seq: 1, at: 2, counts: RideCounts(), rows: [row])))
        guard let values = try JSON.parse(frame)["rows"]?.array?.first?.array else { return XCTFail(text(frame)) }
        let byName = Dictionary(uniqueKeysWithValues: zip(columns ?? [], values))
        XCTAssertEqual(byName, ["ride": .string("r-x"), "state": .string("paused"), "elapsed": .number("11"),
                                "paused": .number("22"), "fare": .number("33"), "remaining": .number("44"),
                                "watchers": .number("55")])
        // And the golden frame's row read by those names is r-ops-1's figures.
        guard case .success(.fleet(let f)) = OpsCodec.decode(try Goldens.bytes("ops/server/fleet.json")) else { return XCTFail() }
        XCTAssertEqual(f.rows, [FleetRow(ride: "r-ops-1", state: .riding, elapsed: 1, paused: 0, fare: 500, remaining: 1799, watchers: 1)])
    }

    func testFleetRowWithoutALimitSendsNull() {
        let row = FleetRow(ride: "r", state: .riding, elapsed: 1, paused: 0, fare: 500, remaining: nil, watchers: 0)
        let bytes = OpsCodec.encode(.fleet(FleetFrame(seq: 3, at: 4, counts: RideCounts(riding: 1), rows: [row])))
        XCTAssertEqual(text(bytes), #"{"type":"fleet","seq":3,"at":4,"counts":{"riding":1,"paused":0,"ended":0},"rows":[["r","riding",1,0,500,null,0]]}"#)
        XCTAssertEqual(OpsCodec.decode(bytes), .success(.fleet(FleetFrame(seq: 3, at: 4, counts: RideCounts(riding: 1), rows: [row]))))
    }

    func testListingAndDocumentRoundTrip() {
        let ended = RideRow(ride: "r-c", state: .ended, elapsed: 200, paused: 0, fare: 1040, currency: "KRW", plan: "default",
                            startedAt: 1_764_430_000_000, endedAt: 1_764_430_200_400, reason: .byOperator, watchers: 0)
        let riding = RideRow(ride: "r-d", state: .riding, elapsed: 5, paused: 0, fare: 500, currency: "KRW", remaining: 55,
                             limit: 60, owner: "u2", plan: "night", startedAt: 1_764_430_000_000, watchers: 2)
        let page = RideListing(rides: [ended, riding], next: "1764430000000.r-d")
        let bytes = OpsCodec.page(page)
        XCTAssertEqual(text(bytes), #"{"rides":[{"ride":"r-c","state":"ended","elapsed":200,"paused":0,"fare":1040,"currency":"KRW","plan":"default","started_at":1764430000000,"ended_at":1764430200400,"paused_since":null,"reason":"operator","watchers":0},{"ride":"r-d","state":"riding","elapsed":5,"paused":0,"fare":500,"currency":"KRW","remaining":55,"limit":60,"owner":"u2","plan":"night","started_at":1764430000000,"ended_at":null,"paused_since":null,"watchers":2}],"next":"1764430000000.r-d"}"#)
        XCTAssertEqual(OpsCodec.decodePage(bytes), .success(page))
        XCTAssertEqual(OpsCodec.decodePage(OpsCodec.page(RideListing(rides: [], next: nil))), .success(RideListing(rides: [], next: nil)))
    }

    func testDocumentWithJournalRoundTrips() throws {
        guard case .success(.state(let r, _)) = OpsCodec.decode(try Goldens.bytes("ops/server/state.journal.json")) else { return XCTFail() }
        let doc = OpsCodec.document(r)
        XCTAssertTrue(text(doc).hasPrefix(#"{"ride":"r-ops-3","#), text(doc))
        XCTAssertEqual(OpsCodec.decodeDocument(doc), .success(r))
    }

    func testOpsRequestsDecode() {
        XCTAssertEqual(OpsRequest.decode(Array(#"{"type":"watch_all","id":"w1"}"#.utf8)), OpsRequest(kind: .watchAll, id: "w1"))
        XCTAssertEqual(OpsRequest.decode(Array(#"{"type":"unwatch_all"}"#.utf8)), OpsRequest(kind: .unwatchAll, id: nil))
        XCTAssertNil(OpsRequest.decode(Array(#"{"type":"watch_everything"}"#.utf8)))
        XCTAssertNil(OpsRequest.decode(Array(#"{"type":"watch_all","id":7}"#.utf8)))
        XCTAssertNil(OpsRequest.decode(Array(#"{"type":"watch_all","id":""}"#.utf8)))
        XCTAssertNil(OpsRequest.decode(Array("[1]".utf8)))
        XCTAssertNil(OpsRequest.decode(Array(#"{"type":"subscribe","ride":"r"}"#.utf8)), "a rider's message is ClientCodec's")
    }

    func testDecodeNamesWhatIsWrong() {
        func why(_ s: String) -> String? {
            if case .failure(let e) = OpsCodec.decode(Array(s.utf8)) { return e.message }
            return nil
        }
        XCTAssertEqual(why(#"{"type":"fleet","seq":1,"at":2,"counts":{"riding":0,"paused":0,"ended":0},"rows":[["r","riding",1,0,500,null]]}"#),
                       "a fleet row must be an array of 7 values")
        XCTAssertEqual(why(#"{"type":"fleet","seq":1,"at":2,"counts":{"riding":0,"paused":0,"ended":0},"rows":[["r","riding","1",0,500,null,0]]}"#),
                       "fleet row \"elapsed\" must be a whole number")
        XCTAssertEqual(why(#"{"type":"fleet","seq":1,"at":2,"counts":{"riding":0,"paused":0,"ended":0},"rows":[["r","flying",1,0,500,null,0]]}"#),
                       "fleet row \"state\" must be a ride state")
        XCTAssertEqual(why(#"{"type":"fleet_event","event":"teleport","at":1,"ride":{}}"#), "unknown event \"teleport\"")
        XCTAssertEqual(why(#"{"type":"fleet_warning","ride":"r","at":1}"#), "missing \"remaining\"")
        XCTAssertEqual(why(#"{"type":"snapshot","seq":1,"at":2,"more":"no","counts":{"riding":0,"paused":0,"ended":0},"rides":[]}"#),
                       "\"more\" must be true or false")
        XCTAssertEqual(why(#"{"type":"state","ride":"r"}"#), "a state without a journal is a ride.v1 message (ServerCodec)")
        XCTAssertEqual(why(#"{"type":"tick"}"#), "unknown operator message type \"tick\"")
        XCTAssertEqual(why("nope"), "operator message is not valid JSON (unknown literal at byte 0)")
    }

    func testJournalEntriesFromTransitions() {
        XCTAssertEqual(JournalEntry(.pause(at: 5)), JournalEntry(event: .pause, at: 5))
        XCTAssertEqual(JournalEntry(.end(at: 9, reason: .pauseLimit, metres: 0)), JournalEntry(event: .end, at: 9, reason: .pauseLimit))
        XCTAssertEqual(JournalEntry(.end(at: 9, reason: .byOperator, metres: 40)), JournalEntry(event: .end, at: 9, reason: .byOperator, distance: 40))
    }
}
