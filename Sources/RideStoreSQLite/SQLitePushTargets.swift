import RideCore
import RideStore

// Push targets on SQLite (schema 10). Each call is its own transaction on the writer's
// connection (the store worker's thread), synced before it returns: the acknowledgement the
// device gets promises a restart keeps the target, as a reply promises a transition.
extension SQLiteStore: PushTargetStore {
    public func registerPush(_ t: StoredPushTarget) throws(StoreError) {
        let (slot, key) = Self.slot(ride: t.ride, rider: t.rider)
        let limit = t.ride == nil ? PushTargetLimits.pushToStartPerRider : PushTargetLimits.perRide
        try transaction { () throws(StoreError) in
            try db.run("DELETE FROM push_targets WHERE \(slot) AND token = ?", [.text(key), .text(t.token)])
            try db.run("INSERT INTO push_targets (ride, rider, platform, kind, token, at) VALUES (?, ?, ?, ?, ?, ?)",
                       [.text(t.ride), .text(t.rider), .text(t.platform), .text(t.kind), .text(t.token), .int(t.at)])
            // Newest first; everything past the limit is older and goes.
            try db.run("DELETE FROM push_targets WHERE n IN (SELECT n FROM push_targets WHERE \(slot) ORDER BY n DESC LIMIT -1 OFFSET ?)",
                       [.text(key), .int(Int64(limit))])
        }
        try logSync()
    }

    @discardableResult
    public func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool {
        let (slot, key) = Self.slot(ride: ride, rider: rider)
        let found = try transaction { () throws(StoreError) -> Bool in
            var found = false
            try db.query("SELECT 1 FROM push_targets WHERE \(slot) AND token = ?", [.text(key), .text(token)]) {
                (_: SQLRow) throws(StoreError) in found = true
            }
            if found { try db.run("DELETE FROM push_targets WHERE \(slot) AND token = ?", [.text(key), .text(token)]) }
            return found
        }
        if found { try logSync() }
        return found
    }

    public func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget] {
        try pushRows("WHERE ride = ? ORDER BY n", ride)
    }

    public func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget] {
        try pushRows("WHERE ride IS NULL AND rider = ? ORDER BY n", rider)
    }

    private func pushRows(_ whereClause: String, _ key: String) throws(StoreError) -> [StoredPushTarget] {
        var out: [StoredPushTarget] = []
        try db.query("SELECT platform, kind, ride, rider, token, at FROM push_targets \(whereClause)", [.text(key)]) {
            (r: SQLRow) throws(StoreError) in
            out.append(StoredPushTarget(platform: r.text(0), kind: r.text(1), ride: r.optionalText(2), rider: r.text(3),
                                        token: r.text(4), at: r.int(5)))
        }
        return out
    }

    /// The condition naming one slot (a ride's targets, or a rider's push-to-start tokens) and
    /// its one bound value; the partial indexes of schema 10 answer both.
    private static func slot(ride: String?, rider: String) -> (sql: String, key: String) {
        if let ride { return ("ride = ?", ride) }
        return ("ride IS NULL AND rider = ?", rider)
    }
}
