import RideCore
import RideProtocol

/// One APNs request, built without I/O: `POST path` with these headers and body over the
/// sender's HTTP/2 connection (the provider token's `authorization` header is the sender's).
public struct APNsRequest: Sendable, Equatable {
    public var path: String
    /// In the order sent; names lower-case, as HTTP/2 has them.
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// APNs refuses a Live Activity payload over 4 KB (PayloadTooLarge).
    public static let maxBody = 4096

    public enum BuildError: Error, Equatable {
        /// The body would be this many bytes.
        case tooLarge(Int)
    }

    /// The request for `push` to the device token `token` (hex), for the app `bundleID`.
    /// `expiration`: Unix seconds until which APNs keeps trying an offline device (0: once).
    public init(_ push: DevicePush, token: String, bundleID: String, expiration: Int64) throws(BuildError) {
        let body = Self.body(push)
        guard body.count <= Self.maxBody else { throw .tooLarge(body.count) }
        path = "/3/device/" + token
        headers = [
            Header("apns-push-type", "liveactivity"),
            Header("apns-topic", bundleID + ".push-type.liveactivity"),
            Header("apns-priority", String(push.priority.rawValue)),
            Header("apns-expiration", String(expiration)),
        ]
        self.body = body
    }

    /// `{"aps":{"timestamp":…,"event":…,"content-state":{…},…}}`.
    static func body(_ p: DevicePush) -> [UInt8] {
        var w = JSONWriter(reserving: 512)
        w.beginObject()
        w.key("aps")
        w.beginObject()
        w.field("timestamp", p.timestamp)
        w.field("event", p.event.rawValue)
        w.key("content-state")
        w.raw(p.content.json())
        if let s = p.staleDate { w.field("stale-date", s) }
        if let d = p.dismissalDate { w.field("dismissal-date", d) }
        if let a = p.alert {
            w.key("alert")
            w.beginObject()
            w.field("title", a.title)
            w.field("body", a.body)
            w.field("sound", "default")
            w.endObject()
        }
        if p.event == .start, let a = p.attributes {
            w.field("attributes-type", "RideAttributes")
            w.key("attributes")
            w.beginObject()
            w.field("ride", a.ride)
            w.field("plan", a.planName)
            w.endObject()
        }
        w.endObject()
        w.endObject()
        return w.bytes
    }
}
