/// An /echo connection's messages waiting to be sent back (EchoEndpoint.swift).
package final class EchoQueue {
    /// Largest message it takes; a bigger one closes the connection with 1009.
    package let limit: Int
    /// Messages to send back, LWS_PRE bytes in front, in order.
    package var frames: [(binary: Bool, bytes: [UInt8])] = []
    package var head = 0
    /// Bytes waiting in `frames`: past twice the limit reading stops, so a peer that sends
    /// without reading holds at most that much here.
    package var queued = 0
    package var readingPaused = false

    package init(limit: Int) { self.limit = limit }

    package var isEmpty: Bool { head == frames.count }
}
