import RideAuth
import RideCore
import RideProtocol
import RideStore

/// What the zones and the trace say about a start or end before the ride book decides it
/// (GeoDesk's verdicts, turned into the request to decide or the error to answer).
package enum GeoGate: Equatable {
    /// Decide this request (an end's distance replaced by the trace's); `forced`: an ops
    /// token's `force` overrode the zones (the receipt says `operator_forced`).
    case proceed(RideBook.Request, forced: Bool)
    case refuse(ProtocolError)
}

/// A counted (or refused) position, for the worker to publish after its group: the sender's
/// turn back (`to`), the ride's new distance and position for its ticks, the zone push and
/// the operator warning when owed.
package struct GeoStep: Sendable {
    package var ride: String
    /// The session whose job this was (nil: a push owed by a start, no job to hand back).
    package var to: (shard: Int, session: UInt64)?
    /// An error for the sender instead of silence.
    package var error: [UInt8]?
    package var metres: Int64?
    package var position: TracePoint?
    package var zonePush: [UInt8]?
    /// The zone entered, for the device pushes' content-state (docs/push.md).
    package var zone: ZoneDecision?
    package var warning: [UInt8]?

    package init(ride: String, to: (shard: Int, session: UInt64)?, error: [UInt8]? = nil, metres: Int64? = nil, position: TracePoint? = nil,
                 zonePush: [UInt8]? = nil, warning: [UInt8]? = nil) {
        self.ride = ride
        self.to = to
        self.error = error
        self.metres = metres
        self.position = position
        self.zonePush = zonePush
        self.warning = warning
    }
}

extension GeoDesk {
    /// Judges a start or an end against the zones (`ride`: the ride as the book has it, nil
    /// for a start or an unknown ride). An end a token may not make, or of a ride already
    /// ended, is left to the book, which refuses it in its own words.
    package func gate(_ request: RideBook.Request, geo: ZoneFields?, access: Access?, id: String?, ride: Ride?,
                      load: () throws(StoreError) -> TraceCheckpoint?) -> GeoGate {
        switch request {
        case .start(let rid, _, _, _):
            if case .refused(let r) = canStart(geo) { return .refuse(GeoPublish.error(r, ride: rid ?? "", id: id)) }
            return .proceed(request, forced: false)
        case .command(.end, let rid, let metres):
            guard let ride, ride.state != .ended, access?.mayControl(rideOwner: ride.owner) ?? true else {
                return .proceed(request, forced: false)
            }
            do throws(StoreError) {
                // Auth off: no roles, anyone may force.
                let verdict = try canEnd(rid, force: geo?.force ?? false, isOps: access?.claims.ops ?? true, load: load)
                if case .refused(let r) = verdict { return .refuse(GeoPublish.error(r, ride: rid, id: id)) }
                // The operator's word wins over the device's trace (docs/fares.md); a rider's
                // distance counts only for a ride that reported nothing. Auth off: no operators.
                let billed = try billedMetres(rid, clientDistance: metres, byOperator: access?.claims.ops == true, load: load)
                if case .forced = verdict { return .proceed(.command(.end, ride: rid, metres: billed), forced: true) }
                return .proceed(.command(.end, ride: rid, metres: billed), forced: false)
            } catch {
                return .refuse(ProtocolError(.unavailable, "ride storage is unavailable: \(error.message)", id: id))
            }
        default:
            return .proceed(request, forced: false)
        }
    }

    /// One `position` message of a ride the book has (`ride`; nil: unknown): counted, or the
    /// error that answers it. `prefix`: the frames' headroom.
    package func position(_ p: PositionReport, ride: Ride?, access: Access?, id: String?, to: (shard: Int, session: UInt64),
                          prefix: Int, load: () throws(StoreError) -> TraceCheckpoint?) -> (step: GeoStep, checkpoint: TraceCheckpoint?) {
        func refuse(_ e: ProtocolError) -> (GeoStep, TraceCheckpoint?) {
            (GeoStep(ride: p.ride, to: to, error: ServerMessages.error(e, prefix: prefix)), nil)
        }
        guard let ride else { return refuse(ProtocolError(.rideNotFound, "no ride \"\(p.ride)\"", id: id)) }
        if let a = access, !a.mayControl(rideOwner: ride.owner) {
            return refuse(ProtocolError(.forbidden, a.claims.scope == .watch ? "this token may only watch rides"
                                                                             : "ride \"\(ride.id)\" belongs to another rider", id: id))
        }
        guard ride.state != .ended else { return refuse(ProtocolError(.invalidTransition, "ride \"\(ride.id)\" has ended", id: id)) }
        let r: Report
        do throws(StoreError) { r = try report(p.ride, p.tracePoint, load: load) } catch {
            return refuse(ProtocolError(.unavailable, "ride storage is unavailable: \(error.message)", id: id))
        }
        var step = GeoStep(ride: p.ride, to: to, metres: r.metres, position: r.position)
        if r.outcome.tellRateLimited {
            step.error = ServerMessages.error(ProtocolError(.rateLimited, "more than \(config.maxReportsPerSecond) positions of ride \"\(p.ride)\" per second; the rest of this second's are dropped", id: id), prefix: prefix)
        }
        if let d = r.outcome.zoneChange {
            step.zonePush = GeoPublish.zonePush(ride: p.ride, d, prefix: prefix)
            step.zone = d
        }
        if let w = r.outcome.fleetWarning { step.warning = GeoPublish.fleetWarning(ride: p.ride, w.zone, at: w.at, prefix: prefix) }
        return (step, r.checkpoint)
    }
}
