import RideCore

/// Error codes of protocol ride.v1 (docs/protocol.md lists what each means).
public enum ErrorCode: String, Sendable, Equatable {
    case badRequest = "bad_request"
    case unknownType = "unknown_type"
    case rideNotFound = "ride_not_found"
    case invalidTransition = "invalid_transition"
    case conflict
    case tooLarge = "too_large"
    case unavailable
    case unauthorized
    case forbidden
    case rateLimited = "rate_limited"
    case planNotFound = "plan_not_found"
    case tooManySubscriptions = "too_many_subscriptions"
    case tooManyRides = "too_many_rides"
    // Zones (docs/zones.md): the message names the zone.
    case startNotAllowed = "start_not_allowed"
    case endNotAllowed = "end_not_allowed"
    case positionRequired = "position_required"
}

/// An error to send back: the code, a sentence for people, and the request's id if it had one.
public struct ProtocolError: Error, Equatable, Sendable {
    public var code: ErrorCode
    public var message: String
    public var id: String?
    public init(_ code: ErrorCode, _ message: String, id: String? = nil) {
        self.code = code
        self.message = message
        self.id = id
    }
}

/// A decoded client message of ride.v1.
public enum ClientMessage: Sendable, Equatable {
    case start(ride: String?, plan: String?, limit: Int64?)
    case control(RideCommand, ride: String, metres: Int64?)
    case subscribe(ride: String)
    case unsubscribe(ride: String)
    case get(ride: String)
    case quote(plan: String?, seconds: Int64, paused: Int64)
    case auth(token: String)
    case share(ride: String)
    case position(PositionReport)
    /// `register_push` / `unregister_push` (PushMessages.swift).
    case push(PushRequest)

    /// Whether the message changes rides (and is therefore replayed, not re-applied, on retry).
    public var isControl: Bool {
        switch self {
        case .start, .control: return true
        default: return false
        }
    }

    /// Whether the message counts against the per-connection control rate: a quote costs
    /// CPU like a command, so it is limited the same way.
    public var isRateLimited: Bool {
        if case .quote = self { return true }
        // A push registration is a store write: limited like a command.
        if case .push = self { return true }
        return isControl
    }
}

public struct ClientEnvelope: Sendable, Equatable {
    public var id: String?
    public var message: ClientMessage
    /// A `start`'s place and vehicle type, an `end`'s force (ZoneMessages.swift).
    public var zoneFields: ZoneFields? = nil
    public init(id: String?, message: ClientMessage, zoneFields: ZoneFields? = nil) {
        self.id = id
        self.message = message
        self.zoneFields = zoneFields
    }
}

public enum ClientCodec {
    public static let maxIDLength = 64
    public static let maxRideIDLength = 64
    /// Largest value of an integer field (limit, seconds, paused, distance): see InputBounds.
    public static let maxIntValue: Int64 = InputBounds.maxQuantity

    /// Decodes one text frame. Errors carry the request id when it could be read.
    public static func decode(_ bytes: some Collection<UInt8>) -> Result<ClientEnvelope, ProtocolError> {
        let json: JSON
        do { json = try JSON.parse(bytes) } catch {
            return .failure(ProtocolError(.badRequest, "message is not valid JSON (\(error.reason) at byte \(error.offset))"))
        }
        guard case .object(let o) = json else {
            return .failure(ProtocolError(.badRequest, "message must be a JSON object"))
        }
        var id: String?
        if let raw = o["id"] {
            guard let s = raw.string, !s.isEmpty, s.utf8.count <= maxIDLength else {
                return .failure(ProtocolError(.badRequest, "\"id\" must be a non-empty string of at most \(maxIDLength) bytes"))
            }
            id = s
        }
        do {
            return .success(ClientEnvelope(id: id, message: try message(o), zoneFields: try zoneFields(o, type: o["type"]?.string ?? "")))
        } catch {
            var e = error
            e.id = id
            return .failure(e)
        }
    }

    static func message(_ o: [String: JSON]) throws(ProtocolError) -> ClientMessage {
        guard let typeValue = o["type"] else { throw ProtocolError(.badRequest, "missing \"type\"") }
        guard let type = typeValue.string else { throw ProtocolError(.badRequest, "\"type\" must be a string") }
        switch type {
        case "start":
            let limit = try optionalInt(o, "limit", min: 1)
            return .start(ride: try rideID(o, required: false), plan: try optionalString(o, "plan"), limit: limit)
        case "pause": return .control(.pause, ride: try rideID(o)!, metres: nil)
        case "resume": return .control(.resume, ride: try rideID(o)!, metres: nil)
        case "end": return .control(.end, ride: try rideID(o)!, metres: try optionalInt(o, "distance", min: 0))
        case "subscribe": return .subscribe(ride: try rideID(o)!)
        case "unsubscribe": return .unsubscribe(ride: try rideID(o)!)
        case "get": return .get(ride: try rideID(o)!)
        case "share": return .share(ride: try rideID(o)!)
        case "position": return .position(try position(o))
        case "register_push": return .push(try pushRequest(o, .register))
        case "unregister_push": return .push(try pushRequest(o, .unregister))
        case "quote":
            guard let seconds = try optionalInt(o, "seconds", min: 0) else {
                throw ProtocolError(.badRequest, "\"seconds\" is required (whole seconds of riding)")
            }
            return .quote(plan: try optionalString(o, "plan"), seconds: seconds, paused: try optionalInt(o, "paused", min: 0) ?? 0)
        case "auth":
            guard let t = try optionalString(o, "token") else { throw ProtocolError(.badRequest, "\"token\" is required") }
            return .auth(token: t)
        default:
            throw ProtocolError(.unknownType, "unknown message type \"\(type.prefix(40))\"")
        }
    }

    static func rideID(_ o: [String: JSON], required: Bool = true) throws(ProtocolError) -> String? {
        guard let v = o["ride"] else {
            if required { throw ProtocolError(.badRequest, "missing \"ride\"") }
            return nil
        }
        guard let s = v.string else { throw ProtocolError(.badRequest, "\"ride\" must be a string") }
        guard isValidRideID(s) else {
            throw ProtocolError(.badRequest, "\"ride\" must be 1-\(maxRideIDLength) characters of A-Z a-z 0-9 - _ . :")
        }
        return s
    }

    /// Ride ids travel in URLs and logs, so they are restricted to a safe alphabet.
    /// "." and ".." are refused although their characters are allowed: in a URL path they are
    /// dot segments, resolved away before any route sees them, so such a ride could be made
    /// and never addressed (`/rides/..` is the page).
    public static func isValidRideID(_ s: String) -> Bool {
        s != "." && s != ".." && !s.isEmpty && s.utf8.count <= maxRideIDLength && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == UInt8(ascii: "-") || c == UInt8(ascii: "_") || c == UInt8(ascii: ".") || c == UInt8(ascii: ":")
        }
    }

    static func optionalString(_ o: [String: JSON], _ k: String) throws(ProtocolError) -> String? {
        guard let v = o[k], v != .null else { return nil }
        guard let s = v.string, !s.isEmpty, s.utf8.count <= 4096 else {
            throw ProtocolError(.badRequest, "\"\(k)\" must be a non-empty string")
        }
        return s
    }

    static func optionalInt(_ o: [String: JSON], _ k: String, min: Int64) throws(ProtocolError) -> Int64? {
        guard let v = o[k], v != .null else { return nil }
        guard let n = v.int, n >= min else {
            throw ProtocolError(.badRequest, "\"\(k)\" must be a whole number ≥ \(min)")
        }
        guard n <= maxIntValue else {
            throw ProtocolError(.badRequest, "\"\(k)\" must be at most \(maxIntValue)")
        }
        return n
    }
}
