import RideCore

/// One webhook delivery a transition owes: written by the store in the same transaction as the
/// transition it describes (so a crash cannot keep the one and lose the other), one per
/// configured endpoint. The store only keeps the bytes; RideWebhooks makes and sends them.
public struct OutboxEvent: Sendable, Equatable {
    /// "evt_…", the same for every endpoint's copy of one event.
    public let eventID: String
    /// "ride.started", "ride.paused", "ride.resumed", "ride.ended".
    public let type: String
    public let rideID: String
    /// The `--webhook` URL this copy goes to.
    public let endpoint: String
    public let created: UnixMillis
    /// The exact POST body, sent byte for byte on every attempt.
    public let body: [UInt8]

    /// The endpoint of a push intent (docs/push.md): the device-push sender's rows in the same
    /// outbox. Not a URL (WebhookURL takes http and https only), so no webhook is ever sent to it;
    /// the webhook sender's reads leave these rows out and the push sender's read only them.
    public static let pushEndpoint = "push:"

    public init(eventID: String, type: String, rideID: String, endpoint: String, created: UnixMillis, body: [UInt8]) {
        self.eventID = eventID
        self.type = type
        self.rideID = rideID
        self.endpoint = endpoint
        self.created = created
        self.body = body
    }
}

/// Where `MemoryStore` puts the outbox events of the writes it keeps (a `MemoryOutbox`): the
/// memory store has no transaction to share, and a write it keeps is kept whole, so handing its
/// events on as it applies the write is the same promise.
public protocol OutboxSink: AnyObject, Sendable {
    func append(_ events: [OutboxEvent])
    /// Deletes the given-up (dead) deliveries of `rides`, never a row still owed; returns how
    /// many (`MemoryStore.purgeEnded`).
    func purgeDead(rides: Set<String>) -> Int
}

extension StoreWrite {
    /// The outbox events this write carries (none when webhooks are off).
    public var outbox: [OutboxEvent] {
        switch self {
        case .create(let new, _): new.outbox
        case .append(let entry, _): entry.outbox
        case .trace: []
        }
    }
}
