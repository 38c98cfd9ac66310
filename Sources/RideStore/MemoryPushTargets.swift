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

    /// The push sender's side (any thread): the same list, through its lock.
    public var sharedPushTargets: MemoryPushTargetList { MemoryPushTargetList(list: pushTargetList) }

    func pushTargetsNow(ride: String) -> [StoredPushTarget] { sharedPushTargets.targets(ride: ride) }

    func pushToStartTokensNow(rider: String) -> [StoredPushTarget] { sharedPushTargets.pushToStart(rider: rider) }

    @discardableResult
    func removePushTarget(ride: String?, rider: String, token: String) -> Bool {
        sharedPushTargets.remove(ride: ride, rider: rider, token: token)
    }

    /// A ride's targets share a slot whoever registered them; push-to-start tokens are per rider.
    static func sameSlot(_ t: StoredPushTarget, ride: String?, rider: String) -> Bool {
        if let ride { return t.ride == ride }
        return t.ride == nil && t.rider == rider
    }
}

/// A memory store's push targets as the push sender reaches them from its own thread: the
/// store's list, each call one turn of its lock.
public struct MemoryPushTargetList: Sendable {
    let list: Locked<[StoredPushTarget]>

    public func targets(ride: String) -> [StoredPushTarget] { list.withLock { $0.filter { $0.ride == ride } } }

    public func pushToStart(rider: String) -> [StoredPushTarget] {
        list.withLock { $0.filter { $0.ride == nil && $0.rider == rider } }
    }

    public var count: Int { list.withLock { $0.count } }

    @discardableResult
    public func remove(ride: String?, rider: String, token: String) -> Bool {
        list.withLock { l in
            let before = l.count
            l.removeAll { MemoryStore.sameSlot($0, ride: ride, rider: rider) && $0.token == token }
            return l.count != before
        }
    }
}
