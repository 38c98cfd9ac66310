import RideAuth
import RideCore
import RideProtocol
import RideStore

/// Who is waiting for a store worker's answer: a session (by serial) on a service thread.
struct Requester: Sendable, Equatable {
    let shard: Int
    let session: UInt64
}

/// What a service thread does with an answer once the worker has it.
enum Continuation: Sendable {
    /// Handle this message now (its ride is in memory, or known not to exist).
    case message(ClientEnvelope)
    /// Send these bytes (a reply made earlier that must not overtake replies still on their way).
    case bytes([UInt8])
    /// Answer `GET /rides/{id}` on the connection waiting under `token` (and, if the token
    /// allows the ride, have the journal read when `journal`).
    case http(token: UInt64, claims: TokenClaims?, journal: Bool)
    /// Handle this operator request now (OpsRequests.swift).
    case ops(OpsRequest)
    /// Nothing to send: the job (a position report) needed no answer, only its turn.
    case nothing
}

/// Work for the store worker thread, from any thread.
enum StoreJob: Sendable {
    /// A control request (start, pause, resume, end): decided, committed, then answered.
    /// `geo`: a start's place and vehicle type, an end's `force` (issue 28).
    case request(RideBook.Request, id: String?, scope: String, access: Access?, from: Requester, geo: ZoneFields? = nil)
    /// A device's position: counted (or not) by the store worker's GeoDesk, answered only
    /// when refused; its turn is handed back (`.nothing`) so the connection's bound holds.
    case position(PositionReport, id: String?, access: Access?, from: Requester)
    /// A limit passed at the tick at `at`.
    case autoEnd(String, at: UnixMillis)
    /// Reads a ride not in memory from the store (if `ride` is given), then hands `then`
    /// back in order with everything else the worker answers that session.
    case lookup(String?, from: Requester, then: Continuation)
    /// Forgets replies older than `before` (its own transaction).
    case prune(before: UnixMillis)
    /// Other nodes wrote to the shared store (ClusterFeed): read the hinted rides' new
    /// entries (ride → highest seq notified) and, with `catchUp`, the journal after the
    /// cursor; apply them before deciding anything else of the group.
    case cluster(hints: [String: Int64], catchUp: Bool)
    /// An operator view read from the store (journal, listing; OpsRequests.swift): answered
    /// in turn to the session, or to the HTTP connection waiting under `http`.
    case read(from: Requester, http: UInt64?, work: @Sendable (RideStore, RideRegistry) -> OpsAnswer)
}

/// Where the registry sends jobs: the store worker, or a queue a unit test runs by hand.
protocol StoreJobSink: AnyObject, Sendable {
    func submit(_ jobs: [StoreJob])
}

extension StoreWorker: StoreJobSink where Client.Job == StoreJob {}
