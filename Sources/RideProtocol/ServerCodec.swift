import RideCore

/// Typed decode of server → client messages (the encoder is in ServerEncoder.swift): a decoded
/// frame re-encodes to the same bytes.
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
                                  remaining: try f.optionalInt("remaining"), seq: try f.int("seq"), at: try f.int("at"),
                                  distance: try traceDistance(f), position: try tracePosition(f)))
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
        case "push_registered": return try pushAck(f, .register)
        case "push_unregistered": return try pushAck(f, .unregister)
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
                              endedAt: try r.nullableInt("ended_at"), reason: try r.value("reason", EndReason.self, "end reason"),
                              distance: try r.optionalInt("distance"), lines: try lines(r))
        }
        return RideSnapshot(ride: try f.string("ride"), state: try f.state(), elapsed: try f.int("elapsed"),
                            paused: try f.int("paused"), fare: try f.int("fare"), currency: try f.string("currency"),
                            remaining: try f.optionalInt("remaining"), at: try f.int("at"), limit: try f.optionalInt("limit"),
                            startedAt: try f.int("started_at"), endedAt: try f.nullableInt("ended_at"),
                            pausedSince: try f.has("paused_since") ? f.nullableInt("paused_since") : nil,
                            owner: try f.optionalString("owner"), plan: try plan(planFields), receipt: receipt,
                            distance: try traceDistance(f), position: try tracePosition(f))
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
                           price: try f.int("price"), perMinute: segments, billing: try f.value("billing", BillingRule.self, "billing rule"),
                           pauseRate: try f.optionalInt("pause_rate"), cap: cap)
    }

    static func lines(_ f: Fields) throws(ProtocolError) -> [FareLine] {
        var out: [FareLine] = []
        for l in try f.objects("lines") {
            out.append(FareLine(label: try l.value("label", ReceiptLine.Label.self, "line label"), segment: try l.optionalInt("segment").map { Int($0) },
                                minutes: try l.optionalInt("minutes"), km: try l.optionalInt("km"), amount: try l.int("amount")))
        }
        return out
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

    func state() throws(ProtocolError) -> RideState { try value("state", RideState.self, "ride state") }

    /// One of RideCore's enums, by its wire name; `what` names it in the error.
    func value<T: RawRepresentable>(_ k: String, _: T.Type, _ what: String) throws(ProtocolError) -> T where T.RawValue == String {
        let s = try string(k)
        guard let v = T(rawValue: s) else { throw ProtocolError(.badRequest, "unknown \(what) \"\(s.prefix(20))\"") }
        return v
    }

    func optionalValue<T: RawRepresentable>(_ k: String, _ t: T.Type, _ what: String) throws(ProtocolError) -> T? where T.RawValue == String {
        guard let v = o[k], v != .null else { return nil }
        return try value(k, t, what)
    }

    func bool(_ k: String) throws(ProtocolError) -> Bool {
        guard let v = o[k] else { throw ProtocolError(.badRequest, "missing \"\(k)\"") }
        guard let b = v.bool else { throw ProtocolError(.badRequest, "\"\(k)\" must be true or false") }
        return b
    }
}
