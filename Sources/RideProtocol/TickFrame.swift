import RideCore

/// A loaded fare plan as the rides on it share it (the server's PlanBox): one object, which a
/// tick lends to the encoder by reference — a `FarePlan` handed over by value was copied for
/// every ride, retaining and releasing each of its arrays and strings — with the tick's
/// currency field encoded once.
public final class TickPlan: Sendable {
    public let plan: FarePlan
    /// `,"currency":"…"` as every tick on this plan has it.
    let currencyField: [UInt8]

    public init(_ plan: FarePlan) {
        self.plan = plan
        var w = JSONWriter(reserving: 24)
        w.beginObject()
        w.field("currency", plan.currency.code)
        currencyField = [UInt8(ascii: ",")] + w.bytes.dropFirst()
    }
}

/// One batch's tick messages, written one after another straight into the batch's memory
/// (issue 29: a second's ticks for 100,000 watched rides in ≤ 50 ms of CPU). What changes per
/// ride — its id, state, figures, trace — is written through a `JSONCursor`; what is the same
/// for every ride of the batch (`,"seq":…,"at":…}` and each state's `"state":…` piece) is
/// prepared once, here. The bytes are exactly `ServerMessages.tick`'s (compact position), which
/// stays the encoder of one tick and what TickFrameTests compare against.
public struct TickFrame {
    public let seq: Int64
    public let at: UnixMillis
    /// `,"seq":…,"at":…}`: how every tick of the batch ends.
    private let tail: [UInt8]
    /// `,"state":"…","elapsed":` for riding, paused and ended.
    private let states: (riding: [UInt8], paused: [UInt8], ended: [UInt8])
    /// The most a tick of a ride with a 0-byte id writes: every piece and every optional field,
    /// each number at its longest, the currency code excepted (see `maxBytes`).
    private let fixedBound: Int

    public init(seq: Int64, at: UnixMillis) {
        self.seq = seq
        self.at = at
        var w = JSONWriter(reserving: 48)
        w.beginObject()
        w.field("seq", seq)
        w.field("at", at)
        w.endObject()
        tail = [UInt8(ascii: ",")] + w.bytes.dropFirst()
        func piece(_ s: RideState) -> [UInt8] {
            var w = JSONWriter(reserving: 40)
            w.beginObject()
            w.field("state", s.rawValue)
            w.key("elapsed")
            return [UInt8(ascii: ",")] + w.bytes.dropFirst()
        }
        states = (piece(.riding), piece(.paused), piece(.ended))
        let state = max(states.riding.count, states.paused.count, states.ended.count)
        // The keys `write` writes as literals, each number at its longest, the id's quotes.
        let keys = #"{"type":"tick","ride":"#.utf8.count + 2 + state + #","paused":"#.utf8.count + #","fare":"#.utf8.count
            + #","remaining":"#.utf8.count + #","distance":"#.utf8.count + #","position":["#.utf8.count + 3 + tail.count
        fixedBound = keys + 6 * JSONCursor.maxIntBytes + 2 * JSONCursor.maxNumberBytes
    }

    /// The most `write` can write for a ride with this id on this plan: the room to make
    /// before it.
    @inline(__always)
    public func maxBytes(ride id: String, plan: TickPlan) -> Int {
        fixedBound + JSONCursor.maxStringBytes(id) + plan.currencyField.count
    }

    /// Ride `ride`'s tick at `start` (room for `maxBytes` made): its figures at the batch's
    /// instant on `plan`, then the trace's distance and the position (if it moved) as the tick
    /// sends them. Returns where it ends.
    public func write(at start: UnsafeMutablePointer<UInt8>, ride: borrowing Ride, plan: TickPlan,
                      distance: Int64? = nil, position: RidePosition? = nil) -> UnsafeMutablePointer<UInt8> {
        var c = JSONCursor(start)
        let f = RideFigures(ride, plan.plan, at: at, metres: distance)
        // Keys as literals: copies of a known length, which the compiler writes out inline.
        c.raw(#"{"type":"tick","ride":"#)
        c.string(ride.id)
        let state: [UInt8]
        switch ride.state {
        case .riding: state = states.riding
        case .paused: state = states.paused
        case .ended: state = states.ended
        }
        state.withUnsafeBufferPointer { c.raw($0) }
        c.int(f.elapsed)
        c.raw(#","paused":"#)
        c.int(f.paused)
        c.raw(#","fare":"#)
        c.int(f.fare)
        plan.currencyField.withUnsafeBufferPointer { c.raw($0) }
        if ride.state != .ended, let r = f.remaining {
            c.raw(#","remaining":"#)
            c.int(r)
        }
        if let d = distance {
            c.raw(#","distance":"#)
            c.int(d)
        }
        if let p = position {
            c.raw(#","position":["#)
            c.number(p.lat)
            c.byte(UInt8(ascii: ","))
            c.number(p.lon)
            if let t = p.at {
                c.byte(UInt8(ascii: ","))
                c.int(t)
            }
            c.byte(UInt8(ascii: "]"))
        }
        tail.withUnsafeBufferPointer { c.raw($0) }
        return c.position
    }
}
