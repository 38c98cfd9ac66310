import CLibWebSockets
import RideAuth
import RideCore
import RideProtocol
import RideService
import RideStore

/// `GET /rides?state=riding|paused|ended&rider=R&limit=N&cursor=C`: every ride (or one
/// rider's), a page at a time, for operators; the query is judged by RidesQuery. Keyset pages
/// (RidePage): open rides by (started_at, id) from memory, ended rides newest first and all
/// rides by start from the store, so rides starting and ending while someone pages neither
/// repeat nor shift the pages after.
extension Shard {
    /// The router has checked the ops token.
    func ridesListing(_ wsi: OpaquePointer) -> Int32 {
        let query: RidesQuery
        switch RidesQuery.parse(queryArguments(wsi)) {
        case .success(let q): query = q
        case .failure(let refusal): return respond(refusal.answer, wsi)
        }
        let at = service.clock.now(), limit = query.limit
        switch query.state {
        case .riding?, .paused?:
            // Copied under the lock, sorted outside it.
            let open = service.registry.view.withLock { v in
                var rows: [(key: RideKey, ride: Ride, plan: FarePlan, watchers: Int)] = []
                for l in v.live {
                    let k = RideKey(at: l.ride.startedAt, id: l.id)
                    guard query.includes(open: l.ride, key: k) else { continue }
                    rows.append((k, l.ride, l.plan, l.subscriberCount.load(ordering: .relaxed)))
                }
                return rows
            }
            let p = Shard.cut(open.sorted { $0.key < $1.key }, limit)
            return respond(wsi, 200, json: OpsMessages.page(p.rows, at: at, next: p.next.map(OpsMessages.cursor)))
        default:
            // Ended rides (and every ride) come from the store, on the store worker's thread.
            let order = query.storePage, rider = query.rider
            return awaitStore(wsi, "/rides") { store, registry in
                let stored: [StoredRide]
                do throws(StoreError) { stored = try store.rides(order, rider: rider, limit: limit + 1) } catch {
                    return OpsAnswer(status: 503, body: OpsMessages.error("unavailable", "ride storage is unavailable: \(error.message)"))
                }
                let rows = stored.map { r in
                    let live = registry.find(r.id)
                    return (key: r.key(in: order)!, ride: r.ride, plan: live?.plan ?? registry.plans[r.planID] ?? .standard,
                            watchers: live?.subscriberCount.load(ordering: .relaxed) ?? 0)
                }
                let p = Shard.cut(rows, limit)
                return OpsAnswer(status: 200, body: OpsMessages.page(p.rows, at: at, next: p.next.map(OpsMessages.cursor)))
            }
        }
    }

    /// The first `limit` of rows already in the page's order, and the key to continue
    /// after when more remain.
    static func cut(_ rows: [(key: RideKey, ride: Ride, plan: FarePlan, watchers: Int)], _ limit: Int)
        -> (rows: [(ride: Ride, plan: FarePlan, watchers: Int)], next: RideKey?) {
        let page = rows.prefix(limit)
        return (page.map { ($0.ride, $0.plan, $0.watchers) }, rows.count > limit ? page.last?.key : nil)
    }
}
