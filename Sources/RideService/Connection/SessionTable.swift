/// A thread's sessions by serial, in numbered places: a serial's low 24 bits name its place and
/// the bits above count up, so no serial is ever given twice and an answer for a session that
/// closed meanwhile finds nothing (the place is empty, or holds another serial). A dictionary
/// by serial kept 16-byte buckets ~40 % empty; a place is 8 bytes, reused once freed.
package struct SessionTable {
    private var places: [Session?] = []
    private var free: [Int32] = []
    private var issued: UInt64 = 0
    private(set) var count = 0
    static let placeBits: UInt64 = 24

    package init() {}

    package var isEmpty: Bool { count == 0 }

    /// The serial the next `add` gives (never 0: that names no session).
    package mutating func nextSerial() -> UInt64 {
        issued += 1
        let place = free.last.map(UInt64.init) ?? UInt64(places.count)
        precondition(place < 1 << Self.placeBits, "more sessions than places")
        return issued << Self.placeBits | place
    }

    /// Puts `s`, made with the serial `nextSerial()` just gave, in its place.
    package mutating func add(_ s: Session) {
        let place = Int(s.serial & (1 << Self.placeBits - 1))
        if place == places.count {
            places.append(s)
        } else {
            precondition(free.last == Int32(place) && places[place] == nil, "serial \(s.serial) not the next one")
            free.removeLast()
            places[place] = s
        }
        count += 1
    }

    package subscript(serial: UInt64) -> Session? {
        let place = Int(serial & (1 << Self.placeBits - 1))
        guard place < places.count, let s = places[place], s.serial == serial else { return nil }
        return s
    }

    package mutating func remove(_ serial: UInt64) {
        let place = Int(serial & (1 << Self.placeBits - 1))
        guard place < places.count, let s = places[place], s.serial == serial else { return }
        places[place] = nil
        free.append(Int32(place))
        count -= 1
        if count == 0 {  // every session gone (a flood that left): hold no buffers for it
            places = []
            free = []
        }
    }

    /// Every session, in place order.
    package var values: [Session] { places.compactMap { $0 } }

    /// Runs `body` on every session without collecting them first (the once-a-second sweep).
    package func forEach(_ body: (Session) -> Void) {
        for case let s? in places { body(s) }
    }
}
