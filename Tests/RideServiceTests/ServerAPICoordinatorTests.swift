import XCTest
import RideServiceTesting
import RideStoreTesting
import RideAuth
@testable import RideCore
import RideProtocol
@testable import RideService
import RideStore

/// The server API through the store worker's turn by hand (no sockets, a clock advanced by
/// hand): answered only after the commit, replayed byte for byte from memory or the store,
/// 422 for a reused key, ownership and the cap as for ride.v1, and pushes to watchers.
final class ServerAPICoordinatorTests: XCTestCase {
    let t0: UnixMillis = 1_764_430_000_000
    let secret = Array("0123456789abcdef0123456789abcdef".utf8)
    let wall: Int64 = 1_764_430_000

    func call(_ path: String, _ body: String = "", key: String = "k-1", sub: String? = nil, ops: Bool = false) -> ServerAPICall {
        let token = sub.map { TokenSigner(secret: secret).sign(TokenClaims(sub: $0, scope: .control, ops: ops, exp: wall + 600)) }
        guard case .success(let c) = ServerAPIRequest.admit(method: "POST", path: path, idempotencyKey: key, token: token,
                                                             body: Array(body.utf8), verifier: sub == nil ? nil : TokenVerifier(secret: secret), wall: wall)
        else { fatalError("refused at admission: \(path) \(body)") }
        return c
    }

    /// Submits `calls` as one group from thread 0 under tokens 1, 2, …; the HTTP answers by token.
    @discardableResult
    func run(_ h: EmbeddedService, _ calls: ServerAPICall...) -> [HTTPAnswer] {
        h.events = [[], []]
        for (i, c) in calls.enumerated() { h.submit(.api(c, from: Requester(shard: 0, session: 0, http: UInt64(i + 1)))) }
        h.run()
        let answers = h.events[0].compactMap { e -> (UInt64, HTTPAnswer)? in
            if case .httpAnswer(let t, let a) = e { return (t, a) } else { return nil }
        }
        XCTAssertEqual(answers.map(\.0), Array(1...UInt64(calls.count)), "one answer per request, in order")
        return answers.map(\.1)
    }

    func json(_ a: HTTPAnswer) -> JSON { try! JSON.parse(a.body) }
    /// `a` as a repeated key gets it: the same status and bytes, marked replayed.
    func replay(_ a: HTTPAnswer) -> HTTPAnswer { HTTPAnswer(status: a.status, body: a.body, replayed: true) }
    func code(_ a: HTTPAnswer) -> String? { json(a)["error"]?["code"]?.string }

    func testCreateIsAnsweredAfterTheCommitWithTheRideDocumentAndRepliedTheSameBytesLater() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        let create = call("/v1/rides", #"{"rider":"alice","ride":"r-1","limit":600}"#)
        h.submit(.api(create, from: Requester(shard: 0, session: 0, http: 7)))
        XCTAssertTrue(h.events.allSatisfy(\.isEmpty), "nobody told before the commit")
        h.run()
        XCTAssertEqual(h.store.commits.count, 1)
        guard case .httpAnswer(7, let first) = h.events[0].first else { return XCTFail("\(h.events)") }
        XCTAssertFalse(first.replayed)
        XCTAssertEqual(first.status, 201)
        // Exactly GET /rides/{id}'s document at the decision.
        let ride = try XCTUnwrap(h.registry.find("r-1"))
        XCTAssertEqual(first.body, ServerMessages.rideDocument(ride: h.registry.snapshot(ride), plan: .standard, at: t0))
        XCTAssertEqual(json(first)["owner"]?.string, "alice")
        XCTAssertEqual(json(first)["state"]?.string, "riding")
        // Stored in the reply table under the key, with the request's fingerprint.
        let stored = try XCTUnwrap(try h.store.reply(for: create.key))
        XCTAssertEqual(stored.request, create.fingerprint)
        XCTAssertEqual(ServerAPIIdempotency.unpacked(stored.bytes), first)

        clock.advance(seconds: 30)
        XCTAssertEqual(run(h, create), [replay(first)], "replayed from memory: same status, same bytes, though the fare moved on")
        XCTAssertEqual(h.store.commits.count, 1, "applied once")
        // A restarted node (or another node on the same store) knows only the store.
        h.coordinator = StoreCoordinator(book: RideBook(plans: [.standard]), registry: h.registry, clock: clock, metrics: Metrics()) {
            [unowned h] i, e in h.events[i] += e
        }
        XCTAssertEqual(run(h, create), [replay(first)], "replayed from the store")
        XCTAssertEqual(h.store.commits.count, 1)
    }

    func testTheSameKeyWithAnotherBodyIs422AndAppliesNothing() {
        let h = EmbeddedService(ManualClock(t0))
        XCTAssertEqual(run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-1"}"#)).map(\.status), [201])
        let reused = run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-2"}"#))
        XCTAssertEqual(reused.map(\.status), [422])
        XCTAssertEqual(reused.map(code), ["idempotency_key_reused"])
        XCTAssertNil(h.registry.find("r-2"))
        // The same key on another path is another request too.
        XCTAssertEqual(run(h, call("/v1/rides/r-1/end")).map(code), ["idempotency_key_reused"])
        XCTAssertEqual(h.registry.find("r-1").map { h.registry.snapshot($0).state }, .riding)
        XCTAssertEqual(h.store.commits.count, 1)
    }

    func testTransitionsAndTheirErrorsAndWatchersArePushed() {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-1"}"#, key: "c"))
        clock.advance(seconds: 60)
        let paused = run(h, call("/v1/rides/r-1/pause", key: "p"))
        XCTAssertEqual(paused.map(\.status), [200])
        XCTAssertEqual(json(paused[0])["state"]?.string, "paused")
        XCTAssertEqual(h.pushes(1).count, 1, "watchers on the other thread get the transition as a ride.v1 push")
        XCTAssertEqual(h.json(h.pushes(1)[0])["state"]?.string, "paused")
        let again = run(h, call("/v1/rides/r-1/pause", key: "p2"))
        XCTAssertEqual(again.map { "\($0.status) \(code($0) ?? "")" }, ["409 invalid_transition"])
        XCTAssertEqual(run(h, call("/v1/rides/r-9/end", key: "e9")).map { "\($0.status) \(code($0) ?? "")" }, ["404 ride_not_found"])
        XCTAssertEqual(run(h, call("/v1/rides/r-1/resume", key: "r")).map(\.status), [200])
        clock.advance(seconds: 60)
        let ended = run(h, call("/v1/rides/r-1/end", #"{"distance":1200}"#, key: "e"))
        XCTAssertEqual(ended.map(\.status), [200])
        XCTAssertEqual(json(ended[0])["receipt"]?["distance"]?.int, 1200)
        XCTAssertEqual(json(ended[0])["receipt"]?["reason"]?.string, "rider")
        XCTAssertEqual(run(h, call("/v1/rides/r-1/end", #"{"distance":1200}"#, key: "e")), ended.map(replay), "a retried end: the receipt again")
    }

    func testARiderActsOnItsOwnRidesOnlyAndOpsOnAny() {
        let h = EmbeddedService(ManualClock(t0))
        XCTAssertEqual(run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-a"}"#, sub: "alice")).map(\.status), [201])
        let bob = run(h, call("/v1/rides/r-a/pause", key: "p", sub: "bob"))
        XCTAssertEqual(bob.map { "\($0.status) \(code($0) ?? "")" }, ["403 forbidden"])
        XCTAssertEqual(run(h, call("/v1/rides/r-a/pause", key: "p", sub: "alice")).map(\.status), [200])
        let ops = run(h, call("/v1/rides/r-a/end", key: "e", sub: "backend", ops: true))
        XCTAssertEqual(ops.map(\.status), [200])
        XCTAssertEqual(json(ops[0])["receipt"]?["reason"]?.string, "operator", "the receipt says who ended it")
    }

    /// Zones judge the server API's create and end as they judge ride.v1's (issue 40, item 5):
    /// a start in a no-start zone and an end without a fresh position are 422 with ride.v1's
    /// codes; an ops token's `force` ends it anyway and the receipt says `operator_forced`.
    func testZonesJudgeTheServerAPIAsTheyJudgeRideV1() throws {
        let clock = ManualClock(t0)
        let h = EmbeddedService(clock)
        h.coordinator = StoreCoordinator(book: RideBook(plans: [.standard]), registry: h.registry, clock: clock, metrics: Metrics(),
                                         desk: GeoDesk(zones: GeoDeskTests.fencing, clock: clock)) { [unowned h] i, e in h.events[i] += e }
        // Zone A (0…0.002°) allows no start: refused before anything is written.
        let inA = run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-a","lat":0.001,"lon":0.001}"#, key: "a", sub: "alice"))
        XCTAssertEqual(inA.map { "\($0.status) \(code($0) ?? "")" }, ["422 start_not_allowed"])
        XCTAssertEqual(json(inA[0])["error"]?["message"]?.string, #"rides may not start in zone "A""#)
        XCTAssertTrue(h.store.commits.isEmpty)
        XCTAssertNil(h.registry.find("r-a"))
        // Outside every zone, with a vehicle type: started.
        let ok = run(h, call("/v1/rides", #"{"rider":"alice","ride":"r-1","lat":0.003,"lon":0.001,"vehicle_type":"scooter"}"#,
                             key: "b", sub: "alice"))
        XCTAssertEqual(ok.map(\.status), [201])
        clock.advance(seconds: 120)
        // Two minutes on, nothing reported since: the rider's end needs a position.
        let stale = run(h, call("/v1/rides/r-1/end", key: "e1", sub: "alice"))
        XCTAssertEqual(stale.map { "\($0.status) \(code($0) ?? "")" }, ["422 position_required"])
        // The operator's forced end: ended, and the receipt says why.
        let forced = run(h, call("/v1/rides/r-1/end", #"{"force":true}"#, key: "e2", sub: "backend", ops: true))
        XCTAssertEqual(forced.map(\.status), [200])
        XCTAssertEqual(json(forced[0])["state"]?.string, "ended")
        XCTAssertEqual(json(forced[0])["receipt"]?["reason"]?.string, "operator_forced")
    }

    func testTheOpenRidesCapExemptsOpsTokens() {
        let h = EmbeddedService(ManualClock(t0), maxOpenRides: 1)
        XCTAssertEqual(run(h, call("/v1/rides", #"{"rider":"alice"}"#, key: "1", sub: "alice")).map(\.status), [201])
        let capped = run(h, call("/v1/rides", #"{"rider":"alice"}"#, key: "2", sub: "alice"))
        XCTAssertEqual(capped.map { "\($0.status) \(code($0) ?? "")" }, ["429 too_many_rides"])
        XCTAssertEqual(run(h, call("/v1/rides", #"{"rider":"alice"}"#, key: "3", sub: "backend", ops: true)).map(\.status), [201])
        XCTAssertEqual(h.registry.openRides(of: "alice"), 2)
    }

    func testAFailedCommitIs503AndTheRetryApplies() {
        let h = EmbeddedService(ManualClock(t0))
        h.store.failNext = StoreError(.unavailable, "disk full")
        let create = call("/v1/rides", #"{"rider":"alice","ride":"r-1"}"#)
        let failed = run(h, create)
        XCTAssertEqual(failed.map { "\($0.status) \(code($0) ?? "")" }, ["503 unavailable"])
        XCTAssertNil(h.registry.find("r-1"))
        XCTAssertEqual(run(h, create).map(\.status), [201])
    }

    func testTheSameKeyTwiceInOneGroupIsAppliedOnceAndBothGetTheSameAnswer() {
        let h = EmbeddedService(ManualClock(t0))
        let create = call("/v1/rides", #"{"rider":"alice"}"#)
        let answers = run(h, create, create)
        XCTAssertEqual(answers.map(\.status), [201, 201])
        XCTAssertEqual(replay(answers[0]), answers[1])
        XCTAssertEqual(h.store.commits.map(\.count), [1])
        XCTAssertEqual(h.registry.openRides(of: "alice"), 1, "one ride, though no ride id was given")
    }

    /// Stripe's scoping: the operator's backend is one account whatever `sub` each of its
    /// instances' tokens carries; a rider's keys are the rider's own.
    func testOpsTokensShareOneKeyScopeAndRidersHaveTheirOwn() {
        let h = EmbeddedService(ManualClock(t0))
        let body = #"{"rider":"alice"}"#
        let first = run(h, call("/v1/rides", body, key: "k", sub: "backend-1", ops: true))
        XCTAssertEqual(first.map(\.status), [201])
        let second = run(h, call("/v1/rides", body, key: "k", sub: "backend-2", ops: true))
        XCTAssertEqual(second, first.map(replay), "another instance of the backend, the same key: the same answer")
        XCTAssertEqual(h.registry.openRides(of: "alice"), 1, "one ride")
        // The rider's own key "k" is another account's: applied, not replayed.
        let riders = run(h, call("/v1/rides", body, key: "k", sub: "alice"))
        XCTAssertEqual(riders.map(\.status), [201])
        XCTAssertFalse(riders[0].replayed)
        XCTAssertEqual(h.registry.openRides(of: "alice"), 2)
    }

    /// An ops key recorded before keys were scoped per account (under the token's own sub) is
    /// still found: a retry across the upgrade is answered, not applied again.
    func testAnOpsKeyStoredUnderItsSubBeforeTheUpgradeIsStillReplayed() throws {
        let h = EmbeddedService(ManualClock(t0))
        let create = call("/v1/rides", #"{"rider":"alice","ride":"r-old"}"#, key: "k", sub: "backend", ops: true)
        let old = HTTPAnswer(status: 201, body: Array(#"{"ride":"r-old"}"#.utf8))
        let legacy = try XCTUnwrap(create.legacyKey)
        XCTAssertEqual(legacy, ServerAPIIdempotency.replyKey(subject: "backend", key: "k"))
        let ride = NewRide(id: "r-old", planID: "default", owner: "alice", limit: nil, startedAt: t0)
        let reply = ReplyRecord(key: legacy, request: create.fingerprint, bytes: ServerAPIIdempotency.packed(old), at: t0)
        XCTAssertEqual(try h.store.inner.commit([.create(ride, reply: reply)]), [.written])
        XCTAssertEqual(run(h, create), [replay(old)])
        XCTAssertEqual(h.store.commits.count, 0, "nothing applied")
    }

    /// Another node commits the same key between this node's read of it and its commit: the
    /// store refuses the write, the answer is 409 in flight, and the retry gets that node's answer.
    func testAnotherNodeFirstWithTheSameKeyIs409InFlightAndTheRetryGetsItsAnswer() throws {
        let h = EmbeddedService(ManualClock(t0))
        let create = call("/v1/rides", #"{"rider":"alice"}"#)
        let theirs = HTTPAnswer(status: 201, body: Array(#"{"ride":"r-theirs"}"#.utf8))
        let t0 = self.t0
        h.store.beforeCommit = { [unowned h] in
            let ride = NewRide(id: "r-theirs", planID: "default", owner: "alice", limit: nil, startedAt: t0)
            let reply = ReplyRecord(key: create.key, request: create.fingerprint, bytes: ServerAPIIdempotency.packed(theirs), at: t0)
            XCTAssertEqual(try? h.store.inner.commit([.create(ride, reply: reply)]), [.written])
            h.store.beforeCommit = nil
        }
        let raced = run(h, create)
        XCTAssertEqual(raced.map { "\($0.status) \(code($0) ?? "")" }, ["409 idempotency_key_in_flight"])
        XCTAssertEqual(h.registry.openRides(of: "alice"), 0, "this node's ride was not created")
        XCTAssertEqual(run(h, create), [replay(theirs)], "the retry: the other node's answer")
    }
}
