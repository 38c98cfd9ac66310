import RideCore
import RideStore

/// Turns what other nodes wrote into changes of this node's rides, on the store worker's
/// thread between groups (so the book has no undecided changes and nothing races it).
///
/// Two inputs, both only reasons to read: NOTIFY hints (`ride:seq`, read at once for that
/// ride) and the periodic catch-up read of the whole journal after a cursor, which catches
/// whatever a lost notification or a reconnect missed. Entries are applied by per-ride seq,
/// so reading one twice (a hint and the catch-up, or this node's own commits) does nothing.
package struct ClusterCatchUp {
    /// One ride after one entry written elsewhere, in the order they apply.
    package struct Update: Equatable {
        package let entry: RideBook.Entry
        package var isStart: Bool { entry.seq == 1 }
        package init(entry: RideBook.Entry) { self.entry = entry }
    }

    /// Where the catch-up read stands; taken before the open rides are loaded at start, so
    /// nothing committed in between is missed.
    package var cursor: JournalCursor
    /// Most entries one catch-up reads before letting the worker's queue go on.
    package let pageSize: Int
    package let maxPages: Int

    package init(cursor: JournalCursor, pageSize: Int = 1_000, maxPages: Int = 20) {
        self.cursor = cursor
        self.pageSize = pageSize
        self.maxPages = maxPages
    }

    /// The updates for `hints` (ride → highest seq announced) and, when `full`, for the
    /// journal after the cursor. `rides` is the book's view (the last seq applied per ride).
    package mutating func collect(hints: [String: Int64], full: Bool, rides: RideBook.Rides,
                          store: RideStore & SharedJournal) throws(StoreError) -> [Update] {
        var behind: [(ride: String, seq: Int64)] = []
        for (ride, seq) in hints.sorted(by: { $0.key < $1.key }) {
            let known = rides[ride]?.seq ?? 0
            if seq > known { behind.append((ride, known)) }
        }
        var pending = behind.isEmpty ? [] : try store.entries(after: behind)
        if full {
            for _ in 0..<maxPages {
                let page = try store.feed(after: cursor, limit: pageSize)
                pending += page.entries
                cursor = page.cursor
                if page.entries.count < pageSize { break }
            }
        }
        return try merge(pending, rides: rides, store: store)
    }

    /// Applies entries in per-ride seq order on top of `rides`. An entry past a gap (or a
    /// ride first seen mid-journal) reloads the ride from the store instead of guessing.
    package func merge(_ entries: [FeedEntry], rides: RideBook.Rides, store: RideStore) throws(StoreError) -> [Update] {
        // What this merge applied, over the book's rides (which it leaves as they are: a copy
        // to write on would copy the book).
        var applied: [String: RideBook.Entry] = [:]
        func current(_ id: String) -> RideBook.Entry? { applied[id] ?? rides[id] }
        var out: [Update] = []
        // Stable by (ride, seq): the journal order interleaves rides; one ride's entries may
        // even come out of seq order (transaction ids are not commit order).
        let sorted = entries.enumerated().sorted { a, b in
            (a.element.ride, a.element.seq, a.offset) < (b.element.ride, b.element.seq, b.offset)
        }.map(\.element)
        for e in sorted {
            if let cur = current(e.ride) {
                if e.seq <= cur.seq { continue }
                if e.seq == cur.seq + 1, case .success(let next) = cur.ride.applying(e.entry.transition) {
                    let u = RideBook.Entry(ride: next, seq: e.seq)
                    applied[e.ride] = u
                    out.append(Update(entry: u))
                    continue
                }
            } else if e.seq == 1, case .start(let at) = e.entry.transition {
                let u = RideBook.Entry(ride: Ride(id: e.ride, planID: e.planID, owner: e.owner, limit: e.limit, startedAt: at), seq: 1)
                applied[e.ride] = u
                out.append(Update(entry: u))
                continue
            } else if case .end = e.entry.transition {
                continue  // an ended ride this node does not hold needs nothing (read on demand)
            }
            guard let stored = try store.ride(e.ride), stored.seq > (current(e.ride)?.seq ?? 0) else { continue }
            let u = RideBook.Entry(ride: stored.ride, seq: stored.seq)
            applied[e.ride] = u
            out.append(Update(entry: u))
        }
        return out
    }
}
