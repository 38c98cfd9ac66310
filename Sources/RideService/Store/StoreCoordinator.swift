import RideAuth
import RideCore
import RideDevicePush
import RideProtocol
import RideStore
import RideWebhooks

/// The server's side of the store worker: decides each group of jobs with the ride book, turns
/// the decisions into store writes and frames, settles the book once the store has committed
/// (all on the worker thread), and once the commit is durable publishes the rides and posts
/// replies and pushes to the service threads (`publish`: on the worker or the store's sync
/// thread, touching only the registry, under its lock, and what the group carries). Nobody is
/// told anything before the transaction that records it is on disk.
package final class StoreCoordinator: GroupCommitClient {
    package typealias Job = StoreJob

    private var book: RideBook
    private let registry: RideRegistry
    private let clock: RideClock
    private let metrics: Metrics
    /// The frames' headroom, as the registry was handed it.
    private let pre: Int
    /// Hands a thread its events (Shard.post): called under the registry's view lock.
    private let deliver: (Int, [ShardEvent]) -> Void
    private var recent: RecentReplies
    /// --max-open-rides-per-rider (0: no cap).
    private let maxOpenRides: Int
    /// The `--webhook` URLs: every committed transition's write carries one outbox row for each.
    private let webhooks: WebhookRoster
    /// Called once a group whose writes carried outbox rows has committed (the sender's poke).
    private let eventsCommitted: () -> Void
    /// Whether a write of the group being decided carries outbox rows.
    private var groupHasEvents = false
    /// Where rides are: positions, zones, distance (GeoDesk.swift, GeoRequests.swift; the hooks under "where rides are").
    let desk: GeoDesk

    /// The group being decided: what to do with each job once the commit is known.
    fileprivate enum Step {
        /// `job`: the request as it came (nil for an auto-end), decided again if the store
        /// refuses the write because another node moved the ride first.
        case change(RideBook.Change, write: Int, reply: [UInt8]?, push: [UInt8], to: Requester?,
                    id: String?, key: ReplyKey?, type: String, job: Decided?)
        /// A request decided again in the next group (`decideAgain`): nothing to tell now.
        case again
        /// An answer made without a write; `needsCommit` when it replays a reply of this group.
        case answer([UInt8], to: Requester, needsCommit: Bool, id: String?, type: String)
        case lookup(String?, Requester, Continuation, ProtocolError?)
        case autoEndNotDue(String)
        /// An HTTP read's answer, held like a reply: it may show what the group read.
        case http(shard: Int, UInt64, UInt32, [UInt8])
        /// A position counted (or not): the sender's turn back, the ride's new distance and
        /// position for its ticks, and a zone push / operator warning when owed.
        case geo(GeoStep)
    }

    /// A settled group waiting for its sync: everything `publish` needs.
    package struct Group {
        fileprivate var steps: [Step]
        fileprivate var learned: [Ride]
        /// Other nodes' changes, each with its push (nil for a start).
        fileprivate var remote: [(ride: Ride, push: [UInt8]?)]
        fileprivate var results: [WriteResult]
        fileprivate var failure: StoreError?
        /// Whether it committed outbox rows: the sender is poked once the group is durable.
        fileprivate var outboxRows = false
    }
    /// Rides `publish` dropped from the registry, for the worker to forget before it decides
    /// the next group (the book is the worker's).
    private let dropped = Locked<[String]>([])

    private var steps: [Step] = []
    private var groupReplies: [ReplyKey: RideBook.Earlier] = [:]
    /// Rides read from the store during this group, published with it.
    private var learned: [Ride] = []
    /// With a shared store: where this node's catch-up read stands (nil: one node alone).
    private var cluster: ClusterCatchUp?
    /// Changes other nodes made, applied to the book in this group, published first.
    private var remote: [ClusterCatchUp.Update] = []
    private var clusterFailing = false
    /// Requests `finish` hands back to the worker to be decided on the store's newer state.
    private var redo: [StoreJob] = []

    /// A client's request and how many times it was decided on a stale view already.
    fileprivate struct Decided {
        let job: StoreJob
        let attempt: Int
    }
    /// Decisions one request gets before its refusal is answered: another node winning the
    /// same ride again and again is a contest, not a stale view.
    static let maxAttempts = 3

    /// `recentReplies`: how many to keep (0 when the store itself holds them in memory).
    package init(book: RideBook, registry: RideRegistry, clock: RideClock, metrics: Metrics, cluster: ClusterCatchUp? = nil,
         recentReplies: Int = RecentReplies.defaultCapacity, maxOpenRides: Int = 0, webhooks: WebhookRoster = WebhookRoster([]), eventsCommitted: @escaping () -> Void = {},
         desk: GeoDesk? = nil, deliver: @escaping (Int, [ShardEvent]) -> Void) {
        self.desk = desk ?? GeoDesk(zones: nil, clock: clock)
        recent = RecentReplies(capacity: recentReplies)
        self.webhooks = webhooks
        self.eventsCommitted = eventsCommitted
        self.maxOpenRides = maxOpenRides
        self.cluster = cluster
        self.book = book
        self.registry = registry
        pre = registry.pre
        self.clock = clock
        self.metrics = metrics
        self.deliver = deliver
    }

    // MARK: deciding

    package func prepare(_ jobs: [StoreJob], store: RideStore) -> [StoreWrite] {
        for rid in dropped.withLock({ d in defer { d.removeAll() }; return d }) { book.forget(rid) }
        let now = clock.now()
        catchUp(jobs, store: store)
        if let reads = store as? GroupReads {
            // One read for the group's request ids instead of one per request (a round trip
            // each on PostgreSQL, a statement's fixed cost each on SQLite).
            let keys = jobs.compactMap { job -> ReplyKey? in
                guard case .request(_, let id?, let scope, _, _, _) = job else { return nil }
                let key = ReplyKey(scope: scope, id: id)
                return recent[key] == nil ? key : nil
            }
            var unknown = Set<String>()
            // Traces the group will read from the store (GeoDesk loads a ride's checkpoint the
            // first time an end or a position needs it): on PostgreSQL one round trip each,
            // one after another on the store thread, for every end of a ride that reported
            // no position here. Read with the rest instead.
            var traces = Set<String>()
            for queued in jobs {
                var job = queued
                if case .decideAgain(let inner, _) = queued { job = inner }
                switch job {
                case .request(let r, _, _, _, _, _):
                    if let rid = r.rideID, !book.knows(rid) { unknown.insert(rid) }
                    if case .command(.end, let rid, _) = r, !desk.holds(rid) { traces.insert(rid) }
                case .position(let p, _, _, _):
                    if !book.knows(p.ride) { unknown.insert(p.ride) }
                    if !desk.holds(p.ride) { traces.insert(p.ride) }
                case .lookup(let rid?, _, _): if !book.knows(rid) { unknown.insert(rid) }
                case .autoEnd(let rid, _): if !desk.holds(rid) { traces.insert(rid) }
                default: break
                }
            }
            reads.prefetch(replies: keys.count > 1 ? keys : [], rides: unknown.count > 1 ? unknown.sorted() : [],
                           traces: traces.count > 1 ? traces.sorted() : [])
        }
        var writes: [StoreWrite] = []
        for queued in jobs {
            var job = queued, attempt = 0
            if case .decideAgain(let inner, let n) = queued { (job, attempt) = (inner, n) }
            let decided = Decided(job: job, attempt: attempt)
            switch job {
            case .cluster, .decideAgain:
                continue  // .cluster: done first, by catchUp; .decideAgain: unwrapped above
            case .request(let request, let id, let scope, let access, let from, let geo):
                decide(request, id: id, scope: scope, access: access, from: from, geo: geo, now: now, store: store, into: &writes,
                       decided: decided)
            case .api(let call, let from):
                decide(call.request, id: call.key.id, scope: call.key.scope, access: call.access, from: from, geo: call.geo, now: now,
                       store: store, into: &writes, api: call, decided: decided)
            case .position(let p, let id, let access, let from):
                position(p, id: id, access: access, from: from, store: store, into: &writes)
            case .autoEnd(let rid, let at):
                // Billed from the trace, as a rider's end would be.
                let metres = (try? desk.billedMetres(rid, clientDistance: nil) { () throws(StoreError) in try store.trace(rid) }) ?? 0
                guard case .change(let c) = book.decide(.autoEnd(ride: rid, at: at, metres: metres), now: now) else {
                    steps.append(.autoEndNotDue(rid))
                    continue
                }
                writes.append(write(c, reply: nil, now: now))
                transitioned(c, into: &writes)
                let push = ServerMessages.state(ride: c.after.ride, plan: c.plan, at: at, id: nil, prefix: pre)
                steps.append(.change(c, write: writes.count - 1, reply: nil, push: push, to: nil, id: nil, key: nil, type: "end", job: nil))
            case .lookup(let rid, let from, let then):
                var failure: ProtocolError?
                if let rid, !book.knows(rid) {
                    do throws(StoreError) { try learn(rid, store) } catch {
                        failure = ProtocolError(.unavailable, "ride storage is unavailable: \(error.message)")
                    }
                }
                steps.append(.lookup(rid, from, then, failure))
            case .prune(let before):
                do throws(StoreError) { try store.prune(repliesBefore: before) } catch {
                    Log.warn("could not forget old replies (retrying in an hour): \(error.message)")
                }
            case .purge(let retention, let before):
                retention.run(store, before: before)
            case .read(let from, let http, let work):
                let r = work(store, registry)
                if let token = http { steps.append(.http(shard: from.shard, token, r.status, r.body)) }
                else { steps.append(.answer(r.body, to: from, needsCommit: false, id: nil, type: "get")) }
            }
        }
        // Traces that changed and are 30 s past their checkpoint, noticed without a report.
        for cp in desk.dueCheckpoints() { writes.append(.trace(cp)) }
        // Operator warnings held back by a ride's warning interval, now that it is over.
        for (rid, w) in desk.dueWarnings() {
            steps.append(.geo(GeoStep(ride: rid, to: nil, warning: GeoPublish.fleetWarning(ride: rid, w.zone, at: w.at, prefix: pre))))
        }
        return writes
    }

    private func decide(_ request: RideBook.Request, id: String?, scope: String, access: Access?, from: Requester,
                        geo: ZoneFields?, now: UnixMillis, store: RideStore, into writes: inout [StoreWrite],
                        api: ServerAPICall? = nil, decided: Decided) {
        var request = request
        let type: String
        if case .command(let c, _, _) = request { type = c.rawValue } else { type = "start" }
        func answer(_ e: ProtocolError) {
            metrics.control(type, e.code.rawValue)
            let bytes = api.map { _ in ServerAPIIdempotency.packed(ServerAPIAnswer.error(e)) } ?? ServerMessages.error(e, prefix: pre)
            steps.append(.answer(bytes, to: from, needsCommit: false, id: id, type: type))
        }
        if let rid = request.rideID, !book.knows(rid) {
            do throws(StoreError) { try learn(rid, store) } catch {
                return answer(ProtocolError(.unavailable, "ride storage is unavailable: \(error.message)", id: id))
            }
        }
        let key = id.map { ReplyKey(scope: scope, id: $0) }
        var earlier: RideBook.Earlier?
        var fromGroup = false
        if let key {
            if let e = groupReplies[key] {
                earlier = e
                fromGroup = true
            } else if let e = recent[key] {
                earlier = e
            } else {
                do throws(StoreError) {
                    earlier = try store.reply(for: key).map { RideBook.Earlier(request: $0.request, bytes: $0.bytes) }
                    // An ops key answered before keys were scoped per account (ServerAPIIdempotency.legacyKey).
                    if earlier == nil, let legacy = api?.legacyKey {
                        earlier = recent[legacy]
                        if earlier == nil { earlier = try store.reply(for: legacy).map { RideBook.Earlier(request: $0.request, bytes: $0.bytes) } }
                    }
                } catch {
                    // Answering as if never applied could apply it twice: say so instead.
                    return answer(ProtocolError(.unavailable, "could not read earlier replies: \(error.message)", id: id))
                }
            }
        }
        // A server API key seen before: its stored answer, or 422 for another request.
        if let api, let earlier {
            metrics.control("retry", "replayed")
            let again = ServerAPIIdempotency.again(earlier, fingerprint: api.fingerprint)
            return steps.append(.answer(ServerAPIIdempotency.packed(again), to: from, needsCommit: fromGroup, id: id, type: type))
        }
        // A new ride of a rider at the cap (not a retry, not an existing id, not an operator's).
        if maxOpenRides > 0, earlier == nil, case .start(let rid, _, _, let owner?) = request,
           access?.claims.ops != true, !(rid.map(book.knows) ?? false), registry.openRides(of: owner) >= maxOpenRides {
            return answer(ProtocolError(.tooManyRides, "at most \(maxOpenRides) open rides per rider; end one first", id: id))
        }
        // Where the ride is may refuse it (a start or end in the wrong zone) and decides the
        // distance an end bills (GeoRequests.swift). A retry is answered as before.
        var forced = false
        if earlier == nil {
            switch geoCheck(request, geo: geo, access: access, id: id, store: store) {
            case .proceed(let r, let f): (request, forced) = (r, f)
            case .refuse(let e): return answer(e)
            }
        }
        func decideOnBook() -> RideBook.Decision {
            book.decide(request, now: now, earlier: earlier) { ride in
                guard let a = access, !a.mayControl(rideOwner: ride.owner) else { return nil }
                return RideBook.Refusal(.forbidden, a.claims.scope == .watch ? "this token may only watch rides" : "ride \"\(ride.id)\" belongs to another rider")
            } endedBy: { ride in
                // The receipt must not tell a rider they returned a scooter an operator ended.
                if forced { return .forced }
                guard let a = access, a.claims.ops, ride.owner != a.rider else { return .rider }
                return .byOperator
            }
        }
        var decision = decideOnBook()
        // Refused on this node's view of a ride other nodes also move: the view may be behind
        // the store (their notification not here yet). Read the ride and decide again, so the
        // answer is the one a single node would give.
        if case .refuse(let r) = decision, r.code == .invalidTransition, let rid = request.rideID, refreshFromStore(rid, store) {
            decision = decideOnBook()
        }
        switch decision {
        case .change(let c):
            if c.isStart, let owner = c.after.ride.owner { registry.startPending(c.after.ride.id, owner: owner) }
            // An ended ride's distance is its receipt's; its last position still goes with it.
            let trace = desk.trace(c.after.ride.id)
            var (reply, push) = ServerMessages.stateReplyAndPush(ride: c.after.ride, plan: c.plan, at: now, id: id, prefix: pre,
                                                                 distance: trace?.metres, position: trace?.position.map(RidePosition.init))
            // Stored without the LWS_PRE room, which is a property of this build, not of the reply.
            var stored = Array(reply[pre...])
            if let api {
                reply = ServerAPIIdempotency.packed(ServerAPIAnswer.success(api, ride: c.after.ride, plan: c.plan, at: now))
                stored = reply
            }
            let record = key.map { ReplyRecord(key: $0, request: api?.fingerprint ?? request.fingerprint, bytes: stored, at: now) }
            writes.append(write(c, reply: record, now: now))
            if let key, let record { groupReplies[key] = RideBook.Earlier(request: record.request, bytes: record.bytes) }
            let w = writes.count - 1
            if c.isStart { started(c, geo: geo, into: &writes) } else { transitioned(c, into: &writes) }
            steps.append(.change(c, write: w, reply: reply, push: push, to: from, id: id, key: key, type: type, job: decided))
        case .refuse(let r):
            answer(ProtocolError(Self.code(r.code), r.message, id: id))
        case .replay(let bytes):
            metrics.control("retry", "replayed")
            steps.append(.answer([UInt8](repeating: 0, count: pre) + bytes, to: from, needsCommit: fromGroup, id: id, type: type))
        case .nothing:
            break
        }
    }

    /// Applies what other nodes committed, before this group decides anything: the book has
    /// no undecided changes yet, and requests are then decided on the newest state.
    private func catchUp(_ jobs: [StoreJob], store: RideStore) {
        guard var c = cluster, let shared = store as? (RideStore & SharedJournal) else { return }
        var hints: [String: Int64] = [:]
        var full = false
        for case .cluster(let h, let all) in jobs {
            hints.merge(h, uniquingKeysWith: max)
            full = full || all
        }
        guard full || !hints.isEmpty else { return }
        do throws(StoreError) {
            let updates = try c.collect(hints: hints, full: full, rides: book.rides, store: shared)
            cluster = c
            for u in updates { adopt(u) }
            if clusterFailing { Log.notice("cluster catch-up: reading the journal again") }
            clusterFailing = false
        } catch {
            // Nothing applied and the cursor stays: the next beat reads the same entries.
            if !clusterFailing { Log.warn("cluster catch-up failed (retrying every beat): \(error.message)") }
            clusterFailing = true
        }
    }

    /// With a shared store: reads `rid` and adopts it when the store holds entries this node's
    /// book has not heard of yet. True when the book moved on.
    private func refreshFromStore(_ rid: String, _ store: RideStore) -> Bool {
        guard cluster != nil, let known = book.rides[rid]?.seq else { return false }
        metrics.add(metrics.storeRideReads)
        guard let s = try? store.ride(rid), s.seq > known else { return false }
        adopt(ClusterCatchUp.Update(entry: RideBook.Entry(ride: s.ride, seq: s.seq)))
        return true
    }

    /// Takes another writer's version of a ride into the book, to be published with the group.
    private func adopt(_ u: ClusterCatchUp.Update) {
        if book.knows(u.entry.ride.id) { book.replace(u.entry) } else { book.learn(u.entry) }
        // Another node moved it: its trace is read again from the store (that node wrote it
        // with the transition) when next needed.
        desk.forget(u.entry.ride.id)
        remote.append(u)
    }

    private func write(_ c: RideBook.Change, reply: ReplyRecord?, now: UnixMillis) -> StoreWrite {
        let r = c.after.ride
        let outbox = webhookEvents(c, now: now) + pushIntents(c, now: now)
        if !outbox.isEmpty { groupHasEvents = true }
        if c.isStart {
            return .create(NewRide(id: r.id, planID: r.planID, owner: r.owner, limit: r.limit, startedAt: r.startedAt, outbox: outbox), reply: reply)
        }
        return .append(JournalEntry(ride: r.id, seq: c.seq, transition: c.transition, outbox: outbox), reply: reply)
    }

    /// The change's webhook event, one row per endpoint, written in the transition's own
    /// transaction: a refused or failed write drops both. `created` is the group's decision
    /// instant, the time the transaction commits give or take the group's few milliseconds.
    private func webhookEvents(_ c: RideBook.Change, now: UnixMillis) -> [OutboxEvent] {
        let endpoints = webhooks.endpoints
        guard !endpoints.isEmpty else { return [] }
        let type: WebhookEventType
        switch c.transition {
        case .start: type = .started
        case .pause: type = .paused
        case .resume: type = .resumed
        case .end: type = .ended
        }
        // The ride as GET /rides/{id} returns it at this instant (the receipt once ended).
        // Only the endpoints that take this type (`--webhook URL#ride.ended`) get a row.
        let to = endpoints.filter { $0.wants(type.rawValue) }.map(\.url)
        guard !to.isEmpty else { return [] }
        let document = ServerMessages.rideDocument(ride: c.after.ride, plan: c.plan, at: now)
        return WebhookEvent(type: type, rideID: c.after.ride.id, created: now, ride: document).outboxEvents(endpoints: to)
    }

    /// With device pushes configured, the change's push intent (docs/push.md): one more outbox
    /// row, for the push sender's reserved endpoint, in the same transaction, so a transition
    /// committed is a push owed even across a crash. The content-state is the ride's at `now`.
    private func pushIntents(_ c: RideBook.Change, now: UnixMillis) -> [OutboxEvent] {
        guard registry.devicePush != nil else { return [] }
        let r = c.after.ride
        let zone = desk.zones == nil ? nil : desk.zone(r.id).map { RideActivityContent.Zone(name: $0.name, endAllowed: $0.rules.rideEndAllowed) }
        let content = RideActivityContent(r, c.plan, at: now, distance: desk.trace(r.id)?.metres, zone: zone)
        let intent = PushIntent(seq: c.seq, transition: c.transition.kind, content: content, rider: r.owner ?? "",
                                planName: c.plan.displayName, created: now, alert: c.isStart ? PushAlerts.started(plan: c.plan) : nil)
        return [OutboxEvent(eventID: "push_\(r.id)_\(c.seq)", type: "push.\(intent.transition)", rideID: r.id,
                            endpoint: OutboxEvent.pushEndpoint, created: now, body: intent.body())]
    }

    // MARK: where rides are (GeoDesk, GeoRequests.swift)

    private func geoCheck(_ request: RideBook.Request, geo: ZoneFields?, access: Access?, id: String?, store: RideStore) -> GeoGate {
        let ride = request.rideID.flatMap { book.rides[$0]?.ride }
        return desk.gate(request, geo: geo, access: access, id: id, ride: ride) { () throws(StoreError) in
            try request.rideID.flatMap { rid throws(StoreError) in try store.trace(rid) }
        }
    }

    /// A decided start: its trace begins (a checkpoint when it names a vehicle type), and its
    /// subscribers get the rules where it started.
    private func started(_ c: RideBook.Change, geo: ZoneFields?, into writes: inout [StoreWrite]) {
        let rid = c.after.ride.id
        let (rules, checkpoint) = desk.started(ride: rid, fields: geo)
        if let checkpoint { writes.append(.trace(checkpoint)) }
        if let rules { steps.append(.geo(GeoStep(ride: rid, to: nil, zonePush: GeoPublish.zonePush(ride: rid, rules, prefix: pre)))) }
    }

    /// A decided pause, resume or end: the trace as of now is written with it; an ended
    /// ride's trace is forgotten here (the store keeps it).
    private func transitioned(_ c: RideBook.Change, into writes: inout [StoreWrite]) {
        let rid = c.after.ride.id
        if let checkpoint = desk.transition(rid) { writes.append(.trace(checkpoint)) }
        if c.after.ride.state == .ended { desk.forget(rid) }
    }

    private func position(_ p: PositionReport, id: String?, access: Access?, from: Requester, store: RideStore,
                          into writes: inout [StoreWrite]) {
        if !book.knows(p.ride) { try? learn(p.ride, store) }
        let (step, checkpoint) = desk.position(p, ride: book.rides[p.ride]?.ride, access: access, id: id, to: (from.shard, from.session),
                                               prefix: pre) { () throws(StoreError) in try store.trace(p.ride) }
        if let checkpoint { writes.append(.trace(checkpoint)) }
        steps.append(.geo(step))
    }

    /// Under the view lock, once the group is durable: the sender's turn, the ride's figures
    /// for its ticks, the zone push to its subscribers, the warning to the operators.
    private func publishGeo(_ g: GeoStep, _ v: inout RideRegistry.View, _ events: inout [[ShardEvent]]) {
        if let to = g.to {
            events[to.shard].append(g.error.map { .reply(to.session, $0, ride: nil) } ?? .found(to.session, .nothing, nil, nil))
        }
        guard let live = v.rides[g.ride] else { return }
        if let metres = g.metres {
            let t = live.trace ?? LiveTrace()
            t.update(metres: metres, position: g.position)
            live.trace = t
        }
        if let push = g.zonePush {
            for i in 0..<registry.shards { events[i].append(.push(live, push, except: nil)) }
        }
        // A zone change while riding or paused: an `update` to the ride's activities, in memory.
        if let d = g.zone, let device = registry.devicePush, live.ride.state != .ended {
            let zone = RideActivityContent.Zone(name: d.name, endAllowed: d.rules.rideEndAllowed)
            device.zoneChanged(RideActivityContent(live.ride, live.planBox.plan, at: clock.now(), distance: g.metres, zone: zone))
        }
        if let w = g.warning { registry.ops?.zoneWarning(w) }
    }

    private func learn(_ rid: String, _ store: RideStore) throws(StoreError) {
        metrics.add(metrics.storeRideReads)
        guard let stored = try store.ride(rid) else { return }
        book.learn(RideBook.Entry(ride: stored.ride, seq: stored.seq))
        learned.append(stored.ride)
    }

    static func code(_ c: RideBook.RefusalCode) -> ErrorCode {
        switch c {
        case .rideNotFound: return .rideNotFound
        case .conflict: return .conflict
        case .invalidTransition, .tooManyTransitions: return .invalidTransition
        case .planNotFound: return .planNotFound
        case .forbidden: return .forbidden
        }
    }

    // MARK: after the commit

    package func finish(_ outcome: Result<[WriteResult], StoreError>, store: RideStore) -> Group {
        var groupFailure: StoreError?
        var results: [WriteResult] = []
        switch outcome {
        case .failure(let e):
            groupFailure = e
            book.settleNoneCommitted()
        case .success(let r):
            results = r
            var refused: Set<String> = []
            for step in steps {
                if case .change(let c, let w, _, _, _, _, _, _, _) = step, case .refused = r[w] { refused.insert(c.after.ride.id) }
            }
            book.settle(failed: refused)
            // Another writer got there first: the store's copy is the truth from now on, and
            // (when it moved on) this node's watchers are told, as for any other node's change.
            var movedOn: Set<String> = []
            for rid in refused {
                metrics.add(metrics.storeRideReads)
                guard let s = try? store.ride(rid) else { continue }
                let entry = RideBook.Entry(ride: s.ride, seq: s.seq)
                if s.seq > (book.rides[rid]?.seq ?? 0) {
                    adopt(ClusterCatchUp.Update(entry: entry))
                    movedOn.insert(rid)
                } else {
                    book.replace(entry)
                }
            }
            // A request refused only because it was decided on a view the store had moved past
            // is decided again on the store's state (next group, ahead of anything else),
            // instead of being answered `invalid_transition` for a transition that is valid.
            for (i, step) in steps.enumerated() {
                guard case .change(let c, let w, _, _, _, _, _, _, let d?) = step, !c.isStart, case .refused(let e) = r[w],
                      e.refusal == .notNext || e.refusal == .notAllowed, movedOn.contains(c.after.ride.id),
                      d.attempt + 1 < Self.maxAttempts else { continue }
                redo.append(.decideAgain(d.job, attempt: d.attempt + 1))
                steps[i] = .again
            }
        }
        // Retries of this group's requests are answered from memory from now on: a replay is
        // published with its own group, so never before this one.
        for step in steps {
            if case .change(_, let w, _, _, _, _, let key?, _, _) = step, groupFailure == nil, results[w] == .written,
               let g = groupReplies[key] { recent[key] = g }
        }
        let now = clock.now()
        let others = remote.map { u in
            (u.entry.ride, u.isStart ? nil : ServerMessages.state(ride: u.entry.ride, plan: book.plan(for: u.entry.ride), at: now, id: nil, prefix: pre))
        }
        let events = groupHasEvents && groupFailure == nil && results.contains(.written)
        groupHasEvents = false
        let group = Group(steps: steps, learned: learned, remote: others, results: results, failure: groupFailure, outboxRows: events)
        steps = []
        groupReplies = [:]
        learned = []
        remote = []
        return group
    }

    package func decideAgain() -> [StoreJob] {
        defer { redo.removeAll() }
        return redo
    }

    // MARK: once durable

    package func publish(_ group: Group) {
        let (steps, learned, remote, results, groupFailure) = (group.steps, group.learned, group.remote, group.results, group.failure)
        var events = [[ShardEvent]](repeating: [], count: registry.shards)
        let trimmed = registry.publishing { v -> [String] in
            for ride in learned { _ = registry.add(ride, &v) }
            // Other nodes' changes first: they committed before anything of this group.
            for (ride, push) in remote {
                let live: LiveRide
                if let l = v.rides[ride.id] {
                    live = l
                    registry.apply(ride, to: l, &v)
                } else {
                    live = registry.add(ride, &v)
                }
                guard let push else { continue }
                for i in 0..<registry.shards { events[i].append(.push(live, push, except: nil)) }
            }
            for step in steps {
                switch step {
                case .again:
                    continue
                case .change(let c, let w, let reply, let push, let to, let id, _, let type, _):
                    var failure = groupFailure
                    if failure == nil, case .refused(let e) = results[w] { failure = e }
                    let rid = c.after.ride.id
                    if c.isStart { registry.startSettled(rid, &v) }
                    if let failure {
                        if let to, to.http != nil {
                            metrics.control(type, failure.kind == .conflict ? "conflict" : failure.kind == .notFound ? "ride_not_found" : "unavailable")
                            events[to.shard].append(to.answer(ServerAPIAnswer.notRecorded(failure, type: type)))
                        } else if let to {
                            var code: ErrorCode = failure.kind == .conflict ? .conflict : failure.kind == .notFound ? .rideNotFound : .unavailable
                            // Refused because another node changed the ride first: for this
                            // request the ride's state did not allow it (the reply-key case
                            // stays a conflict).
                            if code == .conflict, !c.isStart, failure.refusal != .replyAlreadyRecorded { code = .invalidTransition }
                            metrics.control(type, code.rawValue)
                            let e = ProtocolError(code, "could not record the \(type): \(failure.message)", id: id)
                            events[to.shard].append(.reply(to.session, ServerMessages.error(e, prefix: pre), ride: nil))
                        } else {
                            // A conflict: another node ended it first (adopted above); not an error.
                            if failure.kind != .conflict {
                                Log.error("auto-end of ride \(rid) not recorded, retrying next tick: \(failure.message)")
                            }
                            v.rides[rid]?.autoEndQueued = false
                        }
                        continue
                    }
                    let live: LiveRide
                    if c.isStart {
                        live = registry.add(c.after.ride, &v)
                    } else if let l = v.rides[rid] {
                        live = l
                        registry.apply(c.after.ride, to: l, &v)
                    } else {
                        live = registry.add(c.after.ride, &v)
                    }
                    metrics.control(type, to == nil ? "auto" : "ok")
                    registry.ops?.transition(c.transition.kind, c.after.ride, c.plan, at: c.transition.at,
                                             watchers: live.subscriberCount.load(ordering: .relaxed))
                    if let to, let reply { events[to.shard].append(to.reply(reply, ride: live)) }
                    if !c.isStart {
                        for i in 0..<registry.shards {
                            events[i].append(.push(live, push, except: to?.shard == i ? to?.session : nil))
                        }
                    }
                case .answer(let bytes, let to, let needsCommit, let id, let type):
                    if needsCommit, let failure = groupFailure {
                        let e = ProtocolError(.unavailable, "could not record the \(type): \(failure.message)", id: id)
                        events[to.shard].append(to.reply(to.http == nil ? ServerMessages.error(e, prefix: pre) : ServerAPIIdempotency.packed(ServerAPIAnswer.error(e)), ride: nil))
                    } else {
                        events[to.shard].append(to.reply(bytes, ride: nil))
                    }
                case .lookup(let rid, let from, let then, let failure):
                    events[from.shard].append(.found(from.session, then, rid.flatMap { v.rides[$0] }, failure))
                case .autoEndNotDue(let rid):
                    v.rides[rid]?.autoEndQueued = false
                case .http(let shard, let token, let status, let body):
                    events[shard].append(.httpAnswer(token, HTTPAnswer(status: status, body: body)))
                case .geo(let g):
                    publishGeo(g, &v, &events)
                }
            }
            let dropped = registry.trimEnded(&v)
            for i in events.indices where !events[i].isEmpty { deliver(i, events[i]) }
            return dropped
        }
        if !trimmed.isEmpty { dropped.withLock { $0 += trimmed } }
        // Durable now: have the sender read the new rows rather than wait for its next poll.
        if group.outboxRows {
            eventsCommitted()
            registry.devicePush?.poke()
        }
    }
}

/// Replies recorded by this process lately, so most retries need no store read.
package struct RecentReplies {
    private var map: [ReplyKey: RideBook.Earlier] = [:]
    private var order: [ReplyKey] = []
    private var head = 0
    let capacity: Int
    /// A retry comes within seconds of its request, so the last 1,024 replies cover it at any
    /// rate this node decides; older keys are read from the store. 8,192 held ~2 MB of
    /// replies, ~0.1 KiB per subscriber at 19,000 (issue 29's RSS per subscriber).
    package static let defaultCapacity = 1_024

    init(capacity: Int) { self.capacity = capacity }

    subscript(key: ReplyKey) -> RideBook.Earlier? {
        get { map[key] }
        set {
            guard let newValue else { map[key] = nil; return }
            if map.updateValue(newValue, forKey: key) == nil { order.append(key) }
            if order.count - head > capacity {
                map[order[head]] = nil
                head += 1
                if head > capacity {
                    order.removeFirst(head)
                    head = 0
                }
            }
        }
    }
}
