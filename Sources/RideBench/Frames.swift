/// Minimal RFC 6455 framing for a client: parse server frames out of a receive buffer
/// (frames may be split across reads, or several may arrive in one read) and build
/// masked client frames. No allocation on the receive path.
public enum WSOpcode {
    public static let continuation: UInt8 = 0x0
    public static let text: UInt8 = 0x1
    public static let binary: UInt8 = 0x2
    public static let close: UInt8 = 0x8
    public static let ping: UInt8 = 0x9
    public static let pong: UInt8 = 0xA
}

public enum FrameHeader: Equatable {
    /// A complete frame is in the buffer: payload starts at `headerLength`.
    case frame(opcode: UInt8, fin: Bool, masked: Bool, headerLength: Int, payloadLength: Int)
    /// Not enough bytes yet for the header or the payload.
    case needMore
    /// Larger than the receive buffer can ever hold (the tick server never sends these).
    case tooLarge(Int)
}

/// Looks at the frame at the start of `bytes`.
public func parseFrameHeader(_ bytes: UnsafeRawBufferPointer, maxFrame: Int) -> FrameHeader {
    let n = bytes.count
    guard n >= 2 else { return .needMore }
    let b0 = bytes[0], b1 = bytes[1]
    var payload = Int(b1 & 0x7F)
    var header = 2
    if payload == 126 {
        guard n >= 4 else { return .needMore }
        payload = Int(bytes[2]) << 8 | Int(bytes[3])
        header = 4
    } else if payload == 127 {
        guard n >= 10 else { return .needMore }
        var v: UInt64 = 0
        for i in 2..<10 { v = v << 8 | UInt64(bytes[i]) }
        guard v <= UInt64(maxFrame) else { return .tooLarge(Int(clamping: v)) }
        payload = Int(v)
        header = 10
    }
    let masked = b1 & 0x80 != 0
    if masked { header += 4 }  // servers must not mask; tolerated and counted by the caller
    if header + payload > maxFrame { return .tooLarge(header + payload) }
    guard n >= header + payload else { return .needMore }
    return .frame(opcode: b0 & 0x0F, fin: b0 & 0x80 != 0, masked: masked,
                  headerLength: header, payloadLength: payload)
}

/// Calls `onFrame(opcode, payload)` for every complete frame at the front of `buffer`
/// and returns how many bytes were consumed (the caller keeps the tail for the next
/// read), or nil when a frame can never fit in `maxFrame` bytes. A masked server frame
/// is unmasked in place. `onFrame` returns false to stop early (e.g. after a close).
public func consumeFrames(_ buffer: UnsafeMutableRawBufferPointer, maxFrame: Int,
                          _ onFrame: (UInt8, UnsafeRawBufferPointer) -> Bool) -> Int? {
    var off = 0
    while off < buffer.count {
        let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[off...])
        switch parseFrameHeader(UnsafeRawBufferPointer(rest), maxFrame: maxFrame) {
        case .needMore:
            return off
        case .tooLarge:
            return nil
        case let .frame(opcode, _, masked, h, len):
            let payload = UnsafeMutableRawBufferPointer(rebasing: rest[h..<(h + len)])
            if masked {
                let key = (rest[h - 4], rest[h - 3], rest[h - 2], rest[h - 1])
                for i in 0..<len {
                    let k: UInt8
                    switch i & 3 { case 0: k = key.0; case 1: k = key.1; case 2: k = key.2; default: k = key.3 }
                    payload[i] ^= k
                }
            }
            off += h + len
            if !onFrame(opcode, UnsafeRawBufferPointer(payload)) { return off }
        }
    }
    return off
}

/// A masked client frame (FIN set) with the given 4-byte masking key.
public func maskedFrame(opcode: UInt8, payload: some Collection<UInt8>, mask: UInt32) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(payload.count + 14)
    appendMaskedFrame(opcode: opcode, payload: payload, mask: mask, to: &out)
    return out
}

/// Appends a masked client frame (FIN set) to `out`: a pipelining client writes several
/// into one buffer, with no array per frame.
public func appendMaskedFrame(opcode: UInt8, payload: some Collection<UInt8>, mask: UInt32, to out: inout [UInt8]) {
    out.append(0x80 | opcode)
    let n = payload.count
    if n < 126 {
        out.append(0x80 | UInt8(n))
    } else if n <= 0xFFFF {
        out.append(0x80 | 126)
        out.append(UInt8(n >> 8)); out.append(UInt8(n & 0xFF))
    } else {
        out.append(0x80 | 127)
        for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8((UInt64(n) >> UInt64(s)) & 0xFF)) }
    }
    for s in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: mask >> UInt32(s))) }
    var i: UInt32 = 0
    for b in payload {
        out.append(b ^ UInt8(truncatingIfNeeded: mask >> (24 - 8 * (i & 3))))
        i &+= 1
    }
}
