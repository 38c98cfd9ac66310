@testable import RideService
import XCTest

/// A ride's subscribers on one thread, the first inline and the rest in an array: every
/// operation the slot uses sees the same list whichever of the two holds a subscriber.
final class SubscriberListTests: XCTestCase {
    private let sessions = (1...4).map { Session(handle: ConnectionHandle(bits: UInt(0x10 * $0)), peer: "test", serial: UInt64($0), pre: 16) }

    private func serials(_ list: SubscriberList) -> [UInt64] { list.indices.map { list[$0].session.serial } }

    func testAppendIndexSwapAndRemoveLastAcrossTheInlineOne() {
        var list = SubscriberList()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
        for s in sessions { list.append(Subscriber(session: s)) }
        XCTAssertFalse(list.isEmpty)
        XCTAssertEqual(serials(list), [1, 2, 3, 4])
        list.swapAt(0, 3)  // the inline one with one in the array
        XCTAssertEqual(serials(list), [4, 2, 3, 1])
        list.swapAt(2, 2)
        XCTAssertEqual(serials(list), [4, 2, 3, 1])
        list.removeLast()
        list.removeLast()
        XCTAssertEqual(serials(list), [4, 2])
        list.removeLast()
        XCTAssertEqual(serials(list), [4])
        list.append(Subscriber(session: sessions[2]))
        XCTAssertEqual(serials(list), [4, 3])
        list.removeLast()
        list.removeLast()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(list.count, 0)
    }

    func testChangesInPlaceReachTheStoredSubscribers() {
        var list = SubscriberList()
        for s in sessions.prefix(3) { list.append(Subscriber(session: s)) }
        list[1].tickPending(100)  // through the subscript, in the array
        XCTAssertEqual(list.indices.map { list[$0].pending }, [false, true, false])
        var seen: [UInt64] = []
        list.forEachInPlace { sub in
            seen.append(sub.session.serial)
            if sub.session.serial != 2 { sub.tickPending(200) } else { sub.pending = false }
        }
        XCTAssertEqual(seen, [1, 2, 3])
        XCTAssertEqual(list.indices.map { list[$0].pending }, [true, false, true])
        list[0].pending = false  // through the subscript, inline
        XCTAssertEqual(list.indices.map { list[$0].pending }, [false, false, true])
        var none = SubscriberList()
        none.forEachInPlace { _ in XCTFail("no subscribers to walk") }
    }
}
