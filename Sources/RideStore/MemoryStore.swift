import RideCore

/// The throw-away store behind `--store memory`: same rules as `SQLiteStore` (same conflicts,
/// same validation, all-or-nothing calls), nothing survives the process.
public final class MemoryStore: RideStore {
    private var rides: [String: StoredRide] = [:]
    private var replies: [ReplyKey: ReplyRecord] = [:]
    private var closed = false

    public init() {}

    @discardableResult
    public func create(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis,
                       reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        try checkOpen()
        if rides[id] != nil { throw StoreError(.conflict, "ride \(id) already exists") }
        try checkFree(reply)
        // A lone start always replays.
        let stored = StoredRide(id: id, planID: planID, owner: owner, limit: limit, journal: [.start(at: startedAt)])!
        rides[id] = stored
        if let reply { replies[reply.key] = reply }
        return stored
    }

    @discardableResult
    public func append(ride id: String, _ transition: RideTransition, reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        try checkOpen()
        guard let current = rides[id] else { throw StoreError(.notFound, "no ride \(id)") }
        let next = try current.appending(transition).get()
        try checkFree(reply)
        rides[id] = next
        if let reply { replies[reply.key] = reply }
        return next
    }

    public func openRides() throws(StoreError) -> [StoredRide] {
        try checkOpen()
        return rides.values.filter { $0.ride.state != .ended }.sorted { $0.id < $1.id }
    }

    public func ride(_ id: String) throws(StoreError) -> StoredRide? {
        try checkOpen()
        return rides[id]
    }

    public func rides(_ page: RidePage, limit: Int) throws(StoreError) -> [StoredRide] {
        try checkOpen()
        switch page {
        case .byStart(let after):
            let keyed = rides.values.map { ($0.key(in: page)!, $0) }.filter { after == nil || after! < $0.0 }
            return keyed.sorted { $0.0 < $1.0 }.prefix(max(0, limit)).map(\.1)
        case .ended(let before):
            let keyed = rides.values.compactMap { r in r.key(in: page).map { ($0, r) } }.filter { before == nil || $0.0 < before! }
            return keyed.sorted { $1.0 < $0.0 }.prefix(max(0, limit)).map(\.1)
        }
    }

    public func reply(for key: ReplyKey) throws(StoreError) -> [UInt8]? {
        try checkOpen()
        return replies[key]?.bytes
    }

    public func prune(repliesBefore instant: UnixMillis) throws(StoreError) {
        try checkOpen()
        replies = replies.filter { $0.value.at >= instant }
    }

    public func close() { closed = true }

    private func checkOpen() throws(StoreError) {
        if closed { throw StoreError(.unavailable, "memory store is closed") }
    }

    private func checkFree(_ reply: ReplyRecord?) throws(StoreError) {
        if let reply, replies[reply.key] != nil {
            throw StoreError(.conflict, "a reply is already recorded for \(reply.key)")
        }
    }
}
