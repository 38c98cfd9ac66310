import Testing
@testable import RideBench

/// Server frame: FIN + opcode, unmasked, with 7/16/64-bit length as needed.
private func serverFrame(_ opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
    var f: [UInt8] = [0x80 | opcode]
    if payload.count < 126 {
        f.append(UInt8(payload.count))
    } else if payload.count <= 0xFFFF {
        f += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
    } else {
        f.append(127)
        for s in stride(from: 56, through: 0, by: -8) { f.append(UInt8((payload.count >> s) & 0xFF)) }
    }
    return f + payload
}

/// Feeds `stream` in chunks of `chunk` bytes into a receive buffer, like successive reads,
/// and returns the frames seen in order.
private func feed(_ stream: [UInt8], chunk: Int, maxFrame: Int = 1 << 20) -> [(UInt8, [UInt8])] {
    var buffer: [UInt8] = []
    var frames: [(UInt8, [UInt8])] = []
    var i = 0
    while i < stream.count {
        buffer += stream[i..<min(stream.count, i + chunk)]
        i += chunk
        let consumed = buffer.withUnsafeMutableBytes { b in
            consumeFrames(b, maxFrame: maxFrame) { op, p in frames.append((op, Array(p))); return true }
        }
        buffer.removeFirst(consumed!)
    }
    #expect(buffer.isEmpty)
    return frames
}

@Suite struct FrameTests {
    let tick = Array(#"{"type":"tick","ride":"r1","state":"riding","elapsed":3,"fare":500,"currency":"KRW","seq":7,"at":1764430000000}"#.utf8)

    @Test func oneFrameInOneRead() {
        let frames = feed(serverFrame(WSOpcode.text, tick), chunk: 4096)
        #expect(frames.count == 1)
        #expect(frames[0].0 == WSOpcode.text)
        #expect(frames[0].1 == tick)
    }

    @Test func frameSplitAcrossReads() {
        for chunk in [1, 2, 3, 7, 50] {
            let frames = feed(serverFrame(WSOpcode.text, tick), chunk: chunk)
            #expect(frames.count == 1, "chunk \(chunk)")
            #expect(frames.first?.1 == tick)
        }
    }

    @Test func severalFramesInOneRead() {
        let stream = serverFrame(WSOpcode.text, tick) + serverFrame(WSOpcode.ping, [1, 2]) + serverFrame(WSOpcode.text, Array("x".utf8))
        let frames = feed(stream, chunk: stream.count)
        #expect(frames.map(\.0) == [WSOpcode.text, WSOpcode.ping, WSOpcode.text])
        #expect(frames[1].1 == [1, 2])
        #expect(frames[2].1 == Array("x".utf8))
        // and the same stream cut at every possible point
        for cut in 1..<stream.count {
            #expect(feed(stream, chunk: cut).count == 3)
        }
    }

    @Test func sixteenBitLength() {
        let payload = [UInt8](repeating: 0x61, count: 300)
        let f = serverFrame(WSOpcode.text, payload)
        #expect(f[1] == 126)
        let frames = feed(f, chunk: 5)
        #expect(frames.count == 1)
        #expect(frames[0].1 == payload)
        // header alone is not enough
        let h = f.prefix(3).withUnsafeBytes { parseFrameHeader($0, maxFrame: 4096) }
        #expect(h == .needMore)
    }

    @Test func sixtyFourBitLength() {
        let payload = [UInt8](repeating: 0x62, count: 70_000)
        let frames = feed(serverFrame(WSOpcode.binary, payload), chunk: 8192)
        #expect(frames.count == 1)
        #expect(frames[0].1.count == 70_000)
    }

    @Test func tooLargeIsReported() {
        let f = serverFrame(WSOpcode.text, [UInt8](repeating: 0, count: 5000))
        let r = f.withUnsafeBytes { parseFrameHeader($0, maxFrame: 4096) }
        #expect(r == .tooLarge(5004))
        var copy = f
        let consumed = copy.withUnsafeMutableBytes { consumeFrames($0, maxFrame: 4096) { _, _ in true } }
        #expect(consumed == nil)
    }

    @Test func maskedClientFrameRoundTrips() {
        let payload = Array(#"{"type":"subscribe","ride":"r12"}"#.utf8)
        let f = maskedFrame(opcode: WSOpcode.text, payload: payload, mask: 0xA1B2_C3D4)
        #expect(f[0] == 0x81)
        #expect(f[1] == 0x80 | UInt8(payload.count))
        #expect(Array(f[2..<6]) == [0xA1, 0xB2, 0xC3, 0xD4])
        #expect(Array(f[6...]) != payload)  // really masked
        // the parser unmasks (servers never mask, but the code path must be right)
        let frames = feed(f, chunk: 3)
        #expect(frames.first?.1 == payload)
    }

    @Test func masked16BitClientFrame() {
        let payload = [UInt8](repeating: 0x7A, count: 200)
        let f = maskedFrame(opcode: WSOpcode.text, payload: payload, mask: 1)
        #expect(f[1] == 0x80 | 126)
        #expect(f.count == 4 + 4 + 200)
        #expect(feed(f, chunk: 64).first?.1 == payload)
    }

    @Test func stopsAfterClose() {
        let stream = serverFrame(WSOpcode.close, [0x03, 0xE8]) + serverFrame(WSOpcode.text, tick)
        var copy = stream
        var seen: [UInt8] = []
        let consumed = copy.withUnsafeMutableBytes { b in
            consumeFrames(b, maxFrame: 4096) { op, _ in seen.append(op); return op != WSOpcode.close }
        }
        #expect(seen == [WSOpcode.close])
        #expect(consumed == 4)
    }

    @Test func websocketAcceptMatchesRFC6455Example() {
        #expect(websocketAccept(key: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(Base64.encode(Array("ab".utf8)) == "YWI=")
        #expect(Base64.encode(Array("a".utf8)) == "YQ==")
    }
}
