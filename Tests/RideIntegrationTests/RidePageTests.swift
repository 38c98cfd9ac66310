import XCTest
import RideCore
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// The listing's keyset pages, on both stores.
extension RideStoreSemanticsTests {
    func testPagesByStartVisitEveryRideOnceInOrder() throws {
        try forEachStore { open, reopen in
            var store = try open()
            // Two rides share a start instant: the id breaks the tie.
            try store.create(id: "b", planID: "p", owner: nil, limit: nil, startedAt: t0 + 5, reply: nil)
            try store.create(id: "a", planID: "p", owner: nil, limit: nil, startedAt: t0 + 5, reply: nil)
            try store.create(id: "z", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            try store.append(ride: "z", .pause(at: t0 + 1), reply: nil)
            try store.append(ride: "z", .end(at: t0 + 2, reason: .rider, metres: 0), reply: nil)
            store = try reopen(store)
            let first = try store.rides(.byStart(after: nil), limit: 2)
            XCTAssertEqual(first.map(\.id), ["z", "a"])
            XCTAssertEqual(first[0].journal, [.start(at: t0), .pause(at: t0 + 1), .end(at: t0 + 2, reason: .rider, metres: 0)])
            // A ride that starts and one that ends between pages: the next page is unmoved.
            try store.create(id: "c", planID: "p", owner: nil, limit: nil, startedAt: t0 + 9, reply: nil)
            try store.append(ride: "a", .end(at: t0 + 10, reason: .rider, metres: 0), reply: nil)
            let second = try store.rides(.byStart(after: first[1].key(in: .byStart(after: nil))), limit: 2)
            XCTAssertEqual(second.map(\.id), ["b", "c"])
            XCTAssertEqual(try store.rides(.byStart(after: RideKey(at: t0 + 9, id: "c")), limit: 2).map(\.id), [])
            XCTAssertEqual(try store.rides(.byStart(after: nil), limit: 0).map(\.id), [])
            store.close()
        }
    }

    func testEndedPagesAreNewestFirst() throws {
        try forEachStore { open, reopen in
            var store = try open()
            for (id, end) in [("e1", t0 + 100), ("e2", t0 + 300), ("e3", t0 + 300), ("e4", t0 + 200)] {
                try store.create(id: id, planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
                try store.append(ride: id, .end(at: end, reason: .rider, metres: 0), reply: nil)
            }
            try store.create(id: "open", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            store = try reopen(store)
            let first = try store.rides(.ended(before: nil), limit: 3)
            XCTAssertEqual(first.map(\.id), ["e3", "e2", "e4"])
            XCTAssertEqual(first[2].key(in: .ended(before: nil)), RideKey(at: t0 + 200, id: "e4"))
            XCTAssertNil(try store.ride("open")!.key(in: .ended(before: nil)))
            // A ride ending now is newer than the cursor: it does not push e1 onto a later page.
            try store.append(ride: "open", .end(at: t0 + 400, reason: .rider, metres: 0), reply: nil)
            XCTAssertEqual(try store.rides(.ended(before: RideKey(at: t0 + 200, id: "e4")), limit: 3).map(\.id), ["e1"])
            XCTAssertEqual(try store.rides(.ended(before: RideKey(at: t0 + 300, id: "e3")), limit: 1).map(\.id), ["e2"])
            store.close()
        }
    }

    /// One rider's pages: only their rides, `limit` of them per page however many other
    /// riders' rides lie between, in both orders and across a cursor.
    func testARidersPagesHoldOnlyTheirRides() throws {
        try forEachStore { open, reopen in
            var store = try open()
            for (i, owner) in ["alice", "bob", "bob", "alice", "bob", "alice"].enumerated() {
                let id = "\(owner)-\(i)"
                try store.create(id: id, planID: "p", owner: owner, limit: nil, startedAt: t0 + Int64(i), reply: nil)
                try store.append(ride: id, .end(at: t0 + 100 - Int64(i), reason: .rider, metres: 0), reply: nil)
            }
            try store.create(id: "open-alice", planID: "p", owner: "alice", limit: nil, startedAt: t0 + 50, reply: nil)
            try store.create(id: "nobody", planID: "p", owner: nil, limit: nil, startedAt: t0 + 60, reply: nil)
            store = try reopen(store)
            let first = try store.rides(.byStart(after: nil), rider: "alice", limit: 2)
            XCTAssertEqual(first.map(\.id), ["alice-0", "alice-3"])
            let next = try store.rides(.byStart(after: first[1].key(in: .byStart(after: nil))), rider: "alice", limit: 2)
            XCTAssertEqual(next.map(\.id), ["alice-5", "open-alice"])
            let ended = try store.rides(.ended(before: nil), rider: "alice", limit: 2)
            XCTAssertEqual(ended.map(\.id), ["alice-0", "alice-3"], "newest end first (ride i ended at t0 + 100 - i)")
            XCTAssertEqual(try store.rides(.ended(before: ended[1].key(in: .ended(before: nil))), rider: "alice", limit: 5).map(\.id), ["alice-5"])
            XCTAssertEqual(try store.rides(.byStart(after: nil), rider: "carol", limit: 5), [])
            XCTAssertEqual(try store.rides(.byStart(after: nil), rider: nil, limit: 10).count, 8, "no rider: every ride")
            store.close()
        }
    }

    /// Ids tie-break in byte order on every store ("B" before "a"), whatever PostgreSQL's
    /// locale would say, so one cursor means the same page on every store and node.
    func testIdsTieBreakInByteOrder() throws {
        try forEachStore { open, _ in
            let store = try open()
            try store.create(id: "a", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            try store.create(id: "B", planID: "p", owner: nil, limit: nil, startedAt: t0, reply: nil)
            XCTAssertEqual(try store.rides(.byStart(after: nil), limit: 5).map(\.id), ["B", "a"])
            XCTAssertEqual(try store.rides(.byStart(after: RideKey(at: t0, id: "B")), limit: 5).map(\.id), ["a"])
            for id in ["a", "B"] { try store.append(ride: id, .end(at: t0 + 1, reason: .rider, metres: 0), reply: nil) }
            XCTAssertEqual(try store.rides(.ended(before: nil), limit: 5).map(\.id), ["a", "B"])
            XCTAssertEqual(try store.rides(.ended(before: RideKey(at: t0 + 1, id: "a")), limit: 5).map(\.id), ["B"])
            store.close()
        }
    }
}
