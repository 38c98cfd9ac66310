@testable import RideService
import XCTest

/// Sessions by serial in reused places: a serial finds its own session only, never one that
/// took its place later, and no serial is given twice.
final class SessionTableTests: XCTestCase {
    private func session(_ t: inout SessionTable) -> Session {
        let s = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: t.nextSerial(), pre: 16)
        t.add(s)
        return s
    }

    func testSerialsFindTheirOwnSessionAcrossReusedPlaces() {
        var t = SessionTable()
        XCTAssertTrue(t.isEmpty)
        let a = session(&t), b = session(&t), c = session(&t)
        XCTAssertEqual([a, b, c].map { $0.serial }, [1 << 24, 2 << 24 | 1, 3 << 24 | 2])
        XCTAssertEqual(t.count, 3)
        XCTAssertTrue(t[b.serial] === b)
        XCTAssertNil(t[0], "0 names no session")
        t.remove(b.serial)
        XCTAssertNil(t[b.serial])
        t.remove(b.serial)  // twice: nothing more happens
        XCTAssertEqual(t.count, 2)
        let d = session(&t)  // takes b's place under a serial of its own
        XCTAssertEqual(d.serial, 4 << 24 | 1)
        XCTAssertNil(t[b.serial], "an answer for the closed session does not reach the new one")
        XCTAssertTrue(t[d.serial] === d)
        t.remove(b.serial)  // the old serial does not remove the new session
        XCTAssertTrue(t[d.serial] === d)
        XCTAssertEqual(t.values.map { $0.serial }, [a.serial, d.serial, c.serial])
        var seen: [UInt64] = []
        t.forEach { seen.append($0.serial) }
        XCTAssertEqual(seen, [a.serial, d.serial, c.serial])
        for s in [a, c, d] { t.remove(s.serial) }
        XCTAssertTrue(t.isEmpty)
        XCTAssertEqual(t.values.count, 0)
        XCTAssertEqual(session(&t).serial, 5 << 24, "serials keep counting after the places are freed")
    }
}
