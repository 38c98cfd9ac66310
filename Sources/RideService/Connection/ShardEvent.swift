import RideCore
import RideProtocol

/// Work handed to a service thread from another thread.
package enum ShardEvent: Sendable {
    case tick(TickBatch)
    /// A message for every subscriber of the ride on this thread, except session `except`.
    case push(LiveRide, [UInt8], except: UInt64?)
    /// The store worker's answer to one of a session's requests (after its commit). A state
    /// reply for `ride` replaces the session's waiting tick of that ride.
    case reply(UInt64, [UInt8], ride: LiveRide?)
    /// A lookup the store worker answered: continue with the ride (nil: no such ride).
    case found(UInt64, Continuation, LiveRide?, ProtocolError?)
    /// For this thread's operators (OpsFeed.swift).
    case ops(OpsItem)
    /// An operator read's HTTP response for the connection waiting under the token (OpsRequests.swift).
    case httpAnswer(UInt64, HTTPAnswer)
    case shutdown
}
