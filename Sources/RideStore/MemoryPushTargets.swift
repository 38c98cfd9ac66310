import RideCore

// The memory store's push targets: one list in registration order, so "oldest" is its order.
// Few per ride and per rider, so a scan of the list is cheaper than an index worth keeping.
extension MemoryStore: PushTargetStore {
    public func registerPush(_ target: StoredPushTarget) throws(StoreError) {
        try checkOpen()
        pushTargetList.removeAll { Self.sameSlot($0, ride: target.ride, rider: target.rider) && $0.token == target.token }
        pushTargetList.append(target)
        let limit = target.ride == nil ? PushTargetLimits.pushToStartPerRider : PushTargetLimits.perRide
        let mine = pushTargetList.indices.filter { Self.sameSlot(pushTargetList[$0], ride: target.ride, rider: target.rider) }
        if mine.count > limit {
            let drop = Set(mine.prefix(mine.count - limit))
            pushTargetList = pushTargetList.enumerated().filter { !drop.contains($0.offset) }.map(\.element)
        }
    }

    @discardableResult
    public func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool {
        try checkOpen()
        let before = pushTargetList.count
        pushTargetList.removeAll { Self.sameSlot($0, ride: ride, rider: rider) && $0.token == token }
        return pushTargetList.count != before
    }

    public func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget] {
        try checkOpen()
        return pushTargetList.filter { $0.ride == ride }
    }

    public func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget] {
        try checkOpen()
        return pushTargetList.filter { $0.ride == nil && $0.rider == rider }
    }

    /// A ride's targets share a slot whoever registered them; push-to-start tokens are per rider.
    private static func sameSlot(_ t: StoredPushTarget, ride: String?, rider: String) -> Bool {
        if let ride { return t.ride == ride }
        return t.ride == nil && t.rider == rider
    }
}
