import Foundation
import RideCore
import RideStore
import Synchronization

/// What /healthz checks, each a moment something last proved it works: the ticker's last
/// tick, each service thread's last loop iteration, and the store's own record of itself.
package enum Health {
    /// A tick or a thread's loop older than this is a stall: ticks are due every second and
    /// every thread is woken at least once a second (the tick batch), so 5 s is four missed
    /// seconds, beyond what a loaded machine's scheduling delay explains. The same bound
    /// applies to a store group or log sync in flight (a disk stuck in fsync).
    package static let stallMillis: Int64 = 5_000

    /// /healthz's status word and whether it is served 200: a draining node (SIGTERM, a
    /// rolling restart) answers `draining` with 503 however healthy it is, so a load balancer
    /// stops sending it anything new while its open connections are closed.
    package static func status(healthy: Bool, draining: Bool) -> (ok: Bool, word: String) {
        if draining { return (false, "draining") }
        return healthy ? (true, "ok") : (false, "degraded")
    }

    /// The store's word: what its worker recorded (`stalled`: a group or a sync in flight
    /// longer than `stallMillis`; `failing`: its last answer, to a commit or to the worker's
    /// own probe, was a failure), or while a PostgreSQL store's connection is down
    /// `unreachable` (one server) or `failing over` (a multi-host URI). The connection's word
    /// wins over `stalled`: a group whose COMMIT lost its connection waits on the worker
    /// thread for a primary to settle it on, and that is a failover, not a stuck disk.
    /// Never a guess from request outcomes: the worker probes a failing store itself, so this
    /// turns `ok` again without any client's write.
    package static func store(_ health: StoreHealth, connection: ConnectionHealth?) -> String {
        if let connection, !connection.isUp { return connection.downWord }
        return health.state(stallMillis: stallMillis).rawValue
    }

    /// `"store_ages_ms"`: how long the current group and log sync have been in flight and how
    /// long ago the store last answered and last failed (null: never, or not in flight), so an
    /// operator sees a sync at 7 s, not only the word. Ages only: a failure's message names
    /// paths and hosts, which /healthz (public) does not show; the log has it.
    package static func writeStoreAges(_ health: StoreHealth, into w: inout JSONWriter) {
        let r = health.snapshot
        let now = health.clock()
        w.key("store_ages_ms")
        w.beginObject()
        w.field("commit_in_flight", r.commitSince.map { now - $0 })
        w.field("sync_in_flight", r.syncSince.map { now - $0 })
        w.field("last_success", r.lastSuccess.map { now - $0 })
        w.field("last_failure", r.lastFailure.map { now - $0 })
        w.endObject()
    }
}

/// Test-only faults, compiled into debug builds only and off unless the variable is set:
/// `RIDEPUSH_FAULT_STALL_TICKER=N:S` blocks service thread 0 for S seconds in tick round N,
/// so the integration tests can watch /healthz report a stalled ticker and thread.
package enum Faults {
    #if DEBUG
    static let stallTicker: (round: Int, seconds: UInt32)? = {
        guard let v = ProcessInfo.processInfo.environment["RIDEPUSH_FAULT_STALL_TICKER"] else { return nil }
        let parts = v.split(separator: ":")
        guard parts.count == 2, let r = Int(parts[0]), let s = UInt32(parts[1]) else { return nil }
        return (r, s)
    }()
    #endif

    /// Called by the ticker each round on thread 0.
    package static func tickRound(_ round: Int) {
        #if DEBUG
        if let f = stallTicker, f.round == round { sleep(f.seconds) }
        #endif
    }
}
