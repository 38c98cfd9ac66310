import RideCore

/// Encoders for server → client messages of ride.v1. Each returns the frame's bytes after
/// `prefix` spare bytes (libwebsockets writes its frame header in front: LWS_PRE).
public enum ServerMessages {
    /// The numbers a tick and a state message share, derived from the ride at one instant.
    public struct Figures: Equatable, Sendable {
        public var elapsed: Int64
        public var paused: Int64
        public var fare: Int64
        public var remaining: Int64?

        public init(_ ride: Ride, _ plan: FarePlan, at: UnixMillis) {
            elapsed = ride.elapsedSeconds(at: at)
            paused = ride.pausedSeconds(at: at)
            fare = FareEngine.fare(plan, riding: elapsed, paused: paused, metres: ride.metres)
            remaining = ride.remainingSeconds(at: at)
        }
    }

    /// `{"type":"tick",...}` into `out`, reusing its capacity (the hot path: one per ride per second).
    public static func tick(into out: inout [UInt8], ride: Ride, plan: FarePlan, seq: Int64, at: UnixMillis, prefix: Int) {
        let f = Figures(ride, plan, at: at)
        // Move the buffer into the writer: if `out` kept a reference, emptying it would copy.
        var w = JSONWriter(adopting: consume out, prefix: prefix)
        w.beginObject()
        w.field("type", "tick")
        live(&w, ride: ride, plan: plan, figures: f)
        w.field("seq", seq)
        w.field("at", at)
        w.endObject()
        out = w.bytes
    }

    /// `{"type":"state",...}`: the reply to every ride request and the push on every transition.
    public static func state(ride: Ride, plan: FarePlan, at: UnixMillis, id: String?, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 512, prefix: prefix)
        w.beginObject()
        w.field("type", "state")
        if let id { w.field("id", id) }
        rideBody(&w, ride: ride, plan: plan, at: at)
        w.endObject()
        return w.bytes
    }

    /// The reply to a transition (with the request's id) and the push to every other watcher
    /// (without), from one encoding of the ride: the store worker makes both for every request.
    public static func stateReplyAndPush(ride: Ride, plan: FarePlan, at: UnixMillis, id: String?, prefix: Int) -> (reply: [UInt8], push: [UInt8]) {
        let push = state(ride: ride, plan: plan, at: at, id: nil, prefix: prefix)
        guard let id else { return (push, push) }
        // `{"type":"state"` then `,"id":…` then the rest, exactly as `state(…id:)` writes it.
        let head = prefix + #"{"type":"state""#.utf8.count
        var w = JSONWriter(reserving: id.utf8.count + 8)
        w.beginObject()
        w.field("id", id)
        var reply = [UInt8]()
        reply.reserveCapacity(push.count + w.bytes.count)
        reply.append(contentsOf: push[..<head])
        reply.append(UInt8(ascii: ","))
        reply.append(contentsOf: w.bytes.dropFirst())  // `"id":"…"` without its `{`
        reply.append(contentsOf: push[head...])
        return (reply, push)
    }

    /// The ride's fields as a JSON object (for `GET /rides/{id}`).
    public static func rideDocument(ride: Ride, plan: FarePlan, at: UnixMillis) -> [UInt8] {
        var w = JSONWriter(reserving: 512)
        w.beginObject()
        rideBody(&w, ride: ride, plan: plan, at: at)
        w.endObject()
        return w.bytes
    }

    /// The fields a tick and a state message share, in the same order.
    static func live(_ w: inout JSONWriter, ride: Ride, plan: FarePlan, figures f: Figures) {
        w.field("ride", ride.id)
        w.field("state", ride.state.rawValue)
        w.field("elapsed", f.elapsed)
        w.field("paused", f.paused)
        w.field("fare", f.fare)
        w.field("currency", plan.currency.code)
        if let r = f.remaining, ride.state != .ended { w.field("remaining", r) }  // nothing is left of an ended ride
    }

    static func rideBody(_ w: inout JSONWriter, ride: Ride, plan: FarePlan, at: UnixMillis) {
        let f = Figures(ride, plan, at: at)
        live(&w, ride: ride, plan: plan, figures: f)
        w.field("at", at)
        if let l = ride.limit { w.field("limit", l) }
        w.field("started_at", ride.startedAt)
        w.field("ended_at", ride.endedAt)
        // The pause in progress began here (pages show how long a ride has stood still).
        w.field("paused_since", ride.pausedSince)
        if let owner = ride.owner { w.field("owner", owner) }
        w.key("plan")
        planSummary(&w, plan)
        if ride.state == .ended {
            w.key("receipt")
            receipt(&w, ride: ride, plan: plan, figures: f)
        }
    }

    static func receipt(_ w: inout JSONWriter, ride: Ride, plan: FarePlan, figures f: Figures) {
        let q = FareEngine.quote(plan, riding: f.elapsed, paused: f.paused, metres: ride.metres)
        w.beginObject()
        w.field("elapsed", f.elapsed)
        w.field("paused", f.paused)
        w.field("fare", q.total)
        w.field("currency", plan.currency.code)
        w.field("started_at", ride.startedAt)
        w.field("ended_at", ride.endedAt)
        w.field("reason", (ride.endReason ?? .rider).rawValue)
        if ride.metres > 0 { w.field("distance", ride.metres) }
        w.key("lines")
        lines(&w, q.lines)
        w.endObject()
    }

    static func lines(_ w: inout JSONWriter, _ lines: [ReceiptLine]) {
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

    /// What a page needs to print the rate line ("기본 500원 + 분당 180원"), in minor units.
    public static func planSummary(_ w: inout JSONWriter, _ plan: FarePlan) {
        w.beginObject()
        w.field("id", plan.id)
        w.field("name", plan.displayName)
        w.field("currency", plan.currency.code)
        w.field("price", plan.price)
        w.key("per_min")
        w.beginArray()
        for s in plan.perMinute {
            w.beginObject()
            w.field("start", s.start)
            w.field("rate", s.rate)
            w.field("interval", s.interval)
            if let e = s.end { w.field("end", e) }
            w.endObject()
        }
        w.endArray()
        w.field("billing", plan.billing.rawValue)
        if plan.pauseRate != 0 { w.field("pause_rate", plan.pauseRate) }
        if let c = plan.cap {
            w.key("cap")
            w.beginObject()
            w.field("duration", c.duration)
            w.field("price", c.price)
            w.endObject()
        }
        w.endObject()
    }

    public static func quote(id: String?, plan: FarePlan, quote q: Quote, seconds: Int64, paused: Int64, prefix: Int = 0) -> [UInt8] {
        var w = JSONWriter(reserving: 384, prefix: prefix)
        w.beginObject()
        w.field("type", "quote")
        if let id { w.field("id", id) }
        w.field("plan", plan.id)
        w.field("seconds", seconds)
        w.field("paused", paused)
        w.field("fare", q.total)
        w.field("currency", q.currency.code)
        w.key("lines")
        lines(&w, q.lines)
        w.endObject()
        return w.bytes
    }

    public static func error(_ e: ProtocolError, prefix: Int = 0) -> [UInt8] {
        var w = JSONWriter(reserving: 160, prefix: prefix)
        w.beginObject()
        w.field("type", "error")
        if let id = e.id { w.field("id", id) }
        w.field("code", e.code.rawValue)
        w.field("message", e.message)
        w.endObject()
        return w.bytes
    }

    public static func unsubscribed(ride: String, id: String?, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 96, prefix: prefix)
        w.beginObject()
        w.field("type", "unsubscribed")
        if let id { w.field("id", id) }
        w.field("ride", ride)
        w.endObject()
        return w.bytes
    }

    public static func warning(ride: String, remaining: Int64, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 96, prefix: prefix)
        w.beginObject()
        w.field("type", "warning")
        w.field("ride", ride)
        w.field("remaining", remaining)
        w.endObject()
        return w.bytes
    }

    public static func share(ride: String, id: String?, url: String, token: String, prefix: Int) -> [UInt8] {
        var w = JSONWriter(reserving: 256, prefix: prefix)
        w.beginObject()
        w.field("type", "share")
        if let id { w.field("id", id) }
        w.field("ride", ride)
        w.field("url", url)
        w.field("token", token)
        w.endObject()
        return w.bytes
    }
}
