import RideCore

/// The throw-away store behind `--store memory`: same rules as `SQLiteStore` (same refusals,
/// per-write results, all-or-nothing batches), nothing survives the process.
public final class MemoryStore: RideStore {
    private struct Row {
        let new: NewRide
        var journal: [RideTransition]
        var state: RideState
    }
    private var rides: [String: Row] = [:]
    private var replies: [ReplyKey: ReplyRecord] = [:]
    private var closed = false

    public init() {}

    public func commit(_ batch: [StoreWrite]) throws(StoreError) -> [WriteResult] {
        try checkOpen()
        var results: [WriteResult] = []
        results.reserveCapacity(batch.count)
        for write in batch {
            if let e = refusal(write) {
                results.append(.refused(e))
                continue
            }
            switch write {
            case .create(let new, let reply):
                rides[new.id] = Row(new: new, journal: [.start(at: new.startedAt)], state: .riding)
                if let reply { replies[reply.key] = reply }
            case .append(let entry, let reply):
                rides[entry.ride]!.journal.append(entry.transition)
                rides[entry.ride]!.state = StoreRules.state(after: entry.transition)
                if let reply { replies[reply.key] = reply }
            }
            results.append(.written)
        }
        return results
    }

    /// Why the store refuses `write` now, checked in full before anything of it is applied.
    private func refusal(_ write: StoreWrite) -> StoreError? {
        switch write {
        case .create(let new, let reply):
            if rides[new.id] != nil { return StoreError(.conflict, "ride \(new.id) already exists") }
            return taken(reply)
        case .append(let entry, let reply):
            guard let row = rides[entry.ride] else { return StoreError(.notFound, "no ride \(entry.ride)") }
            if let e = StoreRules.appendRefusal(entry, lastSeq: Int64(row.journal.count), state: row.state) { return e }
            return taken(reply)
        }
    }

    public func openRides() throws(StoreError) -> [StoredRide] {
        try checkOpen()
        return rides.values.filter { $0.state != .ended }.map(stored).sorted { $0.id < $1.id }
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        try checkOpen()
        return rides[id].map(stored)
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? {
        try checkOpen()
        return replies[key].map { StoredReply(request: $0.request, bytes: $0.bytes) }
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try checkOpen()
        replies = replies.filter { $0.value.at >= instant }
    }

    public func close() { closed = true }

    private func stored(_ row: Row) -> StoredRide {
        // Every entry was checked against the ride's state before it was kept.
        guard let s = StoredRide(id: row.new.id, planID: row.new.planID, owner: row.new.owner,
                                 limit: row.new.limit, journal: row.journal) else {
            fatalError("memory store: the journal of ride \(row.new.id) does not replay")
        }
        return s
    }

    private func checkOpen() throws(StoreError) {
        if closed { throw StoreError(.unavailable, "memory store is closed") }
    }

    private func taken(_ reply: ReplyRecord?) -> StoreError? {
        if let reply, replies[reply.key] != nil {
            return StoreError(.conflict, "a reply is already recorded for \(reply.key)")
        }
        return nil
    }
}

/// Refusals every store applies the same way, so they accept and refuse the same writes.
/// Checked against two fields a store keeps per ride (its last entry's number and state), so
/// an append costs the same however long the journal is.
public enum StoreRules {
    /// Why an append is refused given the ride's last recorded entry and state, or nil.
    public static func appendRefusal(_ entry: JournalEntry, lastSeq: Int64, state: RideState) -> StoreError? {
        let command: RideCommand
        switch entry.transition {
        case .start:
            return StoreError(.conflict, "ride \(entry.ride) has already started; a start cannot be appended")
        case .pause: command = .pause
        case .resume: command = .resume
        case .end: command = .end
        }
        let allowed: Bool
        switch (state, command) {
        case (.riding, .pause), (.paused, .resume), (.riding, .end), (.paused, .end): allowed = true
        default: allowed = false
        }
        if !allowed { return StoreError(.conflict, "ride \(entry.ride): \(RideError(state: state, command: command))") }
        if entry.seq != lastSeq + 1 {
            return StoreError(.conflict, "ride \(entry.ride): entry \(entry.seq) is not the next one (the last is \(lastSeq))")
        }
        return nil
    }

    /// The ride's state once `transition` applied.
    public static func state(after transition: RideTransition) -> RideState {
        switch transition {
        case .start, .resume: return .riding
        case .pause: return .paused
        case .end: return .ended
        }
    }
}
