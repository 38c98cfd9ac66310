/// The lanes of `bench --transitions`: each runs start -> end cycles on rides of its own, one
/// request in flight. The client shares the machine's cores with the server it measures, so a
/// request is written straight into the connection's send buffer as a masked frame (no String,
/// no array per request), and a reply is matched to its lane by its id's bytes alone.
///
/// Requests, with the run's pid in the id (a server reused for a second run refuses a request id
/// already used, exactly-once) and in the ride:
/// `{"type":"start","id":"LANE.CYCLE.s.PID","ride":"btPID-LANE-CYCLE"}`, then the same with
/// `end` and `e`.
struct TransitionLanes {
    let count: Int
    let run: Int
    /// `--open-rides`: every request is a start of a new ride, none is ended.
    let startsOnly: Bool
    private(set) var cycle: [Int]
    /// The ride is started: the lane's next request is its end.
    private(set) var started: [Bool]
    /// When the lane's request in flight was sent (monotonic µs); -1 when none is.
    var sentAt: [Int64]
    /// The id each lane waits for, `idRoom` bytes each.
    private var ids: [UInt8]
    private var idLength: [Int]
    private var payload: [UInt8] = []
    static let idRoom = 64
    static let mask: UInt32 = 0x1234_5678

    init(count: Int, run: Int, startsOnly: Bool = false) {
        self.count = count
        self.run = run
        self.startsOnly = startsOnly
        cycle = [Int](repeating: 0, count: count)
        started = [Bool](repeating: false, count: count)
        sentAt = [Int64](repeating: -1, count: count)
        ids = [UInt8](repeating: 0, count: count * Self.idRoom)
        idLength = [Int](repeating: 0, count: count)
        payload.reserveCapacity(256)
    }

    /// Appends `lane`'s next request to `out` as one masked text frame (FIN set) and remembers
    /// its id. The caller sets `sentAt` when it hands `out` to the socket.
    mutating func appendRequest(_ lane: Int, to out: inout [UInt8]) {
        payload.removeAll(keepingCapacity: true)
        let end = started[lane]
        put(end ? #"{"type":"end","id":""# : #"{"type":"start","id":""#)
        let idStart = payload.count
        put(lane); put("."); put(cycle[lane]); put(end ? ".e." : ".s."); put(run)
        let idEnd = payload.count
        put(#"","ride":"bt"#); put(run); put("-"); put(lane); put("-"); put(cycle[lane]); put(#""}"#)
        let n = idEnd - idStart
        precondition(n <= Self.idRoom)
        for i in 0..<n { ids[lane * Self.idRoom + i] = payload[idStart + i] }
        idLength[lane] = n
        appendMaskedFrame(opcode: WSOpcode.text, payload: payload, mask: Self.mask, to: &out)
    }

    /// The lane `reply` answers: its `"id"` must be, byte for byte, the id of the request that
    /// lane has in flight. nil for anything else (no id, another id, a lane with nothing in
    /// flight, a second reply to one request).
    func lane(answeredBy reply: UnsafeRawBufferPointer) -> Int? {
        guard let r = stringRange(reply, key: "id") else { return nil }
        var lane = 0, i = r.lowerBound
        while i < r.upperBound, reply[i] >= 0x30, reply[i] <= 0x39, lane < count {
            lane = lane * 10 + Int(reply[i] - 0x30)
            i += 1
        }
        guard i > r.lowerBound, lane < count, sentAt[lane] >= 0, idLength[lane] == r.count else { return nil }
        let base = lane * Self.idRoom
        for j in 0..<r.count where ids[base + j] != reply[r.lowerBound + j] { return nil }
        return lane
    }

    /// The lane's request is answered: its next one is the other half of the cycle.
    mutating func answered(_ lane: Int) {
        sentAt[lane] = -1
        if startsOnly { cycle[lane] += 1; return }
        if started[lane] { cycle[lane] += 1 }
        started[lane].toggle()
    }

    private mutating func put(_ s: StaticString) {
        s.withUTF8Buffer { payload.append(contentsOf: $0) }
    }

    private mutating func put(_ v: Int) {
        precondition(v >= 0)
        if v >= 10 { put(v / 10) }
        payload.append(UInt8(0x30 + v % 10))
    }
}

/// Whether a reply is a transition's `state` (else an error): `"type"` is the first key the
/// server writes, so a prefix check says it.
func isStateReply(_ reply: UnsafeRawBufferPointer) -> Bool {
    let head: StaticString = #"{"type":"state""#
    guard reply.count >= head.utf8CodeUnitCount else { return false }
    return head.withUTF8Buffer { h in
        for i in 0..<h.count where reply[i] != h[i] { return false }
        return true
    }
}
