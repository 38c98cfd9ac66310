import RideCore

// The memory store's push targets: one list in registration order, so "oldest" is its order.
// Few per ride and per rider, so a scan of the list is cheaper than an index worth keeping.
// Every change is one turn of the list's lock, so the push sender's deletes (from its thread)
// and the store worker's registrations never undo each other.
extension MemoryStore: PushTargetStore {
    public func registerPush(_ target: StoredPushTarget) throws(StoreError) {
        try checkOpen()
        pushTargetList.withLock { list in
            list.removeAll { Self.sameSlot($0, ride: target.ride, rider: target.rider) && $0.token == target.token }
            list.append(target)
            let limit = target.ride == nil ? PushTargetLimits.pushToStartPerRider : PushTargetLimits.perRide
            let mine = list.indices.filter { Self.sameSlot(list[$0], ride: target.ride, rider: target.rider) }
            if mine.count > limit {
                let drop = Set(mine.prefix(mine.count - limit))
                list = list.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
            }
        }
    }

    @discardableResult
    public func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool {
        try checkOpen()
        return removePushTarget(ride: ride, rider: rider, token: token)
    }

    public func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget] {
        try checkOpen()
        return pushTargetsNow(ride: ride)
    }

    public func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget] {
        try checkOpen()
        return pushToStartTokensNow(rider: rider)
    }

    // The push sender's side, callable from any thread.

    public func pushTargetsNow(ride: String) -> [StoredPushTarget] {
        pushTargetList.withLock { $0.filter { $0.ride == ride } }
    }

    public func pushToStartTokensNow(rider: String) -> [StoredPushTarget] {
        pushTargetList.withLock { $0.filter { $0.ride == nil && $0.rider == rider } }
    }

    public var pushTargetCount: Int { pushTargetList.withLock { $0.count } }

    @discardableResult
    public func removePushTarget(ride: String?, rider: String, token: String) -> Bool {
        pushTargetList.withLock { list in
            let before = list.count
            list.removeAll { Self.sameSlot($0, ride: ride, rider: rider) && $0.token == token }
            return list.count != before
        }
    }

    /// A ride's targets share a slot whoever registered them; push-to-start tokens are per rider.
    private static func sameSlot(_ t: StoredPushTarget, ride: String?, rider: String) -> Bool {
        if let ride { return t.ride == ride }
        return t.ride == nil && t.rider == rider
    }
}
