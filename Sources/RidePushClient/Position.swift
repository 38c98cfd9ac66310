import Foundation
import RideProtocol

/// One fix from the device's location API, for `RidePushClient.report(position:ride:)` and a
/// `start` at a place.
public struct Position: Sendable, Equatable {
    /// Degrees, WGS 84 (what Core Location and Android's Location give).
    public var lat: Double
    public var lon: Double
    /// Unix milliseconds of the fix, as the location API stamped it (not when it is sent).
    public var at: Int64
    /// Metres (the 68 % radius, Core Location's `horizontalAccuracy`); the server drops fixes
    /// over 50 m from the distance.
    public var accuracy: Double

    public init(lat: Double, lon: Double, at: Int64, accuracy: Double) {
        self.lat = lat
        self.lon = lon
        self.at = at
        self.accuracy = accuracy
    }

    public init(lat: Double, lon: Double, timestamp: Date, accuracy: Double) {
        self.init(lat: lat, lon: lon, at: Int64((timestamp.timeIntervalSince1970 * 1000).rounded()), accuracy: accuracy)
    }

    func report(ride: String) -> PositionReport {
        PositionReport(ride: ride, lat: lat, lon: lon, at: at, accuracy: accuracy)
    }
}

extension PositionReport {
    /// Why the server would refuse this fix (the decoder's own sentence), nil when it is valid:
    /// the SDK checks before queueing, since a refusal of a fire-and-forget message names no call.
    var refusal: String? {
        let frame = ClientCodec.encode(ClientEnvelope(id: nil, message: .position(self)))
        if case .failure(let e) = ClientCodec.decode(frame) { return e.message }
        return nil
    }
}
