import RideCore

/// One-write transactions on top of `commit`, for tools and tests that record one thing at a
/// time. The server never calls these: it batches through `StoreWorker`. `append` reads the
/// ride first (to number the entry and check it applies), so it costs O(journal).
extension RideStore {
    /// Records a new ride (row + start) and `reply`; throws `.conflict` if the id or the
    /// reply key exists.
    @discardableResult
    public func create(id: String, planID: String, owner: String?, limit: Int64?, startedAt: UnixMillis,
                       reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        let new = NewRide(id: id, planID: planID, owner: owner, limit: limit, startedAt: startedAt)
        try single(.create(new, reply: reply))
        // A lone start always replays.
        return StoredRide(id: id, planID: planID, owner: owner, limit: limit, journal: [.start(at: startedAt)])!
    }

    /// Appends `transition` as the ride's next entry; throws `.notFound` for an unknown ride,
    /// `.conflict` if it does not apply to the ride's state or the reply key exists.
    @discardableResult
    public func append(ride id: String, _ transition: RideTransition, reply: ReplyRecord?) throws(StoreError) -> StoredRide {
        guard let current = try ride(id) else { throw StoreRules.noRide(id) }
        if case .start = transition {
            throw StoreRules.startAppended(id)
        }
        if case .failure(let e) = current.ride.applying(transition) {
            throw StoreRules.notAllowed(id, e)
        }
        try single(.append(JournalEntry(ride: id, seq: current.seq + 1, transition: transition), reply: reply))
        return StoredRide(id: id, planID: current.planID, owner: current.owner, limit: current.limit,
                          journal: current.journal + [transition])!
    }

    private func single(_ write: StoreWrite) throws(StoreError) {
        let results = try commit([write])
        if case .refused(let e)? = results.first { throw e }
    }
}
