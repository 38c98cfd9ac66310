import CLibWebSockets
import RideService

/// Replies written without a WRITEABLE round trip each, several frames in one send.
///
/// Why: through WRITEABLE, a reply the mailbox drain queues asks for it (a POLLOUT change, one
/// `epoll_ctl`), the loop polls again, lws calls back, one `lws_write` (one `send`), lws drops
/// POLLOUT (another `epoll_ctl`): 1.27 `epoll_ctl` and one `send` per reply on the service
/// threads of the transition bench, although with two requests in flight per connection both
/// replies usually come in one group, so one drain.
///
/// So the drain only queues (`replied`), and once it has handled every event it writes each
/// replied session's queued frames itself (`flushReplied`), all of them framed here into one
/// buffer and handed to lws as raw bytes: one `send`, no POLLOUT change. The same framing
/// serves a WRITEABLE callback that finds several frames queued (`writeOutbox`).
///
/// Only where `writesDirectly` holds (TCP or TLS on its own connection: TickStaging.swift says
/// why that is safe outside a WRITEABLE callback); elsewhere lws must frame every message
/// itself (an HTTP/2 stream's frames and credit). Order is kept: the frames are the outbox's
/// head in order; nothing is written while lws still holds unsent bytes of this connection
/// (`lws_partial_buffered`: then WRITEABLE drains them first) or while a ping or a close is
/// due (those go first, from WRITEABLE); a tick that came during the drain found the outbox
/// non-empty and waits as pending, written after. A server's frames are not masked, so a
/// frame is a 2-, 4- or 10-byte header and the payload as queued.
extension Shard {
    /// Most bytes framed into one send; a bigger frame goes alone (lws keeps what the socket
    /// does not take and flushes it before the next WRITEABLE callback).
    static let batchLimit = 16 * 1024

    /// `s` got a reply in this drain: its outbox is written at the end of the drain.
    func replied(_ s: Session) {
        if s.flushQueued { return }
        s.flushQueued = true
        repliedInDrain.append(s)
    }

    /// At the end of a mailbox drain: writes what the replied sessions queued, and asks for
    /// WRITEABLE for whatever must still wait.
    func flushReplied() {
        if repliedInDrain.isEmpty { return }
        for s in repliedInDrain {
            s.flushQueued = false
            // Closed meanwhile (its place now empty or another's): nothing to write to.
            guard sessions[s.serial] === s else { continue }
            if s.echo == nil, canWriteNow(s) {
                if writeOutbox(s) < 0 {
                    // Outside its callback we cannot return -1: lws closes it on its next service.
                    lws_set_timeout(s.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                    continue
                }
            }
            if s.hasOutbox || s.pendingTicks > 0 || s.closing != nil || s.pingDue { lws_callback_on_writable(s.wsi) }
        }
        repliedInDrain.removeAll(keepingCapacity: true)
    }

    /// Frames the outbox's head (up to `batchLimit` bytes, and up to a fleet-frame marker,
    /// which WRITEABLE writes) into one buffer and writes it with one `lws_write`. Only for a
    /// session that `writesDirectly`. Returns -1 when the socket failed, else 0.
    func writeOutbox(_ s: Session) -> Int32 {
        var used = 0
        while s.hasOutbox {
            let n = s.outbox.frames[s.outbox.head].count - pre
            if n < 0 { break }  // Shard.fleetFrameMarker (empty)
            let room = Self.frameHeaderLength(n) + n
            if used > 0, used + room > Self.batchLimit { break }
            reserveBatch(pre + used + room)
            used += s.outbox.frames[s.outbox.head].withUnsafeBufferPointer { f in
                Self.frame(f.baseAddress! + pre, n, into: batch + pre + used)
            }
            s.dropOutboxHead()
        }
        if used == 0 { return 0 }
        // As raw bytes (lws's HTTP write type is its raw write on a WebSocket): the frames are made.
        if lws_write(s.wsi, batch + pre, used, LWS_WRITE_HTTP) < used { return -1 }
        s.wrote()
        return 0
    }

    private func reserveBatch(_ n: Int) {
        if n <= batchSize { return }
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: max(n, batchSize * 2))
        bigger.update(from: batch, count: batchSize)
        batch.deallocate()
        batch = bigger
        batchSize = max(n, batchSize * 2)
    }

    /// Bytes of the header of an unmasked frame of `n` payload bytes (RFC 6455 5.2).
    static func frameHeaderLength(_ n: Int) -> Int { n < 126 ? 2 : n <= 0xFFFF ? 4 : 10 }

    /// Writes one final, unmasked text frame of `payload` (`n` bytes) at `out`; returns the
    /// bytes written (header and payload).
    static func frame(_ payload: UnsafePointer<UInt8>, _ n: Int, into out: UnsafeMutablePointer<UInt8>) -> Int {
        out[0] = 0x81  // FIN, text
        var h = 2
        if n < 126 {
            out[1] = UInt8(n)
        } else if n <= 0xFFFF {
            out[1] = 126
            out[2] = UInt8(n >> 8)
            out[3] = UInt8(n & 0xFF)
            h = 4
        } else {
            out[1] = 127
            for i in 0..<8 { out[2 + i] = UInt8((UInt64(n) >> (56 - 8 * UInt64(i))) & 0xFF) }
            h = 10
        }
        (out + h).update(from: payload, count: n)
        return h + n
    }
}
