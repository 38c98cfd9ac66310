import RideCore

extension ClientEnvelope {
    public init(id: String?, _ message: ClientMessage) {
        self.id = id
        self.message = message
    }
}

extension ClientCodec {
    /// One client frame, `type` and `id` first, then the message's fields in the order the
    /// docs/protocol.md documents them. `ClientCodec.decode(encode(e)) == e` for every valid envelope.
    public static func encode(_ e: ClientEnvelope) -> [UInt8] {
        var w = JSONWriter(reserving: 160)
        w.beginObject()
        switch e.message {
        case .start: w.field("type", "start")
        case .control(let cmd, _, _): w.field("type", cmd.rawValue)
        case .subscribe: w.field("type", "subscribe")
        case .unsubscribe: w.field("type", "unsubscribe")
        case .get: w.field("type", "get")
        case .quote: w.field("type", "quote")
        case .auth: w.field("type", "auth")
        case .share: w.field("type", "share")
        case .position: w.field("type", "position")
        case .push(let r): w.field("type", r.action.rawValue)
        }
        if let id = e.id { w.field("id", id) }
        switch e.message {
        case .start(let ride, let plan, let limit):
            if let ride { w.field("ride", ride) }
            if let plan { w.field("plan", plan) }
            if let limit { w.field("limit", limit) }
        case .control(_, let ride, let metres):
            w.field("ride", ride)
            if let metres { w.field("distance", metres) }
        case .subscribe(let ride), .unsubscribe(let ride), .get(let ride), .share(let ride):
            w.field("ride", ride)
        case .quote(let plan, let seconds, let paused):
            if let plan { w.field("plan", plan) }
            w.field("seconds", seconds)
            w.field("paused", paused)
        case .auth(let token):
            w.field("token", token)
        case .position(let p):
            encodePosition(&w, p)
        case .push(let r):
            encodePush(&w, r)
        }
        encodeZoneFields(&w, e.zoneFields)
        w.endObject()
        return w.bytes
    }
}
