import Foundation
import RidePushClient
#if canImport(ActivityKit)
import ActivityKit
#endif

/// A ride's Live Activity: what does not change while it lasts. The name is the server's
/// `attributes-type` in a push-to-start ("RideAttributes") and the fields are its `attributes`
/// (`ride`, `plan`), so iOS can create the activity from the push alone. What changes is the
/// content-state, `RideActivityContent`: the SDK's type, the one the server encodes.
public struct RideAttributes: Codable, Hashable, Sendable {
    public var ride: String
    /// The plan's name, as the rider chose it.
    public var plan: String

    public init(ride: String, plan: String) {
        self.ride = ride
        self.plan = plan
    }
}

#if canImport(ActivityKit)
extension RideAttributes: ActivityAttributes {
    public typealias ContentState = RideActivityContent
}
#endif

extension RideActivityContent {
    /// The content an activity starts with, from the ride the app holds (the reply to
    /// `start`), its limit to the second. The server's first push, sent as the activity's token
    /// is registered, brings the exact figures and what a snapshot does not carry: the fare's
    /// next step and the zone.
    public init(_ s: RideSnapshot) {
        let limitAt = s.state == .ended ? nil : s.remaining.map { s.at + $0 * 1000 }
        self.init(ride: s.ride, state: s.state, elapsed: s.elapsed, at: s.at, fare: s.receipt?.fare ?? s.fare,
                  currency: s.currency, limitAt: limitAt)
    }
}

/// APNs device tokens travel as hex: ActivityKit's `pushTokenUpdates` and
/// `pushToStartTokenUpdates` give `Data`, `registerPush` takes its bytes printed two digits each.
public enum APNsToken {
    public static func hex(_ token: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(token.count * 2)
        for b in token {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
