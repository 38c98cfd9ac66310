import RideCore

/// The server's messages from its rides and plans: each builds the wire value (RideValues.swift)
/// and hands it to the one encoder, `ServerCodec.encode`, that the golden examples check (the
/// tick hands over its fields, not a RideTick). Nothing here writes a field itself. Frames come
/// after `prefix` spare bytes (LWS_PRE).
public enum ServerMessages {
    /// `{"type":"tick",...}` into `out`, reusing its capacity (the hot path: one per ride per
    /// second; allocation-free once `out` has grown).
    /// `distance`: the trace's metres (nil: the ride reported none); `position`: the last fix,
    /// only when it changed since the previous tick (written compactly, `[lat, lon, at]`).
    public static func tick(into out: inout [UInt8], ride: Ride, plan: FarePlan, seq: Int64, at: UnixMillis, prefix: Int,
                            distance: Int64? = nil, position: RidePosition? = nil) {
        let f = RideFigures(ride, plan, at: at, metres: distance)
        ServerCodec.tick(into: &out, ride: ride.id, state: ride.state, elapsed: f.elapsed, paused: f.paused, fare: f.fare,
                         currency: plan.currency.code, remaining: ride.state == .ended ? nil : f.remaining, seq: seq, at: at,
                         prefix: prefix, distance: distance, position: position, compact: true)
    }

    /// `{"type":"state",...}`: the reply to every ride request and the push on every transition.
    public static func state(ride: Ride, plan: FarePlan, at: UnixMillis, id: String?, prefix: Int,
                             distance: Int64? = nil, position: RidePosition? = nil) -> [UInt8] {
        ServerCodec.state(RideSnapshot(ride, plan, at: at, distance: distance, position: position), id: id, prefix: prefix)
    }

    /// The reply to a transition (with the request's id) and the push to every other watcher
    /// (without), from one encoding of the ride: the store worker makes both for every request.
    public static func stateReplyAndPush(ride: Ride, plan: FarePlan, at: UnixMillis, id: String?, prefix: Int,
                                         distance: Int64? = nil, position: RidePosition? = nil) -> (reply: [UInt8], push: [UInt8]) {
        let push = state(ride: ride, plan: plan, at: at, id: nil, prefix: prefix, distance: distance, position: position)
        guard let id else { return (push, push) }
        // `{"type":"state"` then `,"id":…` then the rest, exactly as the encoder writes a state
        // with an id (CodecTests holds the two equal).
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
        ServerCodec.document(RideSnapshot(ride, plan, at: at))
    }

    public static func quote(id: String?, plan: FarePlan, quote q: Quote, seconds: Int64, paused: Int64, prefix: Int = 0) -> [UInt8] {
        ServerCodec.encode(.quote(QuoteReply(plan: plan, quote: q, seconds: seconds, paused: paused), id: id), prefix: prefix)
    }

    public static func error(_ e: ProtocolError, prefix: Int = 0) -> [UInt8] {
        ServerCodec.encode(.error(e), prefix: prefix)
    }

    public static func unsubscribed(ride: String, id: String?, prefix: Int) -> [UInt8] {
        ServerCodec.encode(.unsubscribed(ride: ride, id: id), prefix: prefix)
    }

    public static func warning(ride: String, remaining: Int64, prefix: Int) -> [UInt8] {
        ServerCodec.encode(.warning(ride: ride, remaining: remaining), prefix: prefix)
    }

    public static func share(ride: String, id: String?, url: String, token: String, prefix: Int) -> [UInt8] {
        ServerCodec.encode(.share(ShareLink(ride: ride, url: url, token: token), id: id), prefix: prefix)
    }

    /// `{"type":"authenticated",…}`: the answer to an `auth` message (`sub`/`scope` absent
    /// when the server runs without auth).
    public static func authenticated(id: String?, sub: String?, scope: String?, prefix: Int = 0) -> [UInt8] {
        ServerCodec.encode(.authenticated(sub: sub, scope: scope, id: id), prefix: prefix)
    }
}
