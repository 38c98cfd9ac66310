import RideCore

/// Decides which outbox rows to send and what to record about each attempt. No I/O, no clock
/// of its own: the sender loop feeds it rows read from the store, the time and the results, and
/// carries out what it returns. Tested with a hand-advanced clock.
///
/// Order: rows of one ride to one endpoint form a lane, sent strictly one after another in `seq`
/// order — the next waits until the one before is delivered or dead. So a receiver sees a ride's
/// events in commit order, with at-least-once retries of the head only.
public struct SenderMachine: Sendable {
    public let schedule: RetrySchedule
    /// Sends in flight at once, across lanes (the sender's HTTP workers).
    public let maxInFlight: Int

    private struct Lane: Hashable, Sendable {
        let endpoint: String
        let rideID: String
    }

    /// Pending rows known to this node, by seq.
    private var rows: [Int64: OutboxRow] = [:]
    /// Each lane's seqs, ascending.
    private var lanes: [Lane: [Int64]] = [:]
    private var inFlight: Set<Int64> = []

    public private(set) var counts = Counts()

    public struct Counts: Sendable, Equatable {
        public var delivered = 0
        public var retried = 0
        public var dead = 0
        /// Attempts by `DeliveryResult.metricLabel`.
        public var attemptsByResult: [String: Int] = [:]
    }

    public init(schedule: RetrySchedule = RetrySchedule(), maxInFlight: Int = 4) {
        precondition(maxInFlight >= 1)
        self.schedule = schedule
        self.maxInFlight = maxInFlight
    }

    /// Pending rows known here (the ones loaded and not yet finished).
    public var pendingCount: Int { rows.count }
    public var inFlightCount: Int { inFlight.count }
    /// The oldest pending row's creation time, for `/metrics` ("oldest pending age").
    public var oldestPendingCreated: UnixMillis? { rows.values.lazy.map(\.created).min() }

    /// Adds rows read from the outbox. Rows already known are skipped (the loop re-reads the
    /// table and gets them again), so loading is idempotent. The loop bounds memory by how many
    /// rows it reads at a time, not this.
    public mutating func load(_ batch: [OutboxRow]) {
        for row in batch where rows[row.seq] == nil {
            rows[row.seq] = row
            let lane = Lane(endpoint: row.endpoint, rideID: row.rideID)
            var seqs = lanes[lane, default: []]
            // Rows arrive in seq order almost always; insert in place otherwise.
            if let last = seqs.last, last > row.seq {
                seqs.insert(row.seq, at: seqs.firstIndex { $0 > row.seq }!)
            } else {
                seqs.append(row.seq)
            }
            lanes[lane] = seqs
        }
    }

    /// The rows to send now, oldest first, marked in flight: each lane's head if it is due and
    /// not already in flight, up to `maxInFlight` in all.
    public mutating func due(now: UnixMillis) -> [OutboxRow] {
        guard inFlight.count < maxInFlight else { return [] }
        var ready = [OutboxRow]()
        for seqs in lanes.values {
            guard let head = seqs.first, !inFlight.contains(head), let row = rows[head], row.nextAttemptAt <= now else { continue }
            ready.append(row)
        }
        ready.sort { $0.seq < $1.seq }
        let taken = ready.prefix(maxInFlight - inFlight.count)
        for row in taken { inFlight.insert(row.seq) }
        return Array(taken)
    }

    /// When `due` next has something, if nothing finishes before: the earliest head's
    /// `nextAttemptAt` among lanes not in flight; nil when none is waiting (or all slots are
    /// busy, when only a `finished` can free one).
    public func nextWake() -> UnixMillis? {
        guard inFlight.count < maxInFlight else { return nil }
        var earliest: UnixMillis?
        for seqs in lanes.values {
            guard let head = seqs.first, !inFlight.contains(head), let row = rows[head] else { continue }
            earliest = min(earliest ?? row.nextAttemptAt, row.nextAttemptAt)
        }
        return earliest
    }

    /// An attempt of row `seq` (returned by `due`) ended with `result` at `now`: what to record.
    /// nil for a seq not in flight (a result arriving twice is ignored, not double-counted).
    public mutating func finished(seq: Int64, result: DeliveryResult, now: UnixMillis) -> OutboxUpdate? {
        guard inFlight.remove(seq) != nil, var row = rows[seq] else { return nil }
        row.attempts += 1
        counts.attemptsByResult[result.metricLabel, default: 0] += 1
        if result.delivered {
            remove(row)
            counts.delivered += 1
            return .delivered(seq: seq, attempts: row.attempts)
        }
        switch schedule.next(created: row.created, attempt: row.attempts, failedAt: now) {
        case .retry(let at):
            row.nextAttemptAt = at
            row.lastResult = result.summary
            rows[seq] = row
            counts.retried += 1
            return .retry(seq: seq, attempts: row.attempts, at: at, lastResult: result.summary)
        case .dead:
            remove(row)
            counts.dead += 1
            return .dead(seq: seq, attempts: row.attempts, lastResult: result.summary)
        }
    }

    /// Forgets rows this node no longer holds (PostgreSQL: their lease was lost to another node),
    /// unless in flight — a send already started finishes and its update is refused by the store.
    public mutating func drop(seqs: Set<Int64>) {
        for seq in seqs where !inFlight.contains(seq) {
            if let row = rows[seq] { remove(row) }
        }
    }

    private mutating func remove(_ row: OutboxRow) {
        rows[row.seq] = nil
        let lane = Lane(endpoint: row.endpoint, rideID: row.rideID)
        guard var seqs = lanes[lane] else { return }
        seqs.removeAll { $0 == row.seq }
        lanes[lane] = seqs.isEmpty ? nil : seqs
    }
}
