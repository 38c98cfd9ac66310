@testable import RideService
import XCTest
@testable import RideCore

/// A session's subscriptions keep their order however they are held (one alone, or several).
final class SubscriptionListTests: XCTestCase {
    private func sub(_ id: String, _ session: Session, index: Int32 = 0) -> Subscription {
        let live = LiveRide(ride: Ride(id: id, planID: "default", owner: nil, limit: nil, startedAt: 0), plan: PlanBox(.standard), shards: 1)
        return Subscription(live: live, index: index)
    }

    private func ids(_ list: SubscriptionList) -> [String] { list.map { $0.live.id } }

    func testOneThenSeveralThenOneAgainInOrder() {
        let session = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16)
        let a = sub("a", session), b = sub("b", session), c = sub("c", session)
        var list = SubscriptionList()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(ids(list), [])
        list.append(a)
        XCTAssertFalse(list.isEmpty)
        XCTAssertEqual(ids(list), ["a"])
        list.append(b)
        list.append(c)
        XCTAssertEqual(ids(list), ["a", "b", "c"])
        list.remove(b.live)
        XCTAssertEqual(ids(list), ["a", "c"])
        list.remove(b.live)  // not there: nothing changes
        XCTAssertEqual(ids(list), ["a", "c"])
        list.remove(a.live)
        XCTAssertEqual(ids(list), ["c"])
        list.append(a)
        XCTAssertEqual(ids(list), ["c", "a"])
        list.remove(a.live)
        list.remove(c.live)
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(ids(list), [])
    }

    func testRemovingTheOnlyOneAndRemovingAll() {
        let session = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16)
        let a = sub("a", session), b = sub("b", session)
        var list = SubscriptionList()
        list.append(a)
        list.remove(b.live)
        XCTAssertEqual(ids(list), ["a"])
        list.remove(a.live)
        XCTAssertTrue(list.isEmpty)
        list.append(a)
        list.append(b)
        list.removeAll()
        XCTAssertTrue(list.isEmpty)
        XCTAssertEqual(ids(list), [])
        // The session finds its subscription through the same list.
        session.subscriptions.append(b)
        XCTAssertTrue(session.subscription(for: "b")?.live === b.live)
        XCTAssertTrue(session.subscription(to: b.live)?.live === b.live)
        XCTAssertNil(session.subscription(for: "a"))
        XCTAssertNil(session.subscription(to: a.live))
    }

    /// Another subscriber left the ride's slot and this one took its place: the list follows.
    func testMovedUpdatesTheIndexOfThatRideOnly() {
        let session = Session(handle: ConnectionHandle(bits: 0x10), peer: "test", serial: 1, pre: 16)
        let a = sub("a", session, index: 3), b = sub("b", session, index: 7)
        var list = SubscriptionList()
        list.append(a)
        list.moved(a.live, to: 1)
        XCTAssertEqual(list.map(\.index), [1])
        list.moved(b.live, to: 0)  // not in the list: nothing changes
        XCTAssertEqual(list.map(\.index), [1])
        list.append(b)
        list.moved(b.live, to: 2)
        XCTAssertEqual(list.map(\.index), [1, 2])
        XCTAssertEqual(ids(list), ["a", "b"])
    }
}
