import CLibWebSockets
import RideAuth
import RideCore
import RideProtocol
import RideService
import RideStore

/// `GET /rides?state=riding|paused|ended&limit=N&cursor=C`: every ride, a page at a time,
/// for operators. Keyset pages (RidePage): open rides by (started_at, id) from memory, ended
/// rides newest first and all rides by start from the store, so rides starting and ending
/// while someone pages neither repeat nor shift the pages after.
extension Shard {
    static let maxPage = 500

    /// The router has checked the ops token.
    func ridesListing(_ wsi: OpaquePointer) -> Int32 {
        let state = urlArg(wsi, "state")
        guard state == nil || ["riding", "paused", "ended"].contains(state!) else {
            return respond(wsi, 400, json: errorJSON("bad_request", "state= must be riding, paused or ended (or absent for every ride)"))
        }
        var limit = 100
        if let text = urlArg(wsi, "limit") {
            guard let n = Int(text), n >= 1, n <= Shard.maxPage else {
                return respond(wsi, 400, json: errorJSON("bad_request", "limit= must be a whole number from 1 to \(Shard.maxPage)"))
            }
            limit = n
        }
        var cursor: RideKey?
        if let text = urlArg(wsi, "cursor") {
            guard let k = OpsMessages.parseCursor(text) else {
                return respond(wsi, 400, json: errorJSON("bad_request", "cursor= is not one this server returned in \"next\""))
            }
            cursor = k
        }
        let at = hub.clock.now()
        switch state {
        case "riding", "paused":
            let wanted: RideState = state == "riding" ? .riding : .paused
            // Copied under the lock, sorted outside it.
            let open = hub.registry.view.withLock { v in
                var rows: [(key: RideKey, ride: Ride, plan: FarePlan, watchers: Int)] = []
                for l in v.live where l.ride.state == wanted {
                    let k = RideKey(at: l.ride.startedAt, id: l.id)
                    if let c = cursor, !(c < k) { continue }
                    rows.append((k, l.ride, l.plan, l.subscriberCount.load(ordering: .relaxed)))
                }
                return rows
            }
            let p = Shard.cut(open.sorted { $0.key < $1.key }, limit)
            return respond(wsi, 200, json: OpsMessages.page(p.rows, at: at, next: p.next.map(OpsMessages.cursor)))
        default:
            // Ended rides (and every ride) come from the store, on the store worker's thread.
            let order: RidePage = state == "ended" ? .ended(before: cursor) : .byStart(after: cursor)
            let limit = limit
            return awaitStore(wsi, "/rides") { store, registry in
                let stored: [StoredRide]
                do throws(StoreError) { stored = try store.rides(order, limit: limit + 1) } catch {
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
