import RideCore
import RideStore

// Push targets on PostgreSQL (schema 6), shared by every node: each call is one transaction,
// committed (so durable and visible to the other nodes) when it returns.
extension PostgresStore: PushTargetStore {
    public func registerPush(_ t: StoredPushTarget) throws(StoreError) {
        let (slot, key) = Self.pushSlot(ride: t.ride, rider: t.rider)
        let limit = t.ride == nil ? PushTargetLimits.pushToStartPerRider : PushTargetLimits.perRide
        try transaction { (c: PostgresConnection) throws(PostgresError) in
            // One registration per slot at a time across nodes, so the trim below sees every row.
            try c.query("SELECT pg_advisory_xact_lock(hashtext($1::text))", [.text((t.ride == nil ? "push-rider:" : "push-ride:") + key)])
            try c.query("DELETE FROM ridepush.push_targets WHERE \(slot) AND token = $2::text", [.text(key), .text(t.token)])
            try c.query("""
                INSERT INTO ridepush.push_targets (ride, rider, platform, kind, token, at)
                VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint)
                """, [.text(t.ride), .text(t.rider), .text(t.platform), .text(t.kind), .text(t.token), .int(t.at)])
            try c.query("""
                DELETE FROM ridepush.push_targets WHERE n IN
                    (SELECT n FROM ridepush.push_targets WHERE \(slot) ORDER BY n DESC OFFSET $2::bigint)
                """, [.text(key), .int(Int64(limit))])
        }
    }

    @discardableResult
    public func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool {
        let (slot, key) = Self.pushSlot(ride: ride, rider: rider)
        return try transaction { (c: PostgresConnection) throws(PostgresError) -> Bool in
            try c.query("DELETE FROM ridepush.push_targets WHERE \(slot) AND token = $2::text RETURNING 1", [.text(key), .text(token)]).count > 0
        }
    }

    public func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget] {
        try pushRows("WHERE ride = $1::text ORDER BY n", ride)
    }

    public func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget] {
        try pushRows("WHERE ride IS NULL AND rider = $1::text ORDER BY n", rider)
    }

    private func pushRows(_ whereClause: String, _ key: String) throws(StoreError) -> [StoredPushTarget] {
        try read { (c: PostgresConnection) throws(StoreError) in
            try PostgresJournal.run(label) { () throws(PostgresError) in
                let r = try c.query("SELECT platform, kind, ride, rider, token, at FROM ridepush.push_targets \(whereClause)", [.text(key)])
                return (0..<r.count).map { i in
                    StoredPushTarget(platform: r.text(i, 0), kind: r.text(i, 1), ride: r.optionalText(i, 2), rider: r.text(i, 3),
                                     token: r.text(i, 4), at: r.int(i, 5) ?? 0)
                }
            }
        }
    }

    /// The condition naming one slot ($1: the ride, or the rider for push-to-start tokens).
    private static func pushSlot(ride: String?, rider: String) -> (sql: String, key: String) {
        if let ride { return ("ride = $1::text", ride) }
        return ("ride IS NULL AND rider = $1::text", rider)
    }
}
