import RideCore

/// Typed decode and encode of server → client messages. `encode` writes the fields in the
/// server's own order (`ServerMessages`), so a decoded frame re-encodes to the same bytes.
public enum ServerCodec {
    /// The largest server frame a client accepts: a state with its plan and receipt is under
    /// 2 KiB; anything near this is not ride.v1.
    public static let maxFrame = 64 * 1024

    public static func decode(_ bytes: some Collection<UInt8>) -> Result<ServerMessage, ProtocolError> {
        guard bytes.count <= maxFrame else { return .failure(ProtocolError(.tooLarge, "server message over \(maxFrame) bytes")) }
        let json: JSON
        do { json = try JSON.parse(bytes) } catch {
            return .failure(ProtocolError(.badRequest, "server message is not valid JSON (\(error.reason) at byte \(error.offset))"))
        }
        guard let o = json.object else { return .failure(ProtocolError(.badRequest, "server message must be a JSON object")) }
        do { return .success(try message(Fields(o))) } catch { return .failure(error) }
    }

    static func message(_ f: Fields) throws(ProtocolError) -> ServerMessage {
        let type = try f.string("type")
        switch type {
        case "state": return .state(try snapshot(f), id: try f.optionalString("id"))
        case "tick":
            return .tick(RideTick(ride: try f.string("ride"), state: try f.state(), elapsed: try f.int("elapsed"),
                                  paused: try f.int("paused"), fare: try f.int("fare"), currency: try f.string("currency"),
                                  remaining: try f.optionalInt("remaining"), seq: try f.int("seq"), at: try f.int("at")))
        case "warning": return .warning(ride: try f.string("ride"), remaining: try f.int("remaining"))
        case "unsubscribed": return .unsubscribed(ride: try f.string("ride"), id: try f.optionalString("id"))
        case "quote":
            return .quote(QuoteReply(plan: try f.string("plan"), seconds: try f.int("seconds"), paused: try f.int("paused"),
                                     fare: try f.int("fare"), currency: try f.string("currency"), lines: try lines(f)),
                          id: try f.optionalString("id"))
        case "share":
            return .share(ShareLink(ride: try f.string("ride"), url: try f.string("url"), token: try f.string("token")),
                          id: try f.optionalString("id"))
        case "authenticated":
            return .authenticated(sub: try f.optionalString("sub"), scope: try f.optionalString("scope"), id: try f.optionalString("id"))
        case "error":
            let raw = try f.string("code")
            guard let code = ErrorCode(rawValue: raw) else { throw ProtocolError(.badRequest, "unknown error code \"\(raw.prefix(40))\"") }
            return .error(ProtocolError(code, try f.string("message"), id: try f.optionalString("id")))
        case "zone": return .zone(try zone(f))
        default:
            throw ProtocolError(.unknownType, "unknown server message type \"\(type.prefix(40))\"")
        }
    }

    static func snapshot(_ f: Fields) throws(ProtocolError) -> RideSnapshot {
        let planFields = try f.object("plan")
        var receipt: Receipt?
        if f.has("receipt") {
            let r = try f.object("receipt")
            receipt = Receipt(elapsed: try r.int("elapsed"), paused: try r.int("paused"), fare: try r.int("fare"),
                              currency: try r.string("currency"), startedAt: try r.int("started_at"),
                              endedAt: try r.nullableInt("ended_at"), reason: try r.string("reason"),
                              distance: try r.optionalInt("distance"), lines: try lines(r))
        }
        return RideSnapshot(ride: try f.string("ride"), state: try f.state(), elapsed: try f.int("elapsed"),
                            paused: try f.int("paused"), fare: try f.int("fare"), currency: try f.string("currency"),
                            remaining: try f.optionalInt("remaining"), at: try f.int("at"), limit: try f.optionalInt("limit"),
                            startedAt: try f.int("started_at"), endedAt: try f.nullableInt("ended_at"),
                            pausedSince: try f.has("paused_since") ? f.nullableInt("paused_since") : nil,
                            owner: try f.optionalString("owner"), plan: try plan(planFields), receipt: receipt)
    }

    static func plan(_ f: Fields) throws(ProtocolError) -> PlanSummary {
        var segments: [FareSegment] = []
        for s in try f.objects("per_min") {
            segments.append(FareSegment(start: try s.int("start"), rate: try s.int("rate"), interval: try s.int("interval"),
                                        end: try s.optionalInt("end")))
        }
        var cap: FareCap?
        if f.has("cap") {
            let c = try f.object("cap")
            cap = FareCap(duration: try c.int("duration"), price: try c.int("price"))
        }
        return PlanSummary(id: try f.string("id"), name: try f.string("name"), currency: try f.string("currency"),
                           price: try f.int("price"), perMinute: segments, billing: try f.string("billing"),
                           pauseRate: try f.optionalInt("pause_rate"), cap: cap)
    }

    static func lines(_ f: Fields) throws(ProtocolError) -> [FareLine] {
        var out: [FareLine] = []
        for l in try f.objects("lines") {
            out.append(FareLine(label: try l.string("label"), segment: try l.optionalInt("segment"),
                                minutes: try l.optionalInt("minutes"), km: try l.optionalInt("km"), amount: try l.int("amount")))
        }
        return out
    }

    // MARK: encode

    public static func encode(_ m: ServerMessage) -> [UInt8] {
        var w = JSONWriter(reserving: 512)
        w.beginObject()
        w.field("type", m.type)
        switch m {
        case .state(let s, let id):
            if let id { w.field("id", id) }
            live(&w, ride: s.ride, state: s.state, elapsed: s.elapsed, paused: s.paused, fare: s.fare,
                 currency: s.currency, remaining: s.remaining)
            w.field("at", s.at)
            if let l = s.limit { w.field("limit", l) }
            w.field("started_at", s.startedAt)
            w.field("ended_at", s.endedAt)
            w.field("paused_since", s.pausedSince)
            if let o = s.owner { w.field("owner", o) }
            w.key("plan")
            plan(&w, s.plan)
            if let r = s.receipt {
                w.key("receipt")
                w.beginObject()
                w.field("elapsed", r.elapsed)
                w.field("paused", r.paused)
                w.field("fare", r.fare)
                w.field("currency", r.currency)
                w.field("started_at", r.startedAt)
                w.field("ended_at", r.endedAt)
                w.field("reason", r.reason)
                if let d = r.distance { w.field("distance", d) }
                w.key("lines")
                lines(&w, r.lines)
                w.endObject()
            }
        case .tick(let t):
            live(&w, ride: t.ride, state: t.state, elapsed: t.elapsed, paused: t.paused, fare: t.fare,
                 currency: t.currency, remaining: t.remaining)
            w.field("seq", t.seq)
            w.field("at", t.at)
        case .warning(let ride, let remaining):
            w.field("ride", ride)
            w.field("remaining", remaining)
        case .unsubscribed(let ride, let id):
            if let id { w.field("id", id) }
            w.field("ride", ride)
        case .quote(let q, let id):
            if let id { w.field("id", id) }
            w.field("plan", q.plan)
            w.field("seconds", q.seconds)
            w.field("paused", q.paused)
            w.field("fare", q.fare)
            w.field("currency", q.currency)
            w.key("lines")
            lines(&w, q.lines)
        case .share(let s, let id):
            if let id { w.field("id", id) }
            w.field("ride", s.ride)
            w.field("url", s.url)
            w.field("token", s.token)
        case .authenticated(let sub, let scope, let id):
            if let id { w.field("id", id) }
            if let sub { w.field("sub", sub) }
            if let scope { w.field("scope", scope) }
        case .error(let e):
            if let id = e.id { w.field("id", id) }
            w.field("code", e.code.rawValue)
            w.field("message", e.message)
        case .zone(let z):
            ServerMessages.zoneFields(&w, z)
        }
        w.endObject()
        return w.bytes
    }

    static func live(_ w: inout JSONWriter, ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64,
                     currency: String, remaining: Int64?) {
        w.field("ride", ride)
        w.field("state", state.rawValue)
        w.field("elapsed", elapsed)
        w.field("paused", paused)
        w.field("fare", fare)
        w.field("currency", currency)
        if let r = remaining { w.field("remaining", r) }
    }

    static func plan(_ w: inout JSONWriter, _ p: PlanSummary) {
        w.beginObject()
        w.field("id", p.id)
        w.field("name", p.name)
        w.field("currency", p.currency)
        w.field("price", p.price)
        w.key("per_min")
        w.beginArray()
        for s in p.perMinute {
            w.beginObject()
            w.field("start", s.start)
            w.field("rate", s.rate)
            w.field("interval", s.interval)
            if let e = s.end { w.field("end", e) }
            w.endObject()
        }
        w.endArray()
        w.field("billing", p.billing)
        if let r = p.pauseRate { w.field("pause_rate", r) }
        if let c = p.cap {
            w.key("cap")
            w.beginObject()
            w.field("duration", c.duration)
            w.field("price", c.price)
            w.endObject()
        }
        w.endObject()
    }

    static func lines(_ w: inout JSONWriter, _ lines: [FareLine]) {
        w.beginArray()
        for l in lines {
            w.beginObject()
            w.field("label", l.label)
            if let s = l.segment { w.field("segment", s) }
            if let m = l.minutes { w.field("minutes", m) }
            if let k = l.km { w.field("km", k) }
            w.field("amount", l.amount)
            w.endObject()
        }
        w.endArray()
    }
}

/// Typed field access over a decoded object; every miss names the field.
struct Fields {
    let o: [String: JSON]
    init(_ o: [String: JSON]) { self.o = o }

    func has(_ k: String) -> Bool { o[k] != nil }

    func string(_ k: String) throws(ProtocolError) -> String {
        guard let v = o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let s = v.string else { throw ProtocolError(.badRequest, "\"\(k)\" must be a string") }
        return s
    }

    func optionalString(_ k: String) throws(ProtocolError) -> String? {
        guard let v = o[k], v != .null else { return nil }
        guard let s = v.string else { throw ProtocolError(.badRequest, "\"\(k)\" must be a string") }
        return s
    }

    func int(_ k: String) throws(ProtocolError) -> Int64 {
        guard let v = o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let n = v.int else { throw ProtocolError(.badRequest, "\"\(k)\" must be a whole number") }
        return n
    }

    func optionalInt(_ k: String) throws(ProtocolError) -> Int64? {
        guard let v = o[k], v != .null else { return nil }
        guard let n = v.int else { throw ProtocolError(.badRequest, "\"\(k)\" must be a whole number") }
        return n
    }

    /// A field that is always present, null until it has a value (`ended_at`).
    func nullableInt(_ k: String) throws(ProtocolError) -> Int64? {
        guard o[k] != nil else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        return try optionalInt(k)
    }

    func object(_ k: String) throws(ProtocolError) -> Fields {
        guard let v = o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let obj = v.object else { throw ProtocolError(.badRequest, "\"\(k)\" must be an object") }
        return Fields(obj)
    }

    func objects(_ k: String) throws(ProtocolError) -> [Fields] {
        guard let v = o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let a = v.array else { throw ProtocolError(.badRequest, "\"\(k)\" must be an array") }
        var out: [Fields] = []
        for e in a {
            guard let obj = e.object else { throw ProtocolError(.badRequest, "\"\(k)\" must hold objects") }
            out.append(Fields(obj))
        }
        return out
    }

    func state() throws(ProtocolError) -> RideState {
        let s = try string("state")
        guard let st = RideState(rawValue: s) else { throw ProtocolError(.badRequest, "unknown ride state \"\(s.prefix(20))\"") }
        return st
    }
}
