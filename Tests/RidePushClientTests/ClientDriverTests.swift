import Foundation
import RideCore
import RideProtocol
import Synchronization
import XCTest
@testable import RidePushClient

/// A transport that plays a tiny server in memory: it answers auth, subscribe and start and
/// can push ticks. Lets the async API be tested end to end without sockets or sleeps.
final class FakeServer: RidePushTransportFactory, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var transports: [FakeTransport] = []
    private var received: [String] = []

    func makeTransport() -> any RidePushTransport {
        let t = FakeTransport(server: self)
        lock.withLock { transports.append(t) }
        return t
    }

    var frames: [String] { lock.withLock { received } }
    var connections: Int { lock.withLock { transports.count } }

    func push(_ json: String) {
        let t = lock.withLock { transports.last }
        t?.deliver(.message(Array(json.utf8)))
    }

    func got(_ frame: [UInt8], from t: FakeTransport) {
        let text = String(decoding: frame, as: UTF8.self)
        lock.withLock { received.append(text) }
        guard let msg = try? JSON.parse(text), let type = msg["type"]?.string else { return }
        let id = msg["id"]?.string ?? ""
        switch type {
        case "auth": t.deliver(.message(Array(#"{"type":"authenticated","id":"\#(id)","sub":"u1","scope":"control"}"#.utf8)))
        case "subscribe": t.deliver(.message(Array(stateJSON(msg["ride"]!.string!, elapsed: 5, at: 1_764_430_005_000, id: id).utf8)))
        case "start": t.deliver(.message(Array(stateJSON(msg["ride"]!.string!, elapsed: 0, at: 1_764_430_000_000, id: id).utf8)))
        case "register_push", "unregister_push": t.deliver(.message(Array(Self.pushAnswer(msg, type: type, id: id).utf8)))
        default: break
        }
    }
}

extension FakeServer {
    /// As the server answers a push request: `forbidden` on the ride "theirs", `bad_request` for
    /// a token that is not hex on APNs, the acknowledgement otherwise (of the other action on the
    /// ride "mixed-up", as a server that mixed up ids would).
    static func pushAnswer(_ msg: JSON, type: String, id: String) -> String {
        let ride = msg["ride"]?.string
        if ride == "theirs" { return #"{"type":"error","id":"\#(id)","code":"forbidden","message":"not your ride"}"# }
        if msg["platform"]?.string == "apns", msg["token"]?.string?.allSatisfy(\.isHexDigit) != true {
            return #"{"type":"error","id":"\#(id)","code":"bad_request","message":"\"token\" must be an APNs device token"}"#
        }
        let ack = ride == "mixed-up" ? "push_unregistered" : (type == "register_push" ? "push_registered" : "push_unregistered")
        let rideField = ride.map { #","ride":"\#($0)""# } ?? ""
        return #"{"type":"\#(ack)","id":"\#(id)","platform":"\#(msg["platform"]!.string!)","kind":"\#(msg["kind"]!.string!)"\#(rideField)}"#
    }
}

final class FakeTransport: RidePushTransport, @unchecked Sendable {
    // Weak: the server keeps every transport it made (make asan reported the cycle).
    weak var server: FakeServer?
    private let events = Mutex<(@Sendable (TransportEvent) -> Void)?>(nil)
    init(server: FakeServer) { self.server = server }

    func open(_ url: URL, subprotocol: String, events: @escaping @Sendable (TransportEvent) -> Void) {
        self.events.withLock { $0 = events }
        events(.opened)
    }
    func send(_ text: [UInt8]) { server?.got(text, from: self) }
    func close(code: UInt16) { events.withLock { $0 = nil } }
    func deliver(_ e: TransportEvent) { events.withLock { $0 }?(e) }
}

final class ClientDriverTests: XCTestCase {
    func client(_ server: FakeServer, token: String? = "t") -> RidePushClient {
        RidePushClient(url: URL(string: "ws://127.0.0.1:1/ws")!, transport: server, clock: SystemClock(),
                       random: SystemRandomNumberGenerator(), timing: ClientCore.Timing()) { token }
    }

    func testStartAnswersWithTheRidesSnapshot() async throws {
        let server = FakeServer()
        let c = client(server)
        let s = try await c.start(ride: "r-9", plan: "default", limit: .seconds(1800))
        XCTAssertEqual(s.ride, "r-9")
        XCTAssertEqual(s.fare, 500)
        XCTAssertEqual(s.plan.price, 500)
        let frames = server.frames
        XCTAssertEqual(frames.count, 2)
        XCTAssertTrue(frames[0].hasPrefix(#"{"type":"auth","id":"auth-"#), frames[0])
        XCTAssertTrue(frames[1].hasPrefix(#"{"type":"start","id":"rp-"#), frames[1])
        XCTAssertTrue(frames[1].hasSuffix(#","ride":"r-9","plan":"default","limit":1800}"#), frames[1])
        c.close()
    }

    func testAFeedYieldsTheSnapshotThenTicksAndKeepsTheLatest() async throws {
        let server = FakeServer()
        let c = client(server)
        let feed = c.ride("r-42")
        var it = feed.makeAsyncIterator()
        guard case .state(let s)? = try await it.next() else { return XCTFail() }
        XCTAssertEqual(s.elapsed, 5)
        XCTAssertEqual(feed.latest?.elapsed, 5)
        server.push(tickJSON("r-42", elapsed: 4, at: 1_764_430_004_000))  // older: dropped
        server.push(tickJSON("r-42", elapsed: 6, at: 1_764_430_006_000))
        guard case .tick(let t)? = try await it.next() else { return XCTFail() }
        XCTAssertEqual(t.elapsed, 6)
        XCTAssertEqual(feed.latest?.elapsed, 6)
        XCTAssertEqual(feed.latest?.owner, "u1")
        server.push(stateJSON("r-42", state: "ended", elapsed: 61, at: 1_764_430_061_000))
        guard case .ended(let e)? = try await it.next() else { return XCTFail() }
        XCTAssertEqual(e.receipt?.fare, 680)
        let end = try await it.next()
        XCTAssertNil(end, "the feed finishes after .ended")
        c.close()
    }

    func testConnectionStatesStartWithTheCurrentOneAndEndWhenClosed() async throws {
        let server = FakeServer()
        let c = client(server, token: nil)
        _ = try await c.start(ride: "r-1")
        var seen: [ConnectionState] = []
        let states = c.connectionStates
        c.close()
        for await s in states { seen.append(s) }
        XCTAssertEqual(seen, [.connected, .closed(.closedByClient)])
        XCTAssertEqual(server.frames.count, 1, "no token: no auth message")
        do {
            _ = try await c.pause("r-1")
            XCTFail("closed")
        } catch let e as RidePushError {
            XCTAssertEqual(e, .closed(.closedByClient))
        }
    }

    func testARequestWhoseTaskIsCancelledStopsWaiting() async throws {
        let server = FakeServer()
        let c = client(server)
        let t = Task { try await c.pause("r-1") }  // the fake server never answers a pause
        t.cancel()
        do {
            _ = try await t.value
            XCTFail("cancelled")
        } catch is CancellationError {}
        c.close()
    }
}
