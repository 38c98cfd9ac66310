import CLibWebSockets
import RideService

/// What a session asks of lws: a WRITEABLE callback once it has something to write.
extension Session {
    /// The lws connection: the handle is its address (LwsCallback's ESTABLISHED), and lws's user data maps it back.
    var wsi: OpaquePointer { OpaquePointer(bitPattern: handle.bits)! }

    /// Queues a frame and asks for WRITEABLE; false (nothing queued) when the outbox and the
    /// pending ticks are at the bound: the caller closes the connection as a slow consumer.
    func enqueue(_ frame: [UInt8]) -> Bool {
        guard queue(frame) else { return false }
        lws_callback_on_writable(wsi)
        return true
    }

    func close(code: UInt16, reason: String) {
        guard closing == nil else { return }
        rareBox().closing = Closing(code: code, reason: reason)
        lws_callback_on_writable(wsi)
    }
}
