import RideCore
import RideProtocol
import RideStore

/// Rides by state, as `/healthz` reports them.
struct RideCounts: Equatable {
    var riding = 0
    var paused = 0
    var ended = 0
}

/// Encoders for the operator feed (`watch_all`, `GET /rides`); the wire format is in the
/// README's protocol tables. Like ServerMessages, each writes after `prefix` spare bytes.
enum OpsMessages {
    /// `{"type":"fleet",...}`: every ticking ride of one tick as a positional row
    /// `[ride, state, elapsed, paused, fare, remaining|null, watchers]`. Encoded once per tick
    /// for every operator: ~45 bytes a ride instead of a ~130-byte tick message each.
    struct Fleet {
        private var w: JSONWriter

        init(seq: Int64, at: UnixMillis, counts: RideCounts, rides: Int, prefix: Int) {
            w = JSONWriter(reserving: 96 + rides * 48, prefix: prefix)
            w.beginObject()
            w.field("type", "fleet")
            w.field("seq", seq)
            w.field("at", at)
            OpsMessages.counts(&w, counts)
            w.key("rows")
            w.beginArray()
        }

        mutating func row(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int) {
            let f = ServerMessages.Figures(ride, plan, at: at)
            w.beginArray()
            w.string(ride.id)
            w.string(ride.state.rawValue)
            w.int(f.elapsed)
            w.int(f.paused)
            w.int(f.fare)
            if let r = f.remaining { w.int(r) } else { w.null() }
            w.int(Int64(watchers))
            w.endArray()
        }

        consuming func finish() -> [UInt8] {
            w.endArray()
            w.endObject()
            return w.bytes
        }
    }

    /// One ride as a snapshot or listing row: the state fields without the plan object.
    /// `listing` adds `ended_at` and, once ended, `reason` (for `GET /rides`).
    static func row(_ w: inout JSONWriter, _ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int, listing: Bool) {
        let f = ServerMessages.Figures(ride, plan, at: at)
        w.beginObject()
        w.field("ride", ride.id)
        w.field("state", ride.state.rawValue)
        w.field("elapsed", f.elapsed)
        w.field("paused", f.paused)
        w.field("fare", f.fare)
        w.field("currency", plan.currency.code)
        if let r = f.remaining { w.field("remaining", r) }
        if let l = ride.limit { w.field("limit", l) }
        if let o = ride.owner { w.field("owner", o) }
        w.field("plan", ride.planID)
        w.field("started_at", ride.startedAt)
        if listing { w.field("ended_at", ride.endedAt) }
        w.field("paused_since", ride.pausedSince)
        if listing, let reason = ride.endReason { w.field("reason", reason.rawValue) }
        w.field("watchers", Int64(watchers))
        w.endObject()
    }

    /// The snapshot that answers `watch_all`, in frames of at most `perFrame` rides (`more`
    /// is true on all but the last), so a big fleet is not one multi-megabyte message.
    static func snapshot(id: String?, seq: Int64, at: UnixMillis, counts: RideCounts,
                         rides: [(ride: Ride, plan: FarePlan, watchers: Int)], perFrame: Int = 2000, prefix: Int) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var start = 0
        repeat {
            let end = min(rides.count, start + perFrame)
            var w = JSONWriter(reserving: 160 + (end - start) * 260, prefix: prefix)
            w.beginObject()
            w.field("type", "snapshot")
            if let id { w.field("id", id) }
            w.field("seq", seq)
            w.field("at", at)
            w.key("more")
            w.bool(end < rides.count)
            OpsMessages.counts(&w, counts)
            w.key("rides")
            w.beginArray()
            for r in rides[start..<end] { row(&w, r.ride, r.plan, at: at, watchers: r.watchers, listing: false) }
            w.endArray()
            w.endObject()
            frames.append(w.bytes)
            start = end
        } while start < rides.count
        return frames
    }

    /// `{"type":"fleet_event","event":"pause","at":…,"ride":{…}}`: a transition, with the ride
    /// as `GET /rides/{id}` shows it (the receipt once ended) plus its watchers.
    static func event(_ kind: String, ride: Ride, plan: FarePlan, at: UnixMillis, watchers: Int, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 640, prefix: prefix)
        w.beginObject()
        w.field("type", "fleet_event")
        w.field("event", kind)
        w.field("at", at)
        w.key("ride")
        w.raw(adding(ServerMessages.rideDocument(ride: ride, plan: plan, at: at)) { $0.field("watchers", Int64(watchers)) })
        w.endObject()
        return w.bytes
    }

    /// `{"type":"fleet_warning","ride":…,"remaining":…,"at":…}`: 5 minutes or 1 minute left.
    static func warning(ride: String, remaining: Int64, at: UnixMillis, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 112, prefix: prefix)
        w.beginObject()
        w.field("type", "fleet_warning")
        w.field("ride", ride)
        w.field("remaining", remaining)
        w.field("at", at)
        w.endObject()
        return w.bytes
    }

    static func unwatched(id: String?, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 64, prefix: prefix)
        w.beginObject()
        w.field("type", "unwatched_all")
        if let id { w.field("id", id) }
        w.endObject()
        return w.bytes
    }

    /// `{"rides":[…],"next":"<cursor>"|null}` for `GET /rides`.
    static func page(_ rides: [(ride: Ride, plan: FarePlan, watchers: Int)], at: UnixMillis, next: String?) -> [UInt8] {
        var w = JSONWriter(reserving: 32 + rides.count * 300)
        w.beginObject()
        w.key("rides")
        w.beginArray()
        for r in rides { row(&w, r.ride, r.plan, at: at, watchers: r.watchers, listing: true) }
        w.endArray()
        w.key("next")
        if let next { w.string(next) } else { w.null() }
        w.endObject()
        return w.bytes
    }

    /// A ride document (or `state` message) with its journal and watchers, for operators.
    static func withJournal(_ document: [UInt8], journal: [RideTransition], watchers: Int) -> [UInt8] {
        adding(document) { w in
            w.key("journal")
            w.beginArray()
            for t in journal {
                w.beginObject()
                w.field("event", t.kind)
                w.field("at", t.at)
                if case .end(_, let reason, let metres) = t {
                    w.field("reason", reason.rawValue)
                    if metres > 0 { w.field("distance", metres) }
                }
                w.endObject()
            }
            w.endArray()
            w.field("watchers", Int64(watchers))
        }
    }

    /// `object` (one encoded JSON object, possibly after spare bytes) with more fields at its end.
    static func adding(_ object: [UInt8], _ fields: (inout JSONWriter) -> Void) -> [UInt8] {
        precondition(object.last == UInt8(ascii: "}"), "not an encoded object")
        var tail = JSONWriter(reserving: 256)
        fields(&tail)
        var out = object
        out.removeLast()
        out.append(UInt8(ascii: ","))
        out.append(contentsOf: tail.bytes)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"error":{"code":…,"message":…}}`, as every HTTP error of the server (Shard.errorJSON),
    /// for answers made off the service threads.
    static func error(_ code: String, _ message: String) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("error")
        w.beginObject()
        w.field("code", code)
        w.field("message", message)
        w.endObject()
        w.endObject()
        return w.bytes
    }

    static func counts(_ w: inout JSONWriter, _ c: RideCounts) {
        w.key("counts")
        w.beginObject()
        w.field("riding", Int64(c.riding))
        w.field("paused", Int64(c.paused))
        w.field("ended", Int64(c.ended))
        w.endObject()
    }

    // MARK: the listing's cursor

    /// `<instant>.<ride id>`: the key of the last row of a page (ride ids have no spaces and
    /// are URL-safe; the instant is digits, so the first dot ends it).
    static func cursor(_ k: RideKey) -> String { "\(k.at).\(k.id)" }

    static func parseCursor(_ s: String) -> RideKey? {
        guard let dot = s.firstIndex(of: "."), let at = Int64(s[..<dot]) else { return nil }
        let id = String(s[s.index(after: dot)...])
        guard ClientCodec.isValidRideID(id) else { return nil }
        return RideKey(at: at, id: id)
    }
}
