import RideCore

/// The one encoder and the decoder of the operator feed (OpsMessage, OpsRequest) and of the
/// operators' HTTP reads (`GET /rides`, `GET /rides/{id}?journal=1`). Server frames are
/// written after `prefix` spare bytes (LWS_PRE), like ServerCodec's.
public enum OpsCodec {
    // MARK: encode

    public static func encode(_ m: OpsMessage, prefix: Int = 0) -> [UInt8] {
        switch m {
        case .fleet(let f):
            var e = FleetEncoder(seq: f.seq, at: f.at, counts: f.counts, rides: f.rows.count, prefix: prefix)
            for r in f.rows { e.row(r) }
            return e.finish()
        case .snapshot(let s):
            var w = JSONWriter(reserving: 160 + s.rides.count * 260, prefix: prefix)
            w.beginObject()
            w.field("type", "snapshot")
            if let id = s.id { w.field("id", id) }
            w.field("seq", s.seq)
            w.field("at", s.at)
            w.key("more")
            w.bool(s.more)
            counts(&w, s.counts)
            w.key("rides")
            w.beginArray()
            for r in s.rides { row(&w, r, listing: false) }
            w.endArray()
            w.endObject()
            return w.bytes
        case .fleetEvent(let e):
            var w = JSONWriter(reserving: 640, prefix: prefix)
            w.beginObject()
            w.field("type", "fleet_event")
            w.field("event", e.event.rawValue)
            w.field("at", e.at)
            w.key("ride")
            w.beginObject()
            watched(&w, e.ride)
            w.endObject()
            w.endObject()
            return w.bytes
        case .fleetWarning(let x):
            var w = JSONWriter(reserving: 112, prefix: prefix)
            w.beginObject()
            w.field("type", "fleet_warning")
            if let z = x.zone {
                ServerCodec.zoneFields(&w, z)  // "ride", "zone", "rules", as the zone push has them
            } else {
                w.field("ride", x.ride)
            }
            if let r = x.remaining { w.field("remaining", r) }
            w.field("at", x.at)
            w.endObject()
            return w.bytes
        case .unwatchedAll(let id):
            var w = JSONWriter(reserving: 64, prefix: prefix)
            w.beginObject()
            w.field("type", "unwatched_all")
            if let id { w.field("id", id) }
            w.endObject()
            return w.bytes
        case .state(let r, let id):
            var w = JSONWriter(reserving: 768 + (r.journal?.count ?? 0) * 48, prefix: prefix)
            w.beginObject()
            w.field("type", "state")
            if let id { w.field("id", id) }
            watched(&w, r)
            w.endObject()
            return w.bytes
        }
    }

    public static func encode(_ r: OpsRequest) -> [UInt8] {
        var w = JSONWriter(reserving: 96)
        w.beginObject()
        w.field("type", r.kind.rawValue)
        if let id = r.id { w.field("id", id) }
        w.endObject()
        return w.bytes
    }

    /// `GET /rides`: `{"rides":[…],"next":"<cursor>"|null}`.
    public static func page(_ p: RideListing) -> [UInt8] {
        var w = JSONWriter(reserving: 32 + p.rides.count * 300)
        w.beginObject()
        w.key("rides")
        w.beginArray()
        for r in p.rides { row(&w, r, listing: true) }
        w.endArray()
        w.key("next")
        if let next = p.next { w.string(next) } else { w.null() }
        w.endObject()
        return w.bytes
    }

    /// `GET /rides/{id}` for an operator: the ride document with its journal and watchers.
    public static func document(_ r: WatchedRide) -> [UInt8] {
        var w = JSONWriter(reserving: 768 + (r.journal?.count ?? 0) * 48)
        w.beginObject()
        watched(&w, r)
        w.endObject()
        return w.bytes
    }

    /// Writes a `fleet` frame row by row, so the server encodes the tick's rides without
    /// collecting them first: the one encoder of `fleet` (`encode(.fleet)` uses it too).
    public struct FleetEncoder {
        private var w: JSONWriter

        public init(seq: Int64, at: Int64, counts c: RideCounts, rides: Int, prefix: Int) {
            w = JSONWriter(reserving: 96 + rides * 48, prefix: prefix)
            w.beginObject()
            w.field("type", "fleet")
            w.field("seq", seq)
            w.field("at", at)
            OpsCodec.counts(&w, c)
            w.key("rows")
            w.beginArray()
        }

        public mutating func row(_ r: FleetRow) {
            row(ride: r.ride, state: r.state, elapsed: r.elapsed, paused: r.paused, fare: r.fare, remaining: r.remaining,
                watchers: r.watchers, position: r.position)
        }

        /// The server's row of a ride at the tick's instant: its figures go straight to the
        /// row, without a FleetRow per ride (as the tick itself does). `metres`: the trace's
        /// distance (a per-km plan bills it live); `position`: where it last was.
        public mutating func row(_ ride: Ride, _ plan: FarePlan, at: UnixMillis, watchers: Int, metres: Int64? = nil,
                                 position: GeoPoint? = nil) {
            let f = RideFigures(ride, plan, at: at, metres: metres)
            row(ride: ride.id, state: ride.state, elapsed: f.elapsed, paused: f.paused, fare: f.fare, remaining: f.remaining,
                watchers: Int64(watchers), position: position)
        }

        /// One row in FleetRow.columns order, then the position when known.
        mutating func row(ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64, remaining: Int64?,
                                 watchers: Int64, position: GeoPoint? = nil) {
            w.beginArray()
            w.string(ride)
            w.string(state.rawValue)
            w.int(elapsed)
            w.int(paused)
            w.int(fare)
            if let x = remaining { w.int(x) } else { w.null() }
            w.int(watchers)
            if let p = position {
                w.beginArray()
                writeNumber(&w, p.lat)
                writeNumber(&w, p.lon)
                w.endArray()
            }
            w.endArray()
        }

        public consuming func finish() -> [UInt8] {
            w.endArray()
            w.endObject()
            return w.bytes
        }
    }

    static func row(_ w: inout JSONWriter, _ r: RideRow, listing: Bool) {
        w.beginObject()
        w.field("ride", r.ride)
        w.field("state", r.state.rawValue)
        w.field("elapsed", r.elapsed)
        w.field("paused", r.paused)
        w.field("fare", r.fare)
        w.field("currency", r.currency)
        if let x = r.remaining { w.field("remaining", x) }
        if let l = r.limit { w.field("limit", l) }
        if let o = r.owner { w.field("owner", o) }
        w.field("plan", r.plan)
        w.field("started_at", r.startedAt)
        if listing { w.field("ended_at", r.endedAt) }
        w.field("paused_since", r.pausedSince)
        if listing, let reason = r.reason { w.field("reason", reason.rawValue) }
        w.field("watchers", r.watchers)
        w.endObject()
    }

    static func watched(_ w: inout JSONWriter, _ r: WatchedRide) {
        ServerCodec.rideFields(&w, r.ride)
        if let journal = r.journal {
            w.key("journal")
            w.beginArray()
            for e in journal {
                w.beginObject()
                w.field("event", e.event.rawValue)
                w.field("at", e.at)
                if let reason = e.reason { w.field("reason", reason.rawValue) }
                if let d = e.distance { w.field("distance", d) }
                w.endObject()
            }
            w.endArray()
        }
        w.field("watchers", r.watchers)
        if let p = r.pushTargets { w.field("push_targets", p) }
    }

    static func counts(_ w: inout JSONWriter, _ c: RideCounts) {
        w.key("counts")
        w.beginObject()
        w.field("riding", Int64(c.riding))
        w.field("paused", Int64(c.paused))
        w.field("ended", Int64(c.ended))
        w.endObject()
    }

    // MARK: decode

    /// One operator feed frame (or an operator's `get` reply, a state with a journal).
    public static func decode(_ bytes: some Collection<UInt8>) -> Result<OpsMessage, ProtocolError> {
        guard bytes.count <= maxFrame else { return .failure(ProtocolError(.tooLarge, "operator message over \(maxFrame) bytes")) }
        do {
            let f = try object(bytes)
            return .success(try message(f))
        } catch { return .failure(error) }
    }

    /// A snapshot frame holds up to 2,000 rows of ~260 bytes.
    public static let maxFrame = 1 << 20

    public static func decodePage(_ bytes: some Collection<UInt8>) -> Result<RideListing, ProtocolError> {
        do {
            let f = try object(bytes)
            var rows: [RideRow] = []
            for r in try f.objects("rides") { rows.append(try row(r, listing: true)) }
            return .success(RideListing(rides: rows, next: try f.optionalString("next")))
        } catch { return .failure(error) }
    }

    public static func decodeDocument(_ bytes: some Collection<UInt8>) -> Result<WatchedRide, ProtocolError> {
        do { return .success(try watched(try object(bytes))) } catch { return .failure(error) }
    }

    static func object(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> Fields {
        let json: JSON
        do { json = try JSON.parse(bytes) } catch {
            throw ProtocolError(.badRequest, "operator message is not valid JSON (\(error.reason) at byte \(error.offset))")
        }
        guard let o = json.object else { throw ProtocolError(.badRequest, "operator message must be a JSON object") }
        return Fields(o)
    }

    static func message(_ f: Fields) throws(ProtocolError) -> OpsMessage {
        let type = try f.string("type")
        switch type {
        case "snapshot":
            var rows: [RideRow] = []
            for r in try f.objects("rides") { rows.append(try row(r, listing: false)) }
            return .snapshot(FleetSnapshot(id: try f.optionalString("id"), seq: try f.int("seq"), at: try f.int("at"),
                                           more: try f.bool("more"), counts: try counts(f), rides: rows))
        case "fleet":
            guard case .array(let raw)? = f.o["rows"] else { throw ProtocolError(.badRequest, "\"rows\" must be an array") }
            var rows: [FleetRow] = []
            rows.reserveCapacity(raw.count)
            for r in raw { rows.append(try fleetRow(r)) }
            return .fleet(FleetFrame(seq: try f.int("seq"), at: try f.int("at"), counts: try counts(f), rows: rows))
        case "fleet_event":
            return .fleetEvent(FleetEvent(event: try f.value("event", TransitionKind.self, "event"), at: try f.int("at"),
                                          ride: try watched(try f.object("ride"))))
        case "fleet_warning":
            if f.has("rules") {
                return .fleetWarning(FleetWarning(ride: try f.string("ride"), zone: try ServerCodec.zone(f), at: try f.int("at")))
            }
            return .fleetWarning(FleetWarning(ride: try f.string("ride"), remaining: try f.int("remaining"), at: try f.int("at")))
        case "unwatched_all":
            return .unwatchedAll(id: try f.optionalString("id"))
        case "state":
            guard f.has("journal") else { throw ProtocolError(.badRequest, "a state without a journal is a ride.v1 message (ServerCodec)") }
            return .state(try watched(f), id: try f.optionalString("id"))
        default:
            throw ProtocolError(.unknownType, "unknown operator message type \"\(type.prefix(40))\"")
        }
    }

    static func counts(_ f: Fields) throws(ProtocolError) -> RideCounts {
        let c = try f.object("counts")
        return RideCounts(riding: Int(try c.int("riding")), paused: Int(try c.int("paused")), ended: Int(try c.int("ended")))
    }

    static func fleetRow(_ v: JSON) throws(ProtocolError) -> FleetRow {
        guard case .array(let a) = v, a.count == FleetRow.columns.count || a.count == FleetRow.columns.count + 1 else {
            throw ProtocolError(.badRequest, "a fleet row must be an array of \(FleetRow.columns.count) values")
        }
        func int(_ i: Int) throws(ProtocolError) -> Int64 {
            guard let n = a[i].int else { throw ProtocolError(.badRequest, "fleet row \"\(FleetRow.columns[i])\" must be a whole number") }
            return n
        }
        guard let ride = a[0].string else { throw ProtocolError(.badRequest, "fleet row \"ride\" must be a string") }
        guard let s = a[1].string, let state = RideState(rawValue: s) else { throw ProtocolError(.badRequest, "fleet row \"state\" must be a ride state") }
        let remaining: Int64? = a[5] == .null ? nil : try int(5)
        var position: GeoPoint?
        if a.count > FleetRow.columns.count {
            guard case .array(let p) = a[7], p.count == 2, let lat = ClientCodec.number(p[0]), let lon = ClientCodec.number(p[1]),
                  abs(lat) <= 90, abs(lon) <= 180 else {
                throw ProtocolError(.badRequest, "a fleet row's position must be [lat, lon]")
            }
            position = GeoPoint(lat: lat, lon: lon)
        }
        return FleetRow(ride: ride, state: state, elapsed: try int(2), paused: try int(3), fare: try int(4),
                        remaining: remaining, watchers: try int(6), position: position)
    }

    static func row(_ f: Fields, listing: Bool) throws(ProtocolError) -> RideRow {
        RideRow(ride: try f.string("ride"), state: try f.state(), elapsed: try f.int("elapsed"), paused: try f.int("paused"),
                fare: try f.int("fare"), currency: try f.string("currency"), remaining: try f.optionalInt("remaining"),
                limit: try f.optionalInt("limit"), owner: try f.optionalString("owner"), plan: try f.string("plan"),
                startedAt: try f.int("started_at"), endedAt: listing ? try f.nullableInt("ended_at") : nil,
                pausedSince: try f.nullableInt("paused_since"),
                reason: listing ? try f.optionalValue("reason", EndReason.self, "end reason") : nil,
                watchers: try f.int("watchers"))
    }

    static func watched(_ f: Fields) throws(ProtocolError) -> WatchedRide {
        var journal: [JournalEntry]?
        if f.has("journal") {
            var entries: [JournalEntry] = []
            for e in try f.objects("journal") {
                entries.append(JournalEntry(event: try e.value("event", TransitionKind.self, "event"), at: try e.int("at"),
                                            reason: try e.optionalValue("reason", EndReason.self, "end reason"),
                                            distance: try e.optionalInt("distance")))
            }
            journal = entries
        }
        return WatchedRide(ride: try ServerCodec.snapshot(f), journal: journal, watchers: try f.int("watchers"),
                           pushTargets: try f.optionalInt("push_targets"))
    }
}

extension OpsRequest {
    /// `watch_all` / `unwatch_all`, or nil when `bytes` is not one of them (another ride.v1
    /// message, or one whose `id` ClientCodec would refuse).
    public static func decode(_ bytes: some Collection<UInt8>) -> OpsRequest? {
        guard case .object(let o)? = try? JSON.parse(bytes), let type = o["type"]?.string,
              let kind = OpsRequest.Kind(rawValue: type) else { return nil }
        var id: String?
        if let raw = o["id"] {
            guard let s = raw.string, !s.isEmpty, s.utf8.count <= ClientCodec.maxIDLength else { return nil }
            id = s
        }
        return OpsRequest(kind: kind, id: id)
    }
}
