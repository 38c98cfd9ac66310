import RideCore
import RideProtocol

/// What the server tells people about where rides are (issue 28), as frames: the `zone` push
/// to a ride's subscribers whenever the effective rules at its position change, the operator
/// feed's `fleet_warning` when it enters a zone that may not be ridden through, and the
/// errors of a refused start or end. The store worker posts these after the group they belong
/// to, through the same mailboxes as every other push.
package enum GeoPublish {
    /// `{"type":"zone",…}` for the ride's subscribers.
    package static func zonePush(ride: String, _ d: ZoneDecision, prefix: Int) -> [UInt8] {
        ServerMessages.zone(ride: ride, d, prefix: prefix)
    }

    /// `{"type":"fleet_warning","ride":…,"zone":…,"rules":{…},"at":…}` for the operators.
    package static func fleetWarning(ride: String, _ d: ZoneDecision, at: UnixMillis, prefix: Int) -> [UInt8] {
        OpsCodec.encode(.fleetWarning(FleetWarning(ride: ride, zone: ZoneUpdate(ride: ride, d), at: at)), prefix: prefix)
    }

    /// The ride.v1 error for a refused start or end, naming the zone.
    package static func error(_ r: GeoRefusal, ride: String, id: String?) -> ProtocolError {
        let code: ErrorCode
        switch r {
        case .startNotAllowed: code = .startNotAllowed
        case .endNotAllowed: code = .endNotAllowed
        case .positionRequired: code = .positionRequired
        }
        return ProtocolError(code, r.message(ride: ride), id: id)
    }
}

/// A ride's distance and last position as the tick and the fleet frame read them: set by the
/// store worker when it publishes a group, read by the timer thread, both under the
/// registry's view lock.
package final class LiveTrace {  // every field is touched only under RideRegistry.view
    package var metres: Int64 = 0
    package var position: TracePoint?
    /// The position changed since the last tick: the next tick carries it.
    package var positionUnsent = false

    package init() {}

    /// Takes the worker's figures; the position goes out with the next tick if it moved.
    package func update(metres: Int64, position: TracePoint?) {
        self.metres = metres
        if position != self.position {
            self.position = position
            positionUnsent = position != nil
        }
    }

    /// The position for this tick: once after each change, nil otherwise.
    package func positionForTick() -> RidePosition? {
        guard positionUnsent, let p = position else { return nil }
        positionUnsent = false
        return RidePosition(p)
    }
}
