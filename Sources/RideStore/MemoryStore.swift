import RideCore

/// The throw-away store behind `--store memory`: same rules as `SQLiteStore` (same refusals,
/// per-write results, all-or-nothing batches), nothing survives the process.
public final class MemoryStore: RideStore {
    /// A ride as kept here, 64 bytes: its journal's start is `startedAt` (entry 1 of every
    /// ride), later entries are linked in `entries`, and the plan id is interned. The memory
    /// store is what the benchmarks run on, so what it holds per ride is counted per subscriber.
    private struct Row {
        let id: String
        let owner: String?
        let startedAt: UnixMillis
        let limitValue: Int64
        /// Entries after the start, first and last in `entries` (-1: none).
        var first: Int32 = -1
        var last: Int32 = -1
        /// Journal entries, the start included.
        var count: Int32 = 1
        let plan: UInt16
        var state: RideState = .riding
        let hasLimit: Bool
    }
    private struct Entry {
        let transition: RideTransition
        var next: Int32 = -1
    }
    private struct Reply {
        let request: String
        let at: UnixMillis
        let bytes: ReplyArena.Handle
    }
    private var rows = PagedArray<Row>()
    private var rowOf: [String: Int32] = [:]
    private var entries = PagedArray<Entry>()
    private var planIDs: [String] = []
    private var planOf: [String: UInt16] = [:]
    private var replies = PagedArray<Reply>()
    private var replyOf: [ReplyKey: Int32] = [:]
    private var replyBytes = ReplyArena()
    private var closed = false
    /// Each ride's last trace checkpoint (only rides that reported positions have one).
    private var traces: [String: TraceCheckpoint] = [:]
    /// Receives the outbox events of every write kept (nil: webhooks off, events dropped).
    private let outbox: OutboxSink?
    /// Push targets in the order registered (MemoryPushTargets.swift), behind a lock: the push
    /// sender reads and deletes them from its own thread, as it does through a connection of
    /// its own with SQLite and PostgreSQL.
    let pushTargetList = Locked<[StoredPushTarget]>([])

    /// Where the outbox events go (the push sender reads its intents there).
    public var outboxSink: OutboxSink? { outbox }

    public init(outbox: OutboxSink? = nil) {
        self.outbox = outbox
    }

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
                rowOf[new.id] = rows.append(Row(id: new.id, owner: new.owner, startedAt: new.startedAt,
                                                limitValue: new.limit ?? 0, plan: intern(new.planID),
                                                hasLimit: new.limit != nil))
                if let reply { record(reply) }
            case .append(let entry, let reply):
                let r = rowOf[entry.ride]!
                let e = entries.append(Entry(transition: entry.transition))
                if rows[r].last >= 0 { entries[rows[r].last].next = e } else { rows[r].first = e }
                rows[r].last = e
                rows[r].count += 1
                rows[r].state = StoreRules.state(after: entry.transition)
                if let reply { record(reply) }
            case .trace(let t):
                traces[t.ride] = t
            }
            if let outbox, !write.outbox.isEmpty { outbox.append(write.outbox) }
            results.append(.written)
        }
        return results
    }

    /// Why the store refuses `write` now, checked in full before anything of it is applied.
    private func refusal(_ write: StoreWrite) -> StoreError? {
        switch write {
        case .create(let new, let reply):
            if rowOf[new.id] != nil { return StoreRules.rideExists(new.id) }
            return taken(reply)
        case .append(let entry, let reply):
            guard let r = rowOf[entry.ride] else { return StoreRules.noRide(entry.ride) }
            if let e = StoreRules.appendRefusal(entry, lastSeq: Int64(rows[r].count), state: rows[r].state) { return e }
            return taken(reply)
        case .trace(let t):
            return rowOf[t.ride] == nil ? StoreRules.noRide(t.ride) : nil
        }
    }

    public func trace(_ ride: String) throws(StoreError) -> TraceCheckpoint? {
        try checkOpen()
        return traces[ride]
    }

    public func openRides() throws(StoreError) -> [StoredRide] {
        try checkOpen()
        return allRows().filter { $0.state != .ended }.map(stored).sorted { $0.id < $1.id }
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        try checkOpen()
        return rowOf[id].map { stored(rows[$0]) }
    }

    public func rides(_ page: RidePage, rider: String?, limit: Int) throws(StoreError) -> [StoredRide] {
        try checkOpen()
        let all = allRows().map(stored).filter { rider == nil || $0.ride.owner == rider }
        switch page {
        case .byStart(let after):
            let keyed = all.map { ($0.key(in: page)!, $0) }.filter { after == nil || after! < $0.0 }
            return keyed.sorted { $0.0 < $1.0 }.prefix(max(0, limit)).map(\.1)
        case .ended(let before):
            let keyed = all.compactMap { r in r.key(in: page).map { ($0, r) } }.filter { before == nil || $0.0 < before! }
            return keyed.sorted { $1.0 < $0.0 }.prefix(max(0, limit)).map(\.1)
        }
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> StoredReply? {
        try checkOpen()
        return replyOf[key].map { let r = replies[$0]; return StoredReply(request: r.request, bytes: replyBytes.bytes(r.bytes)) }
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try checkOpen()
        var kept: [(ReplyKey, Reply)] = []
        for (key, i) in replyOf where replies[i].at >= instant { kept.append((key, replies[i])) }
        guard kept.count < replyOf.count else { return }
        keepOnly(kept)
    }

    public func purgeEnded(before instant: UnixMillis, limit: Int) throws(StoreError) -> PurgeCount {
        try checkOpen()
        var count = PurgeCount()
        // The oldest ends first, as the other stores take them.
        var ended: [(at: UnixMillis, id: String, row: Int32)] = []
        for r in 0..<Int32(rows.count) where rows[r].state == .ended {
            // An ended ride's last entry is its end.
            if case .end(let at, _, _) = entries[rows[r].last].transition, at < instant { ended.append((at, rows[r].id, r)) }
        }
        ended.sort { ($0.at, $0.id) < ($1.at, $1.id) }
        let gone = ended.prefix(max(0, limit))
        if !gone.isEmpty {
            let goneRows = Set(gone.map(\.row)), goneIDs = Set(gone.map(\.id))
            // Kept compactly (appended, never removed one by one), so the survivors are written again.
            var keptRows = PagedArray<Row>(), keptEntries = PagedArray<Entry>()
            rowOf = [:]
            for r in 0..<Int32(rows.count) {
                var row = rows[r]
                if goneRows.contains(r) {
                    count.journal += Int(row.count)
                    continue
                }
                var e = row.first, previous: Int32 = -1
                row.first = -1
                while e >= 0 {
                    let copy = keptEntries.append(Entry(transition: entries[e].transition))
                    if previous >= 0 { keptEntries[previous].next = copy } else { row.first = copy }
                    previous = copy
                    e = entries[e].next
                }
                row.last = previous
                rowOf[row.id] = keptRows.append(row)
            }
            rows = keptRows
            entries = keptEntries
            count.rides = gone.count
            for id in goneIDs where traces.removeValue(forKey: id) != nil { count.traces += 1 }
            pushTargetList.withLock { list in list.removeAll { $0.ride.map { goneIDs.contains($0) } ?? false } }
            count.outbox = outbox?.purgeDead(rides: goneIDs) ?? 0
        }
        // Replies are not linked to their ride (a start without an id, a server API request):
        // every one recorded before the cutoff goes, oldest first; the purged rides' among them.
        var old: [Int32] = []
        for (_, i) in replyOf where replies[i].at < instant { old.append(i) }
        if !old.isEmpty {
            let dropped = Set(old.sorted().prefix(max(0, limit)))
            var kept: [(ReplyKey, Reply)] = []
            for (key, i) in replyOf where !dropped.contains(i) { kept.append((key, replies[i])) }
            keepOnly(kept)
            count.replies = dropped.count
        }
        return count
    }

    /// Keeps only `kept` of the replies. Kept compactly (appended, never removed one by one),
    /// so the survivors are recorded again.
    private func keepOnly(_ kept: [(ReplyKey, Reply)]) {
        var kept = kept
        kept.sort { $0.1.bytes.page != $1.1.bytes.page ? $0.1.bytes.page < $1.1.bytes.page : $0.1.bytes.offset < $1.1.bytes.offset }
        let old = replyBytes
        replies = PagedArray()
        replyOf = [:]
        replyBytes = ReplyArena()
        for (key, r) in kept {
            replyOf[key] = replies.append(Reply(request: r.request, at: r.at, bytes: replyBytes.add(old.bytes(r.bytes))))
        }
    }

    public func close() { closed = true }

    private func record(_ reply: ReplyRecord) {
        replyOf[reply.key] = replies.append(Reply(request: reply.request, at: reply.at, bytes: replyBytes.add(reply.bytes)))
    }

    private func intern(_ plan: String) -> UInt16 {
        if let i = planOf[plan] { return i }
        // Plans come from the server's configuration: a few, never thousands.
        precondition(planIDs.count < Int(UInt16.max), "memory store: more than 65,535 plan ids")
        planIDs.append(plan)
        planOf[plan] = UInt16(planIDs.count - 1)
        return UInt16(planIDs.count - 1)
    }

    private func allRows() -> [Row] { (0..<Int32(rows.count)).map { rows[$0] } }

    private func stored(_ row: Row) -> StoredRide {
        var journal: [RideTransition] = [.start(at: row.startedAt)]
        journal.reserveCapacity(Int(row.count))
        var e = row.first
        while e >= 0 {
            journal.append(entries[e].transition)
            e = entries[e].next
        }
        // Every entry was checked against the ride's state before it was kept.
        guard let s = StoredRide(id: row.id, planID: planIDs[Int(row.plan)], owner: row.owner,
                                 limit: row.hasLimit ? row.limitValue : nil, journal: journal) else {
            fatalError("memory store: the journal of ride \(row.id) does not replay")
        }
        return s
    }

    func checkOpen() throws(StoreError) {
        if closed { throw StoreError(.unavailable, "memory store is closed") }
    }

    private func taken(_ reply: ReplyRecord?) -> StoreError? {
        if let reply, replyOf[reply.key] != nil {
            return StoreRules.replyTaken(reply)
        }
        return nil
    }
}

extension MemoryStore: StoreTraits {
    /// Its reply lookup is a dictionary read, as cheap as the server's cache.
    public var keepsRecentReplies: Bool { true }
}
