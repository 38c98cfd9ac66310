import RideCore
import RideProtocol

/// What a ride feed yields. After every (re)subscribe the first event is `.state` with the
/// server's fresh snapshot; figures never step back to an older `at`.
///
/// A later minor version may add a case (docs/sdk.md, "Versions and evolution"), so an app's
/// `switch` ends in `@unknown default`. `@nonexhaustive(warn)` (SE-0487, Swift 6.2.3 and
/// later) has the compiler say so to apps that lack one, as a warning, so their code keeps
/// building; older compilers skip the attribute. Switches inside this package stay exhaustive.
#if hasAttribute(nonexhaustive)
@nonexhaustive(warn)
#endif
public enum RideEvent: Sendable, Equatable {
    /// The ride as it is now: the snapshot after subscribing, or a transition (pause, resume).
    case state(RideSnapshot)
    /// Once a second while the ride is riding or paused.
    case tick(RideTick)
    /// Seconds left before the time limit (at 5 minutes and at 1 minute).
    case warning(remaining: Int64)
    /// The rules in force at the ride's position changed: `name` is the deciding zone, nil
    /// where only the operator's global rules (or none) apply. `stationParking` is not sent
    /// and reads false.
    case zone(name: String?, rules: ZoneRules)
    /// The ride ended; the snapshot carries the receipt. The feed finishes after it.
    case ended(RideSnapshot)
}

/// The connection as the client sees it, yielded by `RidePushClient.connectionStates`.
public enum ConnectionState: Sendable, Equatable {
    /// Nothing asked for yet: the client connects on first use.
    case idle
    /// Opening the WebSocket and authenticating; `attempt` counts failures since the last stable connection.
    case connecting(attempt: Int)
    case connected
    /// Disconnected; the next attempt starts after `delay`.
    case waitingToReconnect(delay: Duration, reason: DisconnectReason)
    /// `suspend()` was called; `resume()` reconnects.
    case suspended
    /// For good: nothing more will be sent or received.
    case closed(ClosedReason)
}

/// Why a connection was lost (the client reconnects).
public enum DisconnectReason: Sendable, Equatable {
    /// The server closed the WebSocket (1012 a draining node, 4008 slow consumer, 1006 no close frame, …).
    case closedByServer(code: UInt16, reason: String)
    /// The connection could not be opened (refused, DNS, TLS); the text names the URL.
    case cannotConnect(String)
    /// A ticking ride sent nothing for the watchdog interval (3 s).
    case silent
    /// The WebSocket was not open and authenticated within the connect timeout.
    case connectTimeout
    /// The token provider threw.
    case tokenUnavailable(String)
}

/// Why the client stopped for good.
public enum ClosedReason: Sendable, Equatable {
    /// The token was refused as invalid, or a fresh token from the provider was refused too.
    case unauthorized(String)
    /// `close()` was called.
    case closedByClient
}

/// The server answered a request `unavailable` (its store cannot record now) or `rate_limited`;
/// the client sends it again, same id, after `delay` (1, 2, 4, 8, 16 s). Yielded by
/// `RidePushClient.retries`, so an app can say so at once instead of looking stuck.
public struct RequestRetry: Sendable, Equatable {
    /// The server's answer, with its message.
    public let error: ProtocolError
    /// This retry's number, from 1, and how many there will be at most.
    public let attempt: Int
    public let attempts: Int
    public let delay: Duration

    public init(error: ProtocolError, attempt: Int, attempts: Int, delay: Duration) {
        self.error = error
        self.attempt = attempt
        self.attempts = attempts
        self.delay = delay
    }
}

public enum RidePushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered the request with an error (`ride_not_found`, `invalid_transition`, …).
    case server(ProtocolError)
    /// The client closed for good before the answer came.
    case closed(ClosedReason)
    /// The server answered with a message of another type than the request expects.
    case unexpectedReply(String)
    /// No answer within the request's timeout (`Configuration.requestTimeout` or the call's own),
    /// connected or not. The request is not sent again; a control message already sent may still
    /// have been applied (`get` tells).
    case timedOut(after: Duration)
    /// `report(position:ride:)` was given what the server would refuse (the text says which field).
    case invalidPosition(String)

    public var description: String {
        switch self {
        case .server(let e): return "\(e.code.rawValue): \(e.message)"
        case .closed(.unauthorized(let why)): return "unauthorized: \(why)"
        case .closed(.closedByClient): return "the client was closed"
        case .unexpectedReply(let t): return "unexpected reply \(t)"
        case .invalidPosition(let why): return "invalid position: \(why)"
        case .timedOut(let d):
            let ms = d.millis
            return ms % 1000 == 0 ? "no answer within \(ms / 1000) s" : "no answer within \(ms) ms"
        }
    }
}
