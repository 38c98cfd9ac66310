import RideCore

/// A ride's trace as made durable (issue 28): the distance so far and the last accepted fix,
/// written with every transition and checkpointed while they change (never per position), so a
/// crash loses at most one checkpoint interval of trace. One row per ride, overwritten.
public struct TraceCheckpoint: Sendable, Equatable {
    public let ride: String
    /// Whole metres along the accepted trace.
    public let metres: Int64
    /// The last accepted fix, if any.
    public let last: TracePoint?
    /// Server time (Unix ms) that fix arrived: whether it is fresh enough for an `end` is
    /// judged on the server's clock, not the device's.
    public let receivedAt: UnixMillis?
    /// The GBFS vehicle type the ride started with (zone rules depend on it).
    public let vehicleType: String?

    public init(ride: String, metres: Int64, last: TracePoint?, receivedAt: UnixMillis?, vehicleType: String? = nil) {
        self.ride = ride
        self.vehicleType = vehicleType
        self.metres = metres
        self.last = last
        self.receivedAt = receivedAt
    }
}

/// Doubles are kept as text in both SQL stores: Swift's shortest round-tripping form, so a
/// checkpoint reads back bit for bit (the contract test compares them equal).
public enum TraceText {
    public static func text(_ d: Double) -> String { d.description }
    public static func double(_ s: String?) -> Double? { s.flatMap(Double.init) }
}
