import COpenSSL
import RideCore
import RideStore

/// What happened to a ride, as a webhook's `type`. One event per committed transition,
/// auto-ends included.
public enum WebhookEventType: String, Sendable, Equatable, CaseIterable {
    case started = "ride.started"
    case paused = "ride.paused"
    case resumed = "ride.resumed"
    case ended = "ride.ended"
}

/// One webhook event: `{"id":"evt_…","type":"ride.…","created":<unix ms>,"ride":{…}}`.
/// The body is made once, when the transition commits, and stored in the outbox as bytes:
/// every attempt sends the same bytes, so a receiver's dedup on `id` and its signature check
/// see one event however often it is retried.
public struct WebhookEvent: Sendable, Equatable {
    public let id: String
    public let type: WebhookEventType
    public let rideID: String
    public let created: UnixMillis
    /// The ride as `GET /rides/{id}` returns it (the receipt on `ride.ended`): a JSON object,
    /// encoded by the caller, which owns that document's shape.
    public let ride: [UInt8]

    public init(id: String = WebhookEvent.newID(), type: WebhookEventType, rideID: String, created: UnixMillis, ride: [UInt8]) {
        precondition(ride.first == UInt8(ascii: "{") && ride.last == UInt8(ascii: "}"), "a webhook's ride is a JSON object")
        self.id = id
        self.type = type
        self.rideID = rideID
        self.created = created
        self.ride = ride
    }

    /// The POST body, keys in a fixed order.
    public func body() -> [UInt8] {
        var w = JSONWriter(reserving: ride.count + 96)
        w.beginObject()
        w.field("id", id)
        w.field("type", type.rawValue)
        w.field("created", created)
        w.key("ride")
        w.raw(ride)
        w.endObject()
        return w.bytes
    }

    /// What a transition's store write carries (`NewRide.outbox`, `JournalEntry.outbox`): one
    /// copy of this event per endpoint, each delivered and ordered on its own.
    public func outboxEvents(endpoints: [String]) -> [OutboxEvent] {
        let bytes = body()
        return endpoints.map {
            OutboxEvent(eventID: id, type: type.rawValue, rideID: rideID, endpoint: $0, created: created, body: bytes)
        }
    }

    /// "evt_" and 24 hex digits from OpenSSL's CSPRNG: unguessable, so a receiver may use it
    /// as its idempotency key without a sender being able to collide with another's events.
    public static func newID() -> String {
        var bytes = [UInt8](repeating: 0, count: 12)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        guard ok == 1 else { fatalError("RAND_bytes failed") }
        return "evt_" + hex(bytes)
    }
}

func hex(_ bytes: [UInt8]) -> String { Hex.lower(bytes) }
