import RideService
import CLibWebSockets

/// `--ws-echo BYTES` (tests only, off by default): a WebSocket at `/echo` that sends every
/// complete text or binary message back. It exists so the Autobahn conformance cases
/// (tests/test_autobahn.py) exercise RidePush's own receive path: the same fragment
/// reassembly, size limit (BYTES instead of --max-frame), lws UTF-8 validation, close
/// handling and incomplete-message timeout as /ws. Without the flag /echo is a 404 as before.
extension Shard {
    /// A complete message on an echo connection (LwsCallback.receive: reassembled and within the limit).
    func echo(_ s: Session, _ e: EchoQueue, binary: Bool) {
        var frame = [UInt8](repeating: 0, count: pre)
        frame.reserveCapacity(pre + s.rx.count)
        frame += s.rx
        e.frames.append((binary, frame))
        e.queued += s.rx.count
        if e.queued > 2 * e.limit, !e.readingPaused {
            e.readingPaused = true
            lws_rx_flow_control(s.wsi, 0)
        }
        lws_callback_on_writable(s.wsi)
    }

    /// Writes the oldest echo (one lws_write per WRITEABLE; lws itself holds what the socket
    /// does not take yet). Returns -1 to close.
    func writeEcho(_ s: Session, _ e: EchoQueue) -> Int32 {
        var f = e.frames[e.head]
        e.frames[e.head].bytes = []
        e.head += 1
        if e.isEmpty {
            e.frames.removeAll(keepingCapacity: false)
            e.head = 0
        }
        e.queued -= f.bytes.count - pre
        if e.readingPaused, e.queued <= e.limit {
            e.readingPaused = false
            lws_rx_flow_control(s.wsi, 1)
        }
        let pre = self.pre
        return f.bytes.withUnsafeMutableBufferPointer { p in
            let n = p.count - pre
            return lws_write(s.wsi, p.baseAddress! + pre, n, f.binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) < n ? -1 : 0
        }
    }
}
