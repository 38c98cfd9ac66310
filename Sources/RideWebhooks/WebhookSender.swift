import Foundation
import RideCore
import RideHTTPClient
import RideStore
import Synchronization

/// Where the sender reads pending rows and records what happened: the store's outbox table
/// (SQLite, PostgreSQL with leases) or `MemoryOutbox`. Called only from the sender's loop thread.
public protocol WebhookOutbox: AnyObject, Sendable {
    /// The head of each lane — per endpoint and ride, the pending row (not delivered, not dead)
    /// with the lowest `seq` — at most `limit` of them, soonest `nextAttemptAt` first (then
    /// `seq`). Only heads may be sent, so reading only heads bounds memory by lanes; reading the
    /// soonest first means lanes a receiver keeps refusing (waiting minutes) cannot fill the
    /// batch and starve lanes that are due. Rows handed out before are handed out again; the
    /// machine skips them. In SQL:
    ///   SELECT … FROM webhook_outbox o WHERE state = 'pending' AND seq =
    ///     (SELECT min(seq) FROM webhook_outbox i WHERE i.state = 'pending'
    ///      AND i.endpoint = o.endpoint AND i.ride = o.ride)
    ///   ORDER BY next_attempt_at, seq LIMIT ?
    func pending(limit: Int) -> [OutboxRow]
    func record(_ update: OutboxUpdate)
    /// Counts for `/metrics`, read by the sender after each `pending` (never by a service thread).
    func stats() -> OutboxStats
    /// Dead rows, oldest first, for `GET /v1/webhooks/dead`.
    func dead(limit: Int) -> [OutboxRow]
    /// `POST /v1/webhooks/dead/{id}/retry`: event `eventID`'s dead rows (one per endpoint that
    /// gave up) go back in the outbox in one transaction, as new rows at the end of their lanes
    /// (the same body, attempts 0, due `now`). How many; nil when the store could not be written.
    func requeueDead(eventID: String, now: UnixMillis) -> Int?
    /// `GET /v1/events`: the event log (every event once, whatever its endpoints), in commit
    /// order, after the event `after` (nil: from the oldest kept), of ride `ride` if given, at
    /// most `limit` bodies as POSTed.
    func events(after: String?, ride: String?, limit: Int) -> EventLogRead
    /// Forgets logged events committed before `instant` (the sender, hourly: 30 days kept).
    func purgeEvents(before instant: UnixMillis)
    /// Rows an earlier `pending` handed out that this node no longer holds (PostgreSQL: their
    /// lease expired and another node took them or finished them, or a retry gave the lease up
    /// until the row is due), each reported once. The sender drops them so only the holder
    /// sends. Called after each `pending`.
    func takeLost() -> Set<Int64>
}

extension WebhookOutbox {
    /// One node per outbox (memory, SQLite): nothing is ever taken by another.
    public func takeLost() -> Set<Int64> { [] }
}

/// What a read of the event log found.
public enum EventLogRead: Sendable, Equatable {
    case events([[UInt8]])
    /// `after` names no event kept (never one, or older than 30 days).
    case unknownCursor
    /// The store could not be read.
    case unavailable
}

/// The whole outbox's state, as opposed to the heads the sender holds.
public struct OutboxStats: Sendable, Equatable {
    public var pending: Int
    public var oldestPendingCreated: UnixMillis?
    public var dead: Int

    public init(pending: Int = 0, oldestPendingCreated: UnixMillis? = nil, dead: Int = 0) {
        self.pending = pending
        self.oldestPendingCreated = oldestPendingCreated
        self.dead = dead
    }
}

/// One attempt as it happened, for the delivery log and tests.
public struct DeliveryAttempt: Sendable, Equatable {
    public let row: OutboxRow
    public let result: DeliveryResult
    public let update: OutboxUpdate
    public let at: UnixMillis
}

/// The I/O around `SenderMachine`: one loop thread that reads the outbox, submits due rows to
/// the outbound HTTP client (at most `workers` in flight), records results and sleeps until the
/// next retry. It shares nothing with the service or store threads except the outbox, so a
/// receiver that hangs costs this sender one of its in-flight slots and nobody else anything.
public final class WebhookSender: @unchecked Sendable {  // `machine`, `results`, `stopping`, `poked`, `stats` only with `wake` locked; `thread` only in start() and stop()
    public struct Settings: Sendable {
        /// The keys of endpoints without their own: every one signs (a roll in progress).
        public var secrets: [[UInt8]]
        /// Each endpoint's own keys, by URL as configured (issue 36, finding 7): with one key for
        /// all, any receiver holds a valid signature for every other endpoint and can replay
        /// events to them; with a key each, a signature is good at one endpoint only.
        public var endpointSecrets: [String: [[UInt8]]] = [:]
        /// The server's endpoints (re-read on SIGHUP): their keys win over the two above.
        public var roster: WebhookRoster?
        public var schedule = RetrySchedule()
        /// Attempts in flight at once.
        public var workers = 4
        public var timeout = HTTPPost.defaultTimeout
        /// The outbound client (its CA file is trusted for https endpoints); nil: the system's
        /// trust store only.
        public var client: HTTPClient?
        /// Rows read from the outbox at a time: the sender's memory bound.
        public var batch = 256
        /// How often the outbox is re-read when nothing wakes the loop (new rows committed by
        /// this or another node); `poke()` wakes it sooner.
        public var pollInterval: Int64 = 1_000
        /// How long the event log (`GET /v1/events`) keeps an event after its commit.
        public var eventRetention: Int64 = 30 * 86_400_000

        public init(secret: [UInt8]) {
            self.init(secrets: [secret])
        }

        public init(secrets: [[UInt8]]) {
            precondition(!secrets.isEmpty && secrets.allSatisfy { !$0.isEmpty }, "a webhook secret is required")
            self.secrets = secrets
        }

        public init(roster: WebhookRoster) {
            secrets = []
            self.roster = roster
        }

        /// The keys `endpoint`'s deliveries are signed with, every one of them.
        public func secrets(for endpoint: String) -> [[UInt8]] {
            roster?.secrets(for: endpoint) ?? endpointSecrets[endpoint] ?? secrets
        }
    }

    private let settings: Settings
    private let outbox: WebhookOutbox
    private let clock: RideClock
    private let onAttempt: @Sendable (DeliveryAttempt) -> Void
    private let wake = NSCondition()
    private var machine: SenderMachine
    private var results: [(OutboxRow, DeliveryResult)] = []
    private var stopping = false
    private var poked = false
    private var stats = OutboxStats()
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    public init(settings: Settings, outbox: WebhookOutbox, clock: RideClock = SystemClock(),
                onAttempt: @escaping @Sendable (DeliveryAttempt) -> Void = { _ in }) {
        self.settings = settings
        self.outbox = outbox
        self.clock = clock
        self.onAttempt = onAttempt
        machine = SenderMachine(schedule: settings.schedule, maxInFlight: settings.workers)
    }

    public func start() {
        let loop = Thread { [self] in run() }
        loop.name = "webhook-sender"
        thread = loop
        loop.start()
    }

    /// New rows were committed: read the outbox now rather than at the next poll.
    public func poke() {
        wake.lock()
        poked = true
        wake.broadcast()
        wake.unlock()
    }

    /// Stops the loop and waits for it. A send in progress ends by its deadline; its result is
    /// not recorded, so the row is sent again after a restart (at least once).
    public func stop() {
        guard thread != nil else { return }
        wake.lock()
        stopping = true
        wake.broadcast()
        wake.unlock()
        finished.wait()
        // The thread's block holds the sender: dropping the thread ends that cycle, so a
        // stopped sender is freed (LeakSanitizer found it held past exit in the probe).
        thread = nil
    }

    public var counts: SenderMachine.Counts {
        wake.lock()
        defer { wake.unlock() }
        return machine.counts
    }

    /// What `/metrics` shows: the outbox's counts as of the sender's last read, and the
    /// attempts since start. Cheap, no I/O: safe to call from a service thread.
    public var metrics: WebhookMetrics {
        wake.lock()
        defer { wake.unlock() }
        return WebhookMetrics(outbox: stats, attempts: machine.counts)
    }

    private func run() {
        defer { finished.signal() }
        var lastRead: UnixMillis?, lastPurge: UnixMillis?
        wake.lock()
        while !stopping {
            let now = clock.now()
            if poked || lastRead.map({ now - $0 >= settings.pollInterval }) ?? true {
                poked = false
                lastRead = now
                wake.unlock()
                let rows = outbox.pending(limit: settings.batch)
                let lost = outbox.takeLost()
                let latest = outbox.stats()
                if lastPurge.map({ now - $0 >= 3_600_000 }) ?? true {
                    lastPurge = now
                    outbox.purgeEvents(before: now - settings.eventRetention)
                }
                wake.lock()
                if !lost.isEmpty { machine.drop(seqs: lost) }
                machine.load(rows)
                stats = latest
            }
            // Results first: a finished head lets its lane's next row go in this same pass.
            let done = results
            results.removeAll()
            var updates = [(OutboxRow, DeliveryResult, OutboxUpdate)]()
            for (row, result) in done {
                if let update = machine.finished(seq: row.seq, result: result, now: clock.now()) {
                    updates.append((row, result, update))
                }
            }
            if !updates.isEmpty {
                // A finished head lets its lane's next row become the head: read it now.
                poked = true
                wake.unlock()
                for (row, result, update) in updates {
                    outbox.record(update)
                    onAttempt(DeliveryAttempt(row: row, result: result, update: update, at: clock.now()))
                }
                wake.lock()
                continue
            }
            let due = machine.due(now: clock.now())
            if !due.isEmpty {
                // Unlocked: a request refused at once completes inside submit, taking `wake`.
                wake.unlock()
                for row in due { attempt(row) }
                wake.lock()
                continue
            }
            guard results.isEmpty, !poked, !stopping else { continue }
            let nextRead = (lastRead ?? clock.now()) + settings.pollInterval
            let until = min(machine.nextWake() ?? nextRead, nextRead)
            let wait = max(1, until - clock.now())
            _ = wake.wait(until: Date(timeIntervalSinceNow: Double(wait) / 1000))
        }
        wake.unlock()
    }

    /// `POST /v1/webhooks/test`: one signed `ping` event (`{"id":"evt_…","type":"ping","created":…}`)
    /// to each endpoint, with its keys and the delivery deadline, neither stored nor retried.
    /// `done` gets every endpoint's result, in `endpoints`' order, on the client's thread once
    /// the last has answered; nothing waits meanwhile.
    public func ping(endpoints: [String], done: @escaping @Sendable ([(endpoint: String, result: DeliveryResult)]) -> Void) {
        guard !endpoints.isEmpty else { return done([]) }
        let now = clock.now(), id = WebhookEvent.newID()
        var w = JSONWriter()
        w.beginObject()
        w.field("id", id)
        w.field("type", "ping")
        w.field("created", now)
        w.endObject()
        let body = w.bytes
        let results = Mutex((left: endpoints.count, got: [DeliveryResult?](repeating: nil, count: endpoints.count)))
        for (i, endpoint) in endpoints.enumerated() {
            let finish: @Sendable (DeliveryResult) -> Void = { result in
                let all = results.withLock { r -> [DeliveryResult]? in
                    r.got[i] = result
                    r.left -= 1
                    return r.left == 0 ? r.got.map { $0 ?? .timeout } : nil
                }
                if let all { done(Array(zip(endpoints, all)).map { (endpoint: $0.0, result: $0.1) }) }
            }
            let url: WebhookURL
            do { url = try WebhookURL(endpoint) } catch {
                finish(.failed(error.message))
                continue
            }
            let signature = WebhookSignature.header(secrets: settings.secrets(for: endpoint), timestamp: now / 1000, body: body)
            let request = HTTPPost.request(to: url, headers: [(WebhookSignature.eventIDHeaderName, id),
                                                              (WebhookSignature.headerName, signature)],
                                           body: body, timeout: settings.timeout)
            (settings.client ?? HTTPPost.system).submit(request) { outcome in finish(HTTPPost.result(url: url, outcome)) }
        }
    }

    /// Submits one attempt (with `wake` not held); its result comes back through `results`.
    private func attempt(_ row: OutboxRow) {
        let url: WebhookURL
        do { url = try WebhookURL(row.endpoint) } catch {
            return finished(row, .failed(error.message))
        }
        let signature = WebhookSignature.header(secrets: settings.secrets(for: row.endpoint), timestamp: clock.now() / 1000, body: row.body)
        let request = HTTPPost.request(to: url, headers: [(WebhookSignature.eventIDHeaderName, row.eventID),
                                                          (WebhookSignature.headerName, signature)],
                                       body: row.body, timeout: settings.timeout)
        (settings.client ?? HTTPPost.system).submit(request) { [self] outcome in
            // On the client's thread: only hand the result over.
            finished(row, HTTPPost.result(url: url, outcome))
        }
    }

    private func finished(_ row: OutboxRow, _ result: DeliveryResult) {
        wake.lock()
        results.append((row, result))
        wake.broadcast()
        wake.unlock()
    }
}

/// An outbox in memory: for `ridepush serve --store memory`, the probe and tests. Delivered rows
/// are removed; dead rows are kept for the dead listing.
public final class MemoryOutbox: WebhookOutbox, OutboxSink, @unchecked Sendable {  // `rows`, `dead`, `nextSeq` only under `lock`
    private let lock = NSLock()
    private var rows: [OutboxRow] = []
    private var dead: [OutboxRow] = []
    private var nextSeq: Int64 = 1
    /// The event log: every event once (the first row's copy), in commit order.
    private var log: [OutboxRow] = []
    private var logged: Set<String> = []

    public init() {}

    /// What a transition's commit does: one row per endpoint, in this call's order.
    @discardableResult
    public func append(_ event: WebhookEvent, endpoints: [String]) -> [Int64] {
        lock.lock()
        defer { lock.unlock() }
        return endpoints.map { endpoint in
            let row = OutboxRow(seq: nextSeq, event: event, endpoint: endpoint)
            nextSeq += 1
            rows.append(row)
            if logged.insert(row.eventID).inserted { log.append(row) }
            return row.seq
        }
    }

    /// What `MemoryStore` calls for a write it keeps: one row per event, in order.
    public func append(_ events: [OutboxEvent]) {
        lock.lock()
        defer { lock.unlock() }
        for event in events {
            let row = OutboxRow(seq: nextSeq, event: event)
            rows.append(row)
            nextSeq += 1
            // Push intents (docs/push.md) are not webhook events: not in the event log.
            if row.endpoint != OutboxEvent.pushEndpoint, logged.insert(row.eventID).inserted { log.append(row) }
        }
    }

    public func pending(limit: Int) -> [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        var seen = Set<[String]>()
        var heads = [OutboxRow]()
        for row in rows where row.endpoint != OutboxEvent.pushEndpoint && seen.insert([row.endpoint, row.rideID]).inserted {
            heads.append(row)
        }
        heads.sort { ($0.nextAttemptAt, $0.seq) < ($1.nextAttemptAt, $1.seq) }
        return Array(heads.prefix(limit))
    }

    public func record(_ update: OutboxUpdate) {
        lock.lock()
        defer { lock.unlock() }
        guard let index = rows.firstIndex(where: { $0.seq == update.seq }) else { return }
        switch update {
        case .delivered:
            rows.remove(at: index)
        case .retry(_, let attempts, let at, let lastResult):
            rows[index].attempts = attempts
            rows[index].nextAttemptAt = at
            rows[index].lastResult = lastResult
        case .dead(_, let attempts, let lastResult):
            var row = rows.remove(at: index)
            row.attempts = attempts
            row.lastResult = lastResult
            dead.append(row)
        }
    }

    /// Push intents after `seq`, oldest first (MemoryPushIntents).
    func pushRows(after seq: Int64, limit: Int) -> [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        return Array(rows.lazy.filter { $0.endpoint == OutboxEvent.pushEndpoint && $0.seq > seq }.prefix(limit))
    }

    func removePushRow(_ seq: Int64) {
        lock.lock()
        defer { lock.unlock() }
        rows.removeAll { $0.seq == seq && $0.endpoint == OutboxEvent.pushEndpoint }
    }

    var pushRowCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return rows.lazy.filter { $0.endpoint == OutboxEvent.pushEndpoint }.count
    }

    public var pendingRows: [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        return rows
    }

    public var deadRows: [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        return dead
    }

    public func stats() -> OutboxStats {
        lock.lock()
        defer { lock.unlock() }
        let mine = rows.lazy.filter { $0.endpoint != OutboxEvent.pushEndpoint }
        return OutboxStats(pending: mine.count, oldestPendingCreated: mine.map(\.created).min(), dead: dead.count)
    }

    public func dead(limit: Int) -> [OutboxRow] {
        lock.lock()
        defer { lock.unlock() }
        return Array(dead.prefix(limit))
    }

    public func requeueDead(eventID: String, now: UnixMillis) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        let back = dead.filter { $0.eventID == eventID }
        dead.removeAll { $0.eventID == eventID }
        for row in back {
            rows.append(OutboxRow(seq: nextSeq, eventID: row.eventID, rideID: row.rideID, endpoint: row.endpoint, created: row.created,
                                  body: row.body, attempts: 0, nextAttemptAt: now, lastResult: nil))
            nextSeq += 1
        }
        return back.count
    }

    public func events(after: String?, ride: String?, limit: Int) -> EventLogRead {
        lock.lock()
        defer { lock.unlock() }
        var start = 0
        if let after {
            guard let i = log.firstIndex(where: { $0.eventID == after }) else { return .unknownCursor }
            start = i + 1
        }
        return .events(log[start...].lazy.filter { ride == nil || $0.rideID == ride }.prefix(max(0, limit)).map(\.body))
    }

    public func purgeEvents(before instant: UnixMillis) {
        lock.lock()
        defer { lock.unlock() }
        for row in log where row.created < instant { logged.remove(row.eventID) }
        log.removeAll { $0.created < instant }
    }

    /// What `MemoryStore.purgeEnded` calls: forgets the given-up rows of purged rides (rows
    /// still owed stay).
    public func purgeDead(rides: Set<String>) -> Int {
        lock.lock()
        defer { lock.unlock() }
        let before = dead.count
        dead.removeAll { rides.contains($0.rideID) }
        log.removeAll { rides.contains($0.rideID) }
        return before - dead.count
    }
}
