import CLibWebSockets

extension Shard {
    // A tick written from the fan-out itself (lws_write at once when lws_partial_buffered is 0,
    // plain TCP only) cost less CPU per tick (1.32x -> 1.09x the floor, side by side) but made
    // fan-out latency 2-2.5x worse at 2,000 and 19,000 subscribers (BENCHMARKS.md, issue 16), so
    // ticks keep the WRITEABLE path; see git history for the direct write.

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
}
