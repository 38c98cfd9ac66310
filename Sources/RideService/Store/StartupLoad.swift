import RideCore
import RideStore

/// What a starting server reads from its store before any thread runs: the open rides (into
/// the registry and the ride book) and, on a store of its own, each one's trace checkpoint; on
/// a store shared with other nodes, the cursor its catch-up starts from.
package enum StartupLoad {
    package static func load(_ store: RideStore, plans: [FarePlan], into registry: RideRegistry)
        throws(ServerError) -> (book: RideBook, cluster: ClusterCatchUp?) {
        var book = RideBook(plans: plans)
        var cluster: ClusterCatchUp?
        do throws(StoreError) {
            // Before the open rides: whatever commits while they load is read again, never missed.
            if let shared = store as? SharedJournal { cluster = ClusterCatchUp(cursor: try shared.startCursor()) }
            let open = try store.openRides()
            registry.publishing { v in
                for stored in open {
                    book.learn(RideBook.Entry(ride: stored.ride, seq: stored.seq))
                    _ = registry.add(stored.ride, &v)
                }
            }
        } catch {
            throw ServerError("cannot load rides: \(error.message)")
        }
        guard !(store is SharedJournal) else { return (book, cluster) }
        // Open rides' distances for their ticks and reads from the start (one local read each;
        // on a shared store they come with each ride's next position instead).
        do throws(StoreError) {
            var traces: [TraceCheckpoint] = []
            for rid in registry.view.withLock({ v in v.live.map(\.id) }) {
                if let t = try store.trace(rid) { traces.append(t) }
            }
            registry.publishing { v in
                for t in traces {
                    guard let live = v.rides[t.ride] else { continue }
                    let lt = LiveTrace()
                    lt.update(metres: t.metres, position: t.last)
                    live.trace = lt
                }
            }
        } catch {
            throw ServerError("cannot load ride traces: \(error.message)")
        }
        return (book, cluster)
    }
}
