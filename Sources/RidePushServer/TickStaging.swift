import RideService
import CLibWebSockets

extension Shard {
    /// Copies an encoded tick (LWS_PRE room in front) into this thread's staging buffer, where
    /// lws may write the frame header in front of it; returns the payload length.
    func stage(_ frame: [UInt8]) -> Int {
        if frame.count > stagingSize {
            staging.deallocate()
            stagingSize = frame.count * 2
            staging = .allocate(capacity: stagingSize)
        }
        frame.withUnsafeBufferPointer { staging.update(from: $0.baseAddress!, count: $0.count) }
        return frame.count - pre
    }

    /// Copies ride `k`'s tick of `batch` into the staging buffer (LWS_PRE room in front);
    /// returns its length.
    func stage(_ batch: TickBatch, _ k: Int) -> Int {
        let r = batch.range(k)
        if pre + r.count > stagingSize {
            staging.deallocate()
            stagingSize = (pre + r.count) * 2
            staging = .allocate(capacity: stagingSize)
        }
        (staging + pre).update(from: batch.frames.base + r.lowerBound, count: r.count)
        return r.count
    }

    /// Writes the staged tick (`n` payload bytes) from the fan-out itself when nothing can be
    /// ahead of it, instead of asking lws for a WRITEABLE callback: that round trip (a POLLOUT
    /// change, a poll() over every socket, a callback, another POLLOUT change) cost more than
    /// the send it leads to. One staging serves every subscriber of the ride: lws writes the
    /// same header in front each time and leaves a server's (unmasked) payload as it is.
    ///
    /// Safe on plain TCP (lws 4.1): lws_write hands the frame to one send(); what the kernel does
    /// not take lws keeps on the connection's own buffer list, asks for POLLOUT itself and flushes
    /// it before any later WRITEABLE callback, and the next tick then sees lws_partial_buffered
    /// and waits for WRITEABLE (coalescing and the slow-consumer clock as before). Replies, a
    /// ping or a close keep their order because a session holding any takes the WRITEABLE path.
    /// The same holds over TLS on its own connection: lws_write goes to one SSL_write, and what
    /// OpenSSL cannot send now (WANT_WRITE, or WANT_READ mid-handshake) lws keeps whole on the
    /// same buffer list and retries from WRITEABLE (lws sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
    /// for that retry). Measured (BENCHMARKS.md, TLS): the WRITEABLE round trip per tick was a
    /// large part of what wss cost over ws. Only a WebSocket that is a stream of an HTTP/2
    /// connection (RFC 8441, what Chromium may use on an https page) always takes WRITEABLE: its
    /// frames and flow-control credit lws manages only from its writable callbacks.
    ///
    /// This once cost 2-3x the fan-out latency, which was not the writes: lws's timer service
    /// computes the next poll() timeout from the time it read before the tick callback ran, so
    /// a fan-out done inside that callback delayed the next tick by its own length (Ticker.fire
    /// now wakes the loop). Returns false when the tick must wait for WRITEABLE instead.
    func writeStagedTick(_ s: Session, _ n: Int) -> Bool {
        guard !s.hasOutbox, canWriteNow(s) else { return false }
        if lws_write(s.wsi, staging + pre, n, LWS_WRITE_TEXT) < n {
            // The socket is gone; outside its callback we cannot return -1, so lws closes it on
            // its next service.
            lws_set_timeout(s.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            return true
        }
        ticksWritten += 1
        s.lastTick = tickTime
        return true
    }

    /// A write made now, outside a WRITEABLE callback, would be next on the wire: TCP or TLS on
    /// its own connection, nothing lws still holds, no ping or close that must go first. Ticks
    /// (here) and replies (ReplyWrites.swift) both ask it; each adds what else it must not pass.
    func canWriteNow(_ s: Session) -> Bool {
        s.writesDirectly && s.closing == nil && !s.pingDue && lws_partial_buffered(s.wsi) == 0
    }
}
