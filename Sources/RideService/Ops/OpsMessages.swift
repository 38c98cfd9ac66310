import RideCore
import RideProtocol
import RideStore

/// Rides by state (the fleet's counts, as `/healthz` reports them), named here for the files
/// of this module that do not import RideProtocol.
typealias RideCounts = RideProtocol.RideCounts

/// The operator feed's frames from the server's rides: each builds the wire value and hands
/// it to RideProtocol's one encoder (OpsCodec), which the golden examples check. Frames come
/// after `prefix` spare bytes (LWS_PRE).
package enum OpsMessages {
    /// `{"type":"fleet",...}`: every ticking ride of one tick, row by row, encoded once per
    /// tick for every operator.
    struct Fleet {
        private var e: OpsCodec.FleetEncoder

        init(seq: Int64, at: UnixMillis, counts: RideCounts, rides: Int, prefix: Int) {
            e = OpsCodec.FleetEncoder(seq: seq, at: at, counts: counts, rides: rides, prefix: prefix)
        }

        mutating func row(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int, metres: Int64? = nil, position: GeoPoint? = nil) {
            e.row(ride, plan, at: at, watchers: watchers, metres: metres, position: position)
        }

        consuming func finish() -> [UInt8] { e.finish() }
    }

    /// The snapshot that answers `watch_all`, in frames of at most `perFrame` rides (`more`
    /// is true on all but the last), so a big fleet is not one multi-megabyte message.
    static func snapshot(id: String?, seq: Int64, at: UnixMillis, counts: RideCounts,
                         rides: [(ride: Ride, plan: FarePlan, watchers: Int)], perFrame: Int = 2000, prefix: Int) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var start = 0
        repeat {
            let end = min(rides.count, start + perFrame)
            let rows = rides[start..<end].map { RideRow($0.ride, $0.plan, at: at, watchers: $0.watchers) }
            frames.append(OpsCodec.encode(.snapshot(FleetSnapshot(id: id, seq: seq, at: at, more: end < rides.count,
                                                                  counts: counts, rides: rows)), prefix: prefix))
            start = end
        } while start < rides.count
        return frames
    }

    /// `{"type":"fleet_event","event":"pause","at":…,"ride":{…}}`: a transition (`kind` is
    /// RideTransition.kind), with the ride as `GET /rides/{id}` shows it plus its watchers.
    static func event(_ kind: String, ride: Ride, plan: FarePlan, at: UnixMillis, watchers: Int, prefix: Int) -> [UInt8] {
        guard let k = TransitionKind(rawValue: kind) else { preconditionFailure("not a transition: \(kind)") }
        let r = WatchedRide(ride: RideSnapshot(ride, plan, at: at), watchers: Int64(watchers))
        return OpsCodec.encode(.fleetEvent(FleetEvent(event: k, at: at, ride: r)), prefix: prefix)
    }

    /// `{"type":"fleet_warning","ride":…,"remaining":…,"at":…}`: 5 minutes or 1 minute left.
    static func warning(ride: String, remaining: Int64, at: UnixMillis, prefix: Int) -> [UInt8] {
        OpsCodec.encode(.fleetWarning(FleetWarning(ride: ride, remaining: remaining, at: at)), prefix: prefix)
    }

    static func unwatched(id: String?, prefix: Int) -> [UInt8] {
        OpsCodec.encode(.unwatchedAll(id: id), prefix: prefix)
    }

    /// `{"rides":[…],"next":"<cursor>"|null}` for `GET /rides`.
    package static func page(_ rides: [(ride: Ride, plan: FarePlan, watchers: Int)], at: UnixMillis, next: String?) -> [UInt8] {
        OpsCodec.page(RideListing(rides: rides.map { RideRow($0.ride, $0.plan, at: at, watchers: $0.watchers) }, next: next))
    }

    /// An operator's `get`: the state with the journal and watchers (without them when the
    /// journal could not be read).
    static func journalState(ride: Ride, plan: FarePlan, at: UnixMillis, id: String?, journal: [RideTransition]?,
                             watchers: Int, prefix: Int) -> [UInt8] {
        let snapshot = RideSnapshot(ride, plan, at: at)
        guard let journal else { return ServerCodec.encode(.state(snapshot, id: id), prefix: prefix) }
        let r = WatchedRide(ride: snapshot, journal: journal.map(JournalEntry.init), watchers: Int64(watchers))
        return OpsCodec.encode(.state(r, id: id), prefix: prefix)
    }

    /// `GET /rides/{id}` for an operator (or with `?journal=1`): the document with its journal and watchers.
    static func documentWithJournal(ride: Ride, plan: FarePlan, at: UnixMillis, journal: [RideTransition], watchers: Int,
                                    pushTargets: Int? = nil) -> [UInt8] {
        OpsCodec.document(WatchedRide(ride: RideSnapshot(ride, plan, at: at), journal: journal.map(JournalEntry.init),
                                      watchers: Int64(watchers), pushTargets: pushTargets.map(Int64.init)))
    }

    /// `{"error":{"code":…,"message":…}}`, as every HTTP error of the server (Shard.errorJSON),
    /// for answers made off the service threads.
    package static func error(_ code: String, _ message: String) -> [UInt8] {
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

    // MARK: the listing's cursor

    /// `<instant>.<ride id>`: the key of the last row of a page (ride ids have no spaces and
    /// are URL-safe; the instant is digits, so the first dot ends it).
    package static func cursor(_ k: RideKey) -> String { "\(k.at).\(k.id)" }

    package static func parseCursor(_ s: String) -> RideKey? {
        guard let dot = s.firstIndex(of: "."), let at = Int64(s[..<dot]) else { return nil }
        let id = String(s[s.index(after: dot)...])
        guard ClientCodec.isValidRideID(id) else { return nil }
        return RideKey(at: at, id: id)
    }
}
