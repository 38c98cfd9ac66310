import RideCore
import RideProtocol
@testable import RidePushClient

/// Jitter the test decides: each draw returns the next scripted value (then repeats the last).
struct ScriptedRandom: RandomNumberGenerator {
    var values: [UInt64]
    var i = 0
    init(_ values: [UInt64]) { self.values = values }
    mutating func next() -> UInt64 {
        defer { i += 1 }
        return values[min(i, values.count - 1)]
    }
}

/// Counting ids: rp-0000000000000001, s-0000000000000002, …
struct CountingIDs: RandomNumberGenerator {
    var n: UInt64 = 0
    mutating func next() -> UInt64 { n += 1; return n }
}

/// The core with a fake transport: actions are recorded, and the test plays the server.
struct Harness {
    var core: ClientCore
    let clock: ManualClock
    /// Frames sent, per connection generation (opaque numbers that only grow).
    var sent: [Int: [String]] = [:]
    var connects: [Int] = []
    var disconnects: [UInt16] = []
    var states: [ConnectionState] = []
    var events: [(String, RideEvent)] = []
    var latest: [String: RideSnapshot] = [:]
    var failedFeeds: [(String, RidePushError)] = []
    var replies: [(String, Result<ServerMessage, RidePushError>)] = []
    var retries: [RequestRetry] = []
    var unanswered: [ProtocolError] = []
    var tokenFetches = 0

    init(jitter: [UInt64] = [UInt64.max], timing: ClientCore.Timing = ClientCore.Timing()) {
        clock = ManualClock(1_764_430_000_000)
        core = ClientCore(clock: clock, random: ScriptedRandom(jitter), ids: CountingIDs(), timing: timing)
    }

    var generation: Int { core.generation }
    var lastState: ConnectionState? { states.last }

    mutating func run() {
        for a in core.take() {
            switch a {
            case .connect: connects.append(connects.count + 1)  // attempts, numbered from 1
            case .send(let f): sent[core.generation, default: []].append(String(decoding: f, as: UTF8.self))
            case .disconnect(let c): disconnects.append(c)
            case .fetchToken: tokenFetches += 1
            case .state(let s): states.append(s)
            case .event(let ride, let e, let l):
                events.append((ride, e))
                latest[ride] = l
            case .feedFailed(let ride, let e): failedFeeds.append((ride, e))
            case .reply(let id, let r): replies.append((id, r))
            case .retrying(let r): retries.append(r)
            case .unanswered(let e): unanswered.append(e)
            }
        }
    }

    mutating func `do`(_ body: (inout ClientCore) -> Void) {
        body(&core)
        run()
    }

    mutating func advance(millis: Int64) {
        clock.advance(millis: millis)
        core.wake()
        run()
    }

    /// Advances to the core's next wakeup exactly.
    mutating func advanceToWakeup() {
        guard let t = core.nextWakeup else { return }
        clock.set(max(t, clock.now()))
        core.wake()
        run()
    }

    mutating func token(_ t: String?) { self.do { $0.tokenArrived(t) } }
    mutating func open() { let g = generation; self.do { $0.opened(generation: g) } }
    mutating func server(_ json: String) { let g = generation; self.do { $0.received(generation: g, Array(json.utf8)) } }
    mutating func close(_ code: UInt16, _ reason: String = "") { let g = generation; self.do { $0.closed(generation: g, code: code, reason: reason) } }
    mutating func fail(_ why: String) { let g = generation; self.do { $0.failed(generation: g, why) } }

    /// The frames of the current connection.
    var frames: [String] { sent[generation] ?? [] }

    /// Opens and answers auth (the auth id is the last one drawn).
    mutating func connectAndAuthenticate() {
        open()
        if let auth = frames.last(where: { $0.contains(#""type":"auth""#) }), let id = Self.id(auth) {
            server(#"{"type":"authenticated","id":"\#(id)","sub":"u1","scope":"control"}"#)
        }
    }

    static func id(_ frame: String) -> String? {
        (try? JSON.parse(frame))?["id"]?.string
    }

    static func waitDelay(_ s: ConnectionState?) -> Int64? {
        guard case .waitingToReconnect(let d, _)? = s else { return nil }
        return d.millis
    }
}

/// A token whose payload carries `exp` (signature irrelevant: the client never verifies).
func token(exp: Int64, tag: String = "a") -> String {
    var w = JSONWriter()
    w.beginObject()
    w.field("sub", "u1")
    w.field("exp", exp)
    w.endObject()
    let b64 = base64URL(w.bytes)
    return "eyJhbGciOiJIUzI1NiJ9.\(b64).\(tag)"
}

func base64URL(_ bytes: [UInt8]) -> String {
    let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var out = ""
    var i = 0
    while i + 2 < bytes.count {
        let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
        for s in [18, 12, 6, 0] { out.append(table[Int(n >> UInt32(s) & 63)]) }
        i += 3
    }
    let rest = bytes.count - i
    if rest == 1 {
        let n = UInt32(bytes[i]) << 16
        for s in [18, 12] { out.append(table[Int(n >> UInt32(s) & 63)]) }
    } else if rest == 2 {
        let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
        for s in [18, 12, 6] { out.append(table[Int(n >> UInt32(s) & 63)]) }
    }
    return out
}

let planJSON = #"{"id":"default","name":"Standard","currency":"KRW","price":500,"per_min":[{"start":0,"rate":180,"interval":1}],"billing":"completed"}"#

func stateJSON(_ ride: String = "r-42", state: String = "riding", elapsed: Int64, at: Int64, id: String? = nil) -> String {
    let idField = id.map { #""id":"\#($0)","# } ?? ""
    let fare = 500 + elapsed / 60 * 180
    let ended = state == "ended" ? "\(at)" : "null"
    var s = #"{"type":"state",\#(idField)"ride":"\#(ride)","state":"\#(state)","elapsed":\#(elapsed),"paused":0,"fare":\#(fare),"currency":"KRW","at":\#(at),"started_at":\#(at - elapsed * 1000),"ended_at":\#(ended),"owner":"u1","plan":\#(planJSON)"#
    if state == "ended" {
        s += #","receipt":{"elapsed":\#(elapsed),"paused":0,"fare":\#(fare),"currency":"KRW","started_at":\#(at - elapsed * 1000),"ended_at":\#(at),"reason":"rider","lines":[{"label":"unlock","amount":500}]}"#
    }
    return s + "}"
}

func tickJSON(_ ride: String = "r-42", elapsed: Int64, at: Int64, seq: Int64 = 1) -> String {
    #"{"type":"tick","ride":"\#(ride)","state":"riding","elapsed":\#(elapsed),"paused":0,"fare":\#(500 + elapsed / 60 * 180),"currency":"KRW","seq":\#(seq),"at":\#(at)}"#
}
