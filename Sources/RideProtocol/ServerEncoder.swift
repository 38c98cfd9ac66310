import RideCore

/// The one encoder of every server → client message of ride.v1: the server sends its bytes and
/// the golden examples (protocol/examples/server) round-trip through it. Every frame is
/// written after `prefix` spare bytes, where libwebsockets writes its frame header (LWS_PRE).
extension ServerCodec {
    public static func encode(_ m: ServerMessage, prefix: Int = 0) -> [UInt8] {
        if case .tick(let t) = m {
            var out: [UInt8] = []
            out.reserveCapacity(prefix + 192)
            tick(into: &out, t, prefix: prefix)
            return out
        }
        if case .state(let s, let id) = m { return state(s, id: id, prefix: prefix) }
        var w = JSONWriter(reserving: reserve(m), prefix: prefix)
        w.beginObject()
        w.field("type", m.type)
        switch m {
        case .tick, .state: preconditionFailure("encoded above")
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
            zoneFields(&w, z)
        case .push(let a, let id):
            pushFields(&w, a, id: id)
        }
        w.endObject()
        return w.bytes
    }

    /// `{"type":"tick",…}` into `out`, reusing its capacity: the hot path, one per ride per
    /// second. Once `out` has grown to a tick's size, encoding allocates nothing.
    public static func tick(into out: inout [UInt8], _ t: RideTick, prefix: Int) {
        tick(into: &out, ride: t.ride, state: t.state, elapsed: t.elapsed, paused: t.paused, fare: t.fare,
             currency: t.currency, remaining: t.remaining, seq: t.seq, at: t.at, prefix: prefix,
             distance: t.distance, position: t.position)
    }

    /// The tick's fields one by one: what `tick(into:_:)` and `encode(.tick)` write through, and
    /// what the server's tick path calls directly (building a RideTick first cost ~5% more CPU
    /// per tick, measured in release).
    static func tick(into out: inout [UInt8], ride: String, state: RideState, elapsed: Int64, paused: Int64, fare: Int64,
                     currency: String, remaining: Int64?, seq: Int64, at: Int64, prefix: Int,
                     distance: Int64? = nil, position: RidePosition? = nil, compact: Bool = false) {
        // Move the buffer into the writer: if `out` kept a reference, emptying it would copy.
        var w = JSONWriter(adopting: consume out, prefix: prefix)
        w.beginObject()
        w.field("type", "tick")
        live(&w, ride: ride, state: state, elapsed: elapsed, paused: paused, fare: fare, currency: currency, remaining: remaining)
        encodeTrace(&w, distance: distance, position: position, compact: compact)
        w.field("seq", seq)
        w.field("at", at)
        w.endObject()
        out = w.bytes
    }

    /// `{"type":"state",…}`: what `encode(.state)` writes, called directly by the server
    /// (a transition's reply and push) to skip wrapping the snapshot in a ServerMessage.
    public static func state(_ s: RideSnapshot, id: String?, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 512, prefix: prefix)
        w.beginObject()
        w.field("type", "state")
        if let id { w.field("id", id) }
        rideFields(&w, s)
        w.endObject()
        return w.bytes
    }

    /// The ride alone, as `GET /rides/{id}` answers: a state message without `type` and `id`.
    public static func document(_ s: RideSnapshot) -> [UInt8] {
        var w = JSONWriter(reserving: 512)
        w.beginObject()
        rideFields(&w, s)
        w.endObject()
        return w.bytes
    }

    static func reserve(_ m: ServerMessage) -> Int {
        switch m {
        case .quote: return 384
        case .share: return 256
        case .zone, .push: return 192
        case .error: return 160
        case .authenticated: return 128
        case .tick, .state, .warning, .unsubscribed: return 96
        }
    }

    /// A ride's fields in the order of a state message (after `type` and `id`): also the body
    /// of `GET /rides/{id}` and of an operator's view of a ride.
    public static func rideFields(_ w: inout JSONWriter, _ s: RideSnapshot) {
        live(&w, ride: s.ride, state: s.state, elapsed: s.elapsed, paused: s.paused, fare: s.fare,
             currency: s.currency, remaining: s.remaining)
        w.field("at", s.at)
        if let l = s.limit { w.field("limit", l) }
        w.field("started_at", s.startedAt)
        w.field("ended_at", s.endedAt)
        // The pause in progress began here (pages show how long a ride has stood still).
        w.field("paused_since", s.pausedSince)
        if let o = s.owner { w.field("owner", o) }
        encodeTrace(&w, distance: s.distance, position: s.position)
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
            w.field("reason", r.reason.rawValue)
            if let d = r.distance { w.field("distance", d) }
            w.key("lines")
            lines(&w, r.lines)
            w.endObject()
        }
    }

    /// The fields a tick and a state message share, in the same order.
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

    /// What a page needs to print the rate line ("기본 500원 + 분당 180원"), in minor units.
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
        w.field("billing", p.billing.rawValue)
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
            w.field("label", l.label.rawValue)
            if let s = l.segment { w.field("segment", Int64(s)) }
            if let m = l.minutes { w.field("minutes", m) }
            if let k = l.km { w.field("km", k) }
            w.field("amount", l.amount)
            w.endObject()
        }
        w.endArray()
    }
}
