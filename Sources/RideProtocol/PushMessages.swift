import RideCore

// ride.v1's lock-screen registrations (docs/push.md, protocol/examples/push/):
//   client → server  {"type":"register_push","id":"q9","platform":"apns","kind":"liveactivity","ride":"r-42","token":"<hex>"}
//                    {"type":"unregister_push",…the same fields…}
//   server → client  {"type":"push_registered","id":"q9","platform":"apns","kind":"liveactivity","ride":"r-42"}
//                    {"type":"push_unregistered",…}
// Kept in one file, as the zone messages are: ClientCodec and ServerCodec call in here from their
// decode switches and encoders (one case each in ClientMessage and ServerMessage).

/// Where a device's pushes go.
public enum PushPlatform: String, Sendable, Hashable, CaseIterable {
    case apns
    case fcm
}

/// What a push token is for.
public enum PushKind: String, Sendable, Hashable, CaseIterable {
    /// One Live Activity of one ride (iOS 16.1+): its pushes update the lock screen.
    case liveActivity = "liveactivity"
    /// The rider's token for starting an activity remotely (iOS 17.2+): one per rider, no ride.
    case pushToStart = "push_to_start"
    /// A device's notification token: an Android ongoing notification driven by FCM data.
    case notification
}

/// One push target as a device names it.
public struct PushTarget: Sendable, Hashable {
    public var platform: PushPlatform
    public var kind: PushKind
    /// Nil for `push_to_start` only.
    public var ride: String?
    /// APNs: lower-case hex; FCM: the registration token as given.
    public var token: String

    public init(platform: PushPlatform, kind: PushKind, ride: String?, token: String) {
        self.platform = platform
        self.kind = kind
        self.ride = ride
        self.token = token
    }
}

/// `register_push` or `unregister_push`: the one ClientMessage case `.push` carries.
public struct PushRequest: Sendable, Equatable {
    public enum Action: String, Sendable, Equatable {
        case register = "register_push"
        case unregister = "unregister_push"
    }

    public var action: Action
    public var target: PushTarget

    public init(_ action: Action, _ target: PushTarget) {
        self.action = action
        self.target = target
    }
}

/// The answer to a push request, with its id: what was registered or removed (the token is
/// not echoed: the device has it, and it is long).
public struct PushAck: Sendable, Equatable {
    public var action: PushRequest.Action
    public var platform: PushPlatform
    public var kind: PushKind
    public var ride: String?

    public init(_ action: PushRequest.Action, platform: PushPlatform, kind: PushKind, ride: String?) {
        self.action = action
        self.platform = platform
        self.kind = kind
        self.ride = ride
    }

    public init(_ r: PushRequest) {
        self.init(r.action, platform: r.target.platform, kind: r.target.kind, ride: r.target.ride)
    }

    /// The message's `type`.
    public var type: String {
        switch action {
        case .register: return "push_registered"
        case .unregister: return "push_unregistered"
        }
    }
}

// MARK: - Client side

extension ClientCodec {
    /// APNs device tokens are 32 bytes today; Apple says they may grow, so up to 200.
    public static let apnsTokenBytes = 16...200
    /// An FCM registration token is about 160 characters; 4 KB bounds what is stored.
    public static let maxFCMTokenLength = 4096

    static func pushRequest(_ o: [String: JSON], _ action: PushRequest.Action) throws(ProtocolError) -> PushRequest {
        let platform: PushPlatform = try pushEnum(o, "platform", "\"apns\" or \"fcm\"")
        let kind: PushKind = try pushEnum(o, "kind", "\"liveactivity\", \"push_to_start\" or \"notification\"")
        if platform == .fcm, kind != .notification {
            throw ProtocolError(.badRequest, "\"kind\" must be \"notification\" for \"fcm\" (Live Activities are iOS)")
        }
        let ride: String?
        if kind == .pushToStart {
            // One per rider: it starts an activity for whichever ride begins next.
            if let r = o["ride"], r != .null {
                throw ProtocolError(.badRequest, "a \"push_to_start\" token is the rider's, not a ride's: leave out \"ride\"")
            }
            ride = nil
        } else {
            ride = try rideID(o)
        }
        guard let t = o["token"], t != .null else { throw ProtocolError(.badRequest, "missing \"token\"") }
        guard let raw = t.string else { throw ProtocolError(.badRequest, "\"token\" must be a string") }
        return PushRequest(action, PushTarget(platform: platform, kind: kind, ride: ride, token: try pushToken(raw, platform)))
    }

    static func pushEnum<T: RawRepresentable>(_ o: [String: JSON], _ k: String, _ allowed: String) throws(ProtocolError) -> T
        where T.RawValue == String {
        guard let v = o[k], v != .null else { throw ProtocolError(.badRequest, "missing \"\(k)\" (\(allowed))") }
        guard let s = v.string, let e = T(rawValue: s) else { throw ProtocolError(.badRequest, "\"\(k)\" must be \(allowed)") }
        return e
    }

    /// The token checked for its platform. APNs tokens are kept in lower case: one target per
    /// device whichever case the app printed its token in.
    static func pushToken(_ s: String, _ platform: PushPlatform) throws(ProtocolError) -> String {
        switch platform {
        case .apns:
            let n = s.utf8.count
            let hex = s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }
            guard hex, n % 2 == 0, apnsTokenBytes.contains(n / 2) else {
                throw ProtocolError(.badRequest, "\"token\" must be an APNs device token: hex, \(apnsTokenBytes.lowerBound)-\(apnsTokenBytes.upperBound) bytes")
            }
            return s.lowercased()
        case .fcm:
            // Printable ASCII without spaces: it goes into a JSON body and a log line as is.
            guard !s.isEmpty, s.utf8.count <= maxFCMTokenLength, s.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x22 && $0 != 0x5C }) else {
                throw ProtocolError(.badRequest, "\"token\" must be an FCM registration token: 1-\(maxFCMTokenLength) printable ASCII characters")
            }
            return s
        }
    }

    /// The push request's fields after `type` and `id`.
    static func encodePush(_ w: inout JSONWriter, _ r: PushRequest) {
        w.field("platform", r.target.platform.rawValue)
        w.field("kind", r.target.kind.rawValue)
        if let ride = r.target.ride { w.field("ride", ride) }
        w.field("token", r.target.token)
    }
}

// MARK: - Server side

extension ServerMessages {
    /// `{"type":"push_registered",…}` / `push_unregistered`: the answer to a push request.
    public static func pushAck(_ ack: PushAck, id: String?, prefix: Int = 0) -> [UInt8] {
        ServerCodec.encode(.push(ack, id: id), prefix: prefix)
    }
}

extension ServerCodec {
    /// The acknowledgement's fields after `type`.
    static func pushFields(_ w: inout JSONWriter, _ a: PushAck, id: String?) {
        if let id { w.field("id", id) }
        w.field("platform", a.platform.rawValue)
        w.field("kind", a.kind.rawValue)
        if let ride = a.ride { w.field("ride", ride) }
    }

    static func pushAck(_ f: Fields, _ action: PushRequest.Action) throws(ProtocolError) -> ServerMessage {
        .push(PushAck(action, platform: try f.value("platform", PushPlatform.self, "push platform"),
                      kind: try f.value("kind", PushKind.self, "push kind"), ride: try f.optionalString("ride")),
              id: try f.optionalString("id"))
    }
}
