import XCTest
@testable import RideCore

/// The ride book against a `ManualClock` advanced by hand: each request's decision (entry to
/// persist, new state, refusal, replay), groups undone when their commit fails, auto-ends.
final class RideBookTests: XCTestCase {
    private let t0: UnixMillis = 1_764_430_000_000

    /// Deterministic ids for generated-id tests.
    struct Counter: RandomNumberGenerator {
        var n: UInt64 = 0
        mutating func next() -> UInt64 { n += 1; return n }
    }

    private func change(_ d: RideBook.Decision, file: StaticString = #filePath, line: UInt = #line) -> RideBook.Change? {
        guard case .change(let c) = d else { XCTFail("expected a change, got \(d)", file: file, line: line); return nil }
        return c
    }

    func testStartRecordsEntryOneWithTheEffectiveLimit() throws {
        let clock = ManualClock(t0)
        let capped = FarePlan(id: "capped", names: ["en": "Capped"], currency: .krw, price: 0, maxRideSeconds: 600)
        var book = RideBook(plans: [.standard, capped], rng: Counter())
        let c = try XCTUnwrap(change(book.decide(.start(ride: "r-1", plan: "capped", limit: 900, owner: "u"), now: clock.now())))
        XCTAssertEqual(c.transition, .start(at: t0))
        XCTAssertEqual(c.seq, 1)
        XCTAssertTrue(c.isStart)
        XCTAssertEqual(c.after.ride, Ride(id: "r-1", planID: "capped", owner: "u", limit: 600, startedAt: t0))
        XCTAssertEqual(c.plan.id, "capped")
        XCTAssertEqual(book.decide(.start(ride: "r-1", plan: nil, limit: nil, owner: nil), now: t0),
                       .refuse(.init(.conflict, "ride \"r-1\" already exists")))
        XCTAssertEqual(book.decide(.start(ride: "r-2", plan: "nope", limit: nil, owner: nil), now: t0),
                       .refuse(.init(.planNotFound, "no plan \"nope\"")))
        // No id asked: one is made, from the injected generator, on the default plan.
        let g = try XCTUnwrap(change(book.decide(.start(ride: nil, plan: nil, limit: nil, owner: nil), now: t0)))
        XCTAssertEqual(g.after.ride.id, "r-bcdefghijk")
        XCTAssertEqual(g.after.ride.planID, "default")
        XCTAssertNil(g.after.ride.limit)
    }

    func testCommandsNumberTheJournalAndRefuseWhatTheStateDoesNotAllow() throws {
        let clock = ManualClock(t0)
        var book = RideBook(plans: [.standard])
        _ = book.decide(.start(ride: "r", plan: nil, limit: nil, owner: nil), now: clock.now())
        book.settle()
        clock.advance(seconds: 61)
        let p = try XCTUnwrap(change(book.decide(.command(.pause, ride: "r", metres: nil), now: clock.now())))
        XCTAssertEqual(p.transition, .pause(at: t0 + 61_000))
        XCTAssertEqual(p.seq, 2)
        XCTAssertFalse(p.isStart)
        XCTAssertEqual(book.decide(.command(.pause, ride: "r", metres: nil), now: clock.now()),
                       .refuse(.init(.invalidTransition, "ride is paused; cannot pause")))
        clock.advance(seconds: 30)
        let r = try XCTUnwrap(change(book.decide(.command(.resume, ride: "r", metres: nil), now: clock.now())))
        XCTAssertEqual(r.seq, 3)
        clock.advance(millis: 62_500)
        let e = try XCTUnwrap(change(book.decide(.command(.end, ride: "r", metres: 1_200), now: clock.now())))
        XCTAssertEqual(e.transition, .end(at: t0 + 153_500, reason: .rider, metres: 1_200))
        XCTAssertEqual(e.seq, 4)
        XCTAssertEqual(e.after.ride.state, .ended)
        XCTAssertEqual(e.after.ride.elapsedSeconds(at: t0 + 999_000), 123)
        XCTAssertEqual(e.after.ride.pausedSeconds(at: t0 + 999_000), 30)
        book.settle()
        XCTAssertEqual(book.decide(.command(.resume, ride: "r", metres: nil), now: clock.now()),
                       .refuse(.init(.invalidTransition, "ride has ended; cannot resume")))
        XCTAssertEqual(book.decide(.command(.end, ride: "ghost", metres: nil), now: clock.now()),
                       .refuse(.init(.rideNotFound, "no ride \"ghost\"")))
        XCTAssertEqual(book.rides["r"]?.seq, 4)
    }

    func testRetriesReplayOnlyTheSameRequestAndOnlyAfterTheOwnershipCheck() throws {
        var book = RideBook(plans: [.standard])
        _ = book.decide(.start(ride: "r", plan: nil, limit: nil, owner: "alice"), now: t0)
        book.settle()
        let first = RideBook.Earlier(request: "pause r", bytes: [1, 2, 3])
        let mallory: (Ride) -> RideBook.Refusal? = { $0.owner == "mallory" ? nil : .init(.forbidden, "ride \"\($0.id)\" belongs to another rider") }
        XCTAssertEqual(book.decide(.command(.pause, ride: "r", metres: nil), now: t0, earlier: first, authorize: mallory),
                       .refuse(.init(.forbidden, "ride \"r\" belongs to another rider")))
        XCTAssertEqual(book.decide(.command(.pause, ride: "r", metres: nil), now: t0, earlier: first), .replay([1, 2, 3]))
        // The same id reused for another type or another ride: a conflict, and nothing applied.
        XCTAssertEqual(book.decide(.command(.end, ride: "r", metres: nil), now: t0, earlier: first),
                       .refuse(.init(.conflict, "this request id was already used for \"pause r\"; send a new id for \"end r\"")))
        XCTAssertEqual(book.decide(.start(ride: "s", plan: nil, limit: nil, owner: nil), now: t0, earlier: first),
                       .refuse(.init(.conflict, "this request id was already used for \"pause r\"; send a new id for \"start s\"")))
        // Replies recorded before requests were (schema 2) match their key alone.
        XCTAssertEqual(book.decide(.command(.end, ride: "r", metres: nil), now: t0, earlier: .init(request: nil, bytes: [9])), .replay([9]))
        XCTAssertEqual(book.rides["r"]?.seq, 1)
        XCTAssertEqual(book.rides["r"]?.ride.state, .riding)
    }

    func testAGroupDecidesAgainstItsOwnChangesAndIsUndoneWhenItsCommitFails() throws {
        let clock = ManualClock(t0)
        var book = RideBook(plans: [.standard])
        _ = book.decide(.start(ride: "a", plan: nil, limit: nil, owner: nil), now: clock.now())
        _ = book.decide(.start(ride: "b", plan: nil, limit: nil, owner: nil), now: clock.now())
        book.settle()
        clock.advance(seconds: 5)
        // Two requests in flight on one ride: the second sees the first.
        XCTAssertEqual(change(book.decide(.command(.pause, ride: "a", metres: nil), now: clock.now()))?.seq, 2)
        XCTAssertEqual(change(book.decide(.command(.resume, ride: "a", metres: nil), now: clock.now()))?.seq, 3)
        XCTAssertEqual(change(book.decide(.command(.pause, ride: "b", metres: nil), now: clock.now()))?.seq, 2)
        XCTAssertEqual(change(book.decide(.start(ride: "c", plan: nil, limit: nil, owner: nil), now: clock.now()))?.seq, 1)
        book.settleNoneCommitted()
        XCTAssertEqual(book.rides["a"], RideBook.Entry(ride: Ride(id: "a", planID: "default", owner: nil, limit: nil, startedAt: t0), seq: 1))
        XCTAssertEqual(book.rides["b"]?.seq, 1)
        XCTAssertNil(book.rides["c"])

        // One ride refused by the store: only it goes back.
        _ = book.decide(.command(.pause, ride: "a", metres: nil), now: clock.now())
        _ = book.decide(.command(.pause, ride: "b", metres: nil), now: clock.now())
        book.settle(failed: ["a"])
        XCTAssertEqual(book.rides["a"]?.ride.state, .riding)
        XCTAssertEqual(book.rides["a"]?.seq, 1)
        XCTAssertEqual(book.rides["b"]?.ride.state, .paused)
        XCTAssertEqual(book.rides["b"]?.seq, 2)
    }

    func testAutoEndsAtTheLimitInstantOnlyWhileDue() throws {
        let clock = ManualClock(t0)
        let plan = FarePlan(id: "p", names: ["en": "P"], currency: .krw, price: 500, maxPauseSeconds: 120)
        var book = RideBook(plans: [plan])
        _ = book.decide(.start(ride: "t", plan: nil, limit: 90, owner: nil), now: clock.now())
        _ = book.decide(.start(ride: "p", plan: nil, limit: nil, owner: nil), now: clock.now())
        clock.advance(seconds: 10)
        _ = book.decide(.command(.pause, ride: "p", metres: nil), now: clock.now())
        book.settle()
        XCTAssertEqual(book.decide(.autoEnd(ride: "t", at: t0 + 89_000), now: t0 + 89_000), .nothing)
        let t = try XCTUnwrap(change(book.decide(.autoEnd(ride: "t", at: t0 + 91_000), now: t0 + 91_000)))
        XCTAssertEqual(t.transition, .end(at: t0 + 90_000, reason: .timeLimit, metres: 0))
        XCTAssertEqual(t.seq, 2)
        // Asked again (the tick noticed it twice): already ended in this group, nothing more.
        XCTAssertEqual(book.decide(.autoEnd(ride: "t", at: t0 + 92_000), now: t0 + 92_000), .nothing)
        let p = try XCTUnwrap(change(book.decide(.autoEnd(ride: "p", at: t0 + 131_000), now: t0 + 131_000)))
        XCTAssertEqual(p.transition, .end(at: t0 + 130_000, reason: .pauseLimit, metres: 0))
        XCTAssertEqual(p.seq, 3)
        XCTAssertEqual(book.decide(.autoEnd(ride: "ghost", at: t0), now: t0), .nothing)
    }

    func testPastTheJournalCapOnlyAnEndIsAccepted() throws {
        var book = RideBook(plans: [.standard], maxEntries: 5)
        _ = book.decide(.start(ride: "r", plan: nil, limit: nil, owner: nil), now: t0)
        for (n, c) in [RideCommand.pause, .resume, .pause].enumerated() {
            XCTAssertEqual(change(book.decide(.command(c, ride: "r", metres: nil), now: t0 + Int64(n)))?.seq, Int64(n) + 2)
        }
        XCTAssertEqual(book.decide(.command(.resume, ride: "r", metres: nil), now: t0 + 9),
                       .refuse(.init(.tooManyTransitions, "ride \"r\" has recorded 4 transitions, the most one ride may have; it can only be ended")))
        XCTAssertEqual(change(book.decide(.command(.end, ride: "r", metres: nil), now: t0 + 9))?.seq, 5)
    }

    func testAnEndRecordsWhoEndedItAndTheReceiptSaysSo() throws {
        var book = RideBook(plans: [.standard])
        _ = book.decide(.start(ride: "a", plan: nil, limit: nil, owner: "u"), now: t0)
        _ = book.decide(.start(ride: "b", plan: nil, limit: nil, owner: "u"), now: t0)
        let byRider = try XCTUnwrap(change(book.decide(.command(.end, ride: "a", metres: 700), now: t0 + 61_000)))
        XCTAssertEqual(byRider.transition, .end(at: t0 + 61_000, reason: .rider, metres: 700))
        let byOps = try XCTUnwrap(change(book.decide(.command(.end, ride: "b", metres: 0), now: t0 + 61_000,
                                                     endedBy: { ride in ride.owner == "u" ? .byOperator : .rider })))
        XCTAssertEqual(byOps.transition, .end(at: t0 + 61_000, reason: .byOperator, metres: 0))
        XCTAssertEqual(byOps.after.ride.endReason, .byOperator)
        XCTAssertEqual(EndReason.byOperator.rawValue, "operator")
    }

    func testFingerprintsNameTypeAndRide() {
        XCTAssertEqual(RideBook.Request.start(ride: nil, plan: "x", limit: 5, owner: nil).fingerprint, "start")
        XCTAssertEqual(RideBook.Request.start(ride: "r-1", plan: nil, limit: nil, owner: nil).fingerprint, "start r-1")
        XCTAssertEqual(RideBook.Request.command(.end, ride: "r-1", metres: 3).fingerprint, "end r-1")
    }
}
