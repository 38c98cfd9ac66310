import RideAuth
import RideCore
import RideProtocol
import RideStore

/// Who is waiting for a store worker's answer: a session (by serial) on a service thread.
package struct Requester: Sendable, Equatable {
    package let shard: Int
    let session: UInt64
    /// A server API request waiting on this shard under this token (session 0): answered over HTTP.
    package var http: UInt64? = nil

    package init(shard: Int, session: UInt64, http: UInt64? = nil) {
        self.shard = shard
        self.session = session
        self.http = http
    }
}

/// What a service thread does with an answer once the worker has it.
package enum Continuation: Sendable {
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
package enum StoreJob: Sendable {
    /// A control request (start, pause, resume, end): decided, committed, then answered.
    /// `geo`: a start's place and vehicle type, an end's `force` (issue 28).
    case request(RideBook.Request, id: String?, scope: String, access: Access?, from: Requester, geo: ZoneFields? = nil)
    /// A server API request (ServerAPIRoutes.swift): decided like `.request`, answered over HTTP.
    case api(ServerAPICall, from: Requester)
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
    /// One batch of `--retain-ended`: ended rides older than `before` deleted (its own
    /// transaction), counted by the `Retention` that asked (Retention.swift).
    case purge(Retention, before: UnixMillis)
    /// Other nodes wrote to the shared store (PostgresClusterFeed): read the hinted rides' new
    /// entries (ride → highest seq notified) and, with `catchUp`, the journal after the
    /// cursor; apply them before deciding anything else of the group.
    case cluster(hints: [String: Int64], catchUp: Bool)
    /// An operator view read from the store (journal, listing; OpsRequests.swift): answered
    /// in turn to the session, or to the HTTP connection waiting under `http`.
    case read(from: Requester, http: UInt64?, work: @Sendable (RideStore, RideRegistry) -> OpsAnswer)
    /// A `.request` or `.api` the store refused because another node had moved the ride
    /// first, decided again on the store's state (`attempt`: how many times before).
    indirect case decideAgain(StoreJob, attempt: Int)
}

/// Where the registry sends jobs: the store worker, or a queue a unit test runs by hand.
package protocol StoreJobSink: AnyObject, Sendable {
    func submit(_ jobs: [StoreJob])
}

extension StoreWorker: StoreJobSink where Client.Job == StoreJob {}
