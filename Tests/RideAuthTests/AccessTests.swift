import XCTest
import RideAuth

final class AccessTests: XCTestCase {
    func access(_ sub: String, _ scope: Scope, rides: [String]? = nil, ops: Bool = false) -> Access {
        Access(TokenClaims(sub: sub, scope: scope, rides: rides, ops: ops))
    }

    func testWatchScopeCannotStartOrControl() {
        let watcher = access("rider-a", .watch)
        XCTAssertFalse(watcher.mayStart())
        XCTAssertFalse(watcher.mayControl(rideOwner: "rider-a"))
        XCTAssertTrue(watcher.mayWatch(rideID: "r-1", rideOwner: "rider-a"))
    }

    func testRiderACannotControlRiderBsRide() {
        let a = access("rider-a", .control)
        XCTAssertEqual(a.rider, "rider-a")
        XCTAssertTrue(a.mayStart())
        XCTAssertTrue(a.mayControl(rideOwner: "rider-a"))
        XCTAssertFalse(a.mayControl(rideOwner: "rider-b"))
        XCTAssertFalse(a.mayControl(rideOwner: nil))
        XCTAssertTrue(a.mayWatch(rideID: "r-1", rideOwner: "rider-a"))
        XCTAssertFalse(a.mayWatch(rideID: "r-2", rideOwner: "rider-b"))
        XCTAssertFalse(a.mayWatch(rideID: "r-3", rideOwner: nil))
        // Listing a ride lets a control token watch it, never control it.
        let listed = access("rider-a", .control, rides: ["r-2"])
        XCTAssertTrue(listed.mayWatch(rideID: "r-2", rideOwner: "rider-b"))
        XCTAssertFalse(listed.mayControl(rideOwner: "rider-b"))
    }

    func testWatchTokenForRideXCannotWatchY() {
        let share = Access(TokenClaims.share(ride: "r-x", now: 0, ttl: 60))
        XCTAssertTrue(share.mayWatch(rideID: "r-x", rideOwner: "rider-a"))
        XCTAssertFalse(share.mayWatch(rideID: "r-y", rideOwner: "rider-a"))
        XCTAssertFalse(share.mayStart())
        XCTAssertFalse(share.mayControl(rideOwner: "rider-a"))
        // With a rides list, a watch token is limited to it even for rides its sub owns.
        let limited = access("rider-a", .watch, rides: ["r-x"])
        XCTAssertFalse(limited.mayWatch(rideID: "r-own", rideOwner: "rider-a"))
        XCTAssertFalse(access("rider-a", .watch, rides: []).mayWatch(rideID: "r-own", rideOwner: "rider-a"))
        // Without one, it sees only its sub's rides.
        let plain = access("rider-a", .watch)
        XCTAssertTrue(plain.mayWatch(rideID: "r-own", rideOwner: "rider-a"))
        XCTAssertFalse(plain.mayWatch(rideID: "r-x", rideOwner: "rider-b"))
        XCTAssertFalse(plain.mayWatch(rideID: "r-x", rideOwner: nil))
    }

    func testOpsMayControlAndWatchAny() {
        let ops = access("ops", .control, ops: true)
        XCTAssertTrue(ops.mayStart())
        XCTAssertTrue(ops.mayControl(rideOwner: "rider-b"))
        XCTAssertTrue(ops.mayControl(rideOwner: nil))
        XCTAssertTrue(ops.mayWatch(rideID: "r-9", rideOwner: "rider-b"))
        // ops widens which rides, not which actions: a watch-scoped ops token only watches.
        let opsWatcher = access("ops", .watch, rides: ["r-1"], ops: true)
        XCTAssertFalse(opsWatcher.mayStart())
        XCTAssertFalse(opsWatcher.mayControl(rideOwner: "rider-b"))
        XCTAssertTrue(opsWatcher.mayWatch(rideID: "r-9", rideOwner: "rider-b"))
    }
}
