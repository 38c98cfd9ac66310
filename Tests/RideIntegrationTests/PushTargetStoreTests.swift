import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// Push targets (issue 38, item 1) on every store: registered, refreshed, trimmed to the newest
/// four per ride and per rider, removed, and still there after a reopen (SQLite, PostgreSQL).
extension RideStoreSemanticsTests {
    private func target(_ ride: String?, _ token: String, rider: String = "bob", kind: String = "liveactivity",
                        platform: String = "apns", at: UnixMillis) -> StoredPushTarget {
        StoredPushTarget(platform: platform, kind: ride == nil ? "push_to_start" : kind, ride: ride, rider: rider, token: token, at: at)
    }

    func testPushTargetsAreKeptTrimmedAndRemovedOnEveryStore() throws {
        try forEachStore { open, reopen in
            var store = try open()
            var targets = try XCTUnwrap(store as? PushTargetStore, "\(type(of: store)) keeps push targets")
            XCTAssertEqual(try targets.pushTargets(ride: "r-p"), [])
            // Five on one ride: the first registered goes. An FCM notification counts among them.
            for i in 1...5 { try targets.registerPush(target("r-p", "t\(i)", kind: i == 3 ? "notification" : "liveactivity",
                                                             platform: i == 3 ? "fcm" : "apns", at: t0 + Int64(i))) }
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").map(\.token), ["t2", "t3", "t4", "t5"])
            XCTAssertEqual(try targets.pushTargets(ride: "r-p")[1], target("r-p", "t3", kind: "notification", platform: "fcm", at: t0 + 3))
            // Registering one again makes it the newest (and keeps one row), so t3 now outlives t4.
            try targets.registerPush(target("r-p", "t2", at: t0 + 10))
            try targets.registerPush(target("r-p", "t6", at: t0 + 11))
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").map(\.token), ["t4", "t5", "t2", "t6"])
            // Push-to-start tokens are per rider, apart from rides; another rider's are apart too.
            for i in 1...5 { try targets.registerPush(target(nil, "s\(i)", at: t0 + 20 + Int64(i))) }
            try targets.registerPush(target(nil, "s1", rider: "carol", at: t0 + 30))
            XCTAssertEqual(try targets.pushToStartTokens(rider: "bob").map(\.token), ["s2", "s3", "s4", "s5"])
            XCTAssertEqual(try targets.pushToStartTokens(rider: "carol").map(\.token), ["s1"])
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").count, 4, "push-to-start tokens are not a ride's")
            // Removal: one target; a second removal finds nothing; the rider's tokens by rider.
            XCTAssertTrue(try targets.unregisterPush(ride: "r-p", rider: "bob", token: "t5"))
            XCTAssertFalse(try targets.unregisterPush(ride: "r-p", rider: "bob", token: "t5"))
            XCTAssertFalse(try targets.unregisterPush(ride: nil, rider: "bob", token: "s1"), "carol's s1 is not bob's")
            XCTAssertTrue(try targets.unregisterPush(ride: nil, rider: "carol", token: "s1"))
            // Kept across a reopen (the memory store's "reopen" is the same store).
            store = try reopen(store)
            targets = try XCTUnwrap(store as? PushTargetStore)
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").map(\.token), ["t4", "t2", "t6"])
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").last, target("r-p", "t6", at: t0 + 11))
            XCTAssertEqual(try targets.pushToStartTokens(rider: "bob").map(\.token), ["s2", "s3", "s4", "s5"])
            XCTAssertEqual(try targets.pushToStartTokens(rider: "carol"), [])
            // Kept when the ride ends (the end push is still to be sent); gone when retention
            // purges the ride. The rider's push-to-start tokens are no ride's and stay.
            _ = try store.commit([.create(NewRide(id: "r-p", planID: "p", owner: "bob", limit: nil, startedAt: t0), reply: nil)])
            _ = try store.commit([.append(JournalEntry(ride: "r-p", seq: 2, transition: .end(at: t0 + 60_000, reason: .rider, metres: 0)), reply: nil)])
            XCTAssertEqual(try targets.pushTargets(ride: "r-p").count, 3)
            XCTAssertEqual(try store.purgeEnded(before: t0 + 120_000, limit: 10).rides, 1)
            XCTAssertEqual(try targets.pushTargets(ride: "r-p"), [])
            XCTAssertEqual(try targets.pushToStartTokens(rider: "bob").count, 4)
            store.close()
        }
    }
}
