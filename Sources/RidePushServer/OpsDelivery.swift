import CLibWebSockets
import RideService

extension Shard: OpsHost {}

extension Shard {
    /// Writes the slot's fleet frame for the marker just taken from `s`'s outbox.
    func writeFleetFrame(_ s: Session) -> Int32 {
        let slot = opsSlot
        guard let w = slot.watchers[ObjectIdentifier(s)] else { return 0 }
        w.frameQueued = false
        guard let frame = slot.frame.frame, frame.count > pre else { return 0 }
        let n = stage(frame)
        if lws_write(s.wsi, staging + pre, n, LWS_WRITE_TEXT) < n { return -1 }
        ticksWritten += 1
        s.lastTick = tickTime
        return 0
    }
}
