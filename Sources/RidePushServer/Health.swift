import Foundation
import Synchronization

/// What /healthz checks, each a moment something last proved it works: the ticker's last
/// tick, each service thread's last loop iteration, the store's last write.
enum Health {
    /// A tick or a thread's loop older than this is a stall: ticks are due every second and
    /// every thread is woken at least once a second (the tick batch), so 5 s is four missed
    /// seconds, beyond what a loaded machine's scheduling delay explains.
    static let stallMillis: Int64 = 5_000
}

/// Test-only faults, compiled into debug builds only and off unless the variable is set:
/// `RIDEPUSH_FAULT_STALL_TICKER=N:S` blocks service thread 0 for S seconds in tick round N,
/// so the integration tests can watch /healthz report a stalled ticker and thread.
enum Faults {
    #if DEBUG
    static let stallTicker: (round: Int, seconds: UInt32)? = {
        guard let v = ProcessInfo.processInfo.environment["RIDEPUSH_FAULT_STALL_TICKER"] else { return nil }
        let parts = v.split(separator: ":")
        guard parts.count == 2, let r = Int(parts[0]), let s = UInt32(parts[1]) else { return nil }
        return (r, s)
    }()
    #endif

    /// Called by the ticker each round on thread 0.
    static func tickRound(_ round: Int) {
        #if DEBUG
        if let f = stallTicker, f.round == round { sleep(f.seconds) }
        #endif
    }
}
