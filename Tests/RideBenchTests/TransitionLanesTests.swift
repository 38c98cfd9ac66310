import Testing
@testable import RideBench

/// The request frames `bench --transitions` writes and how it matches replies to lanes.
@Suite struct TransitionLanesTests {
    /// Unmasks the client frames in `bytes` (as a server does) and returns their payloads.
    private func payloads(_ bytes: [UInt8]) -> [String] {
        var copy = bytes
        var out: [String] = []
        let used = copy.withUnsafeMutableBytes { b in
            consumeFrames(b, maxFrame: 1 << 16) { op, p in
                #expect(op == WSOpcode.text)
                out.append(String(decoding: p, as: UTF8.self))
                return true
            }
        }
        #expect(used == bytes.count)
        return out
    }

    private func reply(_ s: String, _ lanes: TransitionLanes) -> Int? {
        Array(s.utf8).withUnsafeBytes { lanes.lane(answeredBy: $0) }
    }

    @Test func requestsRunStartThenEndCyclesWithTheRunInIdAndRide() {
        var lanes = TransitionLanes(count: 12, run: 4242)
        var out: [UInt8] = []
        lanes.appendRequest(11, to: &out)
        lanes.sentAt[11] = 5
        lanes.appendRequest(3, to: &out)
        lanes.sentAt[3] = 6
        #expect(out[0] == 0x81 && out[1] & 0x80 != 0)  // FIN text, masked
        #expect(payloads(out) == [#"{"type":"start","id":"11.0.s.4242","ride":"bt4242-11-0"}"#,
                                  #"{"type":"start","id":"3.0.s.4242","ride":"bt4242-3-0"}"#])
        lanes.answered(11)
        out.removeAll()
        lanes.appendRequest(11, to: &out)
        #expect(payloads(out) == [#"{"type":"end","id":"11.0.e.4242","ride":"bt4242-11-0"}"#])
        lanes.answered(11)
        out.removeAll()
        lanes.appendRequest(11, to: &out)
        #expect(payloads(out) == [#"{"type":"start","id":"11.1.s.4242","ride":"bt4242-11-1"}"#])
    }

    @Test func startsOnlyLanesOpenANewRideEachTime() {
        var lanes = TransitionLanes(count: 2, run: 9, startsOnly: true)
        var out: [UInt8] = []
        for _ in 0..<3 {
            lanes.appendRequest(1, to: &out)
            lanes.sentAt[1] = 1
            lanes.answered(1)
        }
        #expect(payloads(out) == [#"{"type":"start","id":"1.0.s.9","ride":"bt9-1-0"}"#,
                                  #"{"type":"start","id":"1.1.s.9","ride":"bt9-1-1"}"#,
                                  #"{"type":"start","id":"1.2.s.9","ride":"bt9-1-2"}"#])
    }

    @Test func aReplyMatchesOnlyTheIdItsLaneHasInFlight() {
        var lanes = TransitionLanes(count: 12, run: 77)
        var out: [UInt8] = []
        lanes.appendRequest(2, to: &out)
        #expect(reply(#"{"type":"state","id":"2.0.s.77","ride":"bt77-2-0"}"#, lanes) == nil)  // not sent yet
        lanes.sentAt[2] = 1
        #expect(reply(#"{"type":"state","id":"2.0.s.77","ride":"bt77-2-0"}"#, lanes) == 2)
        #expect(reply(#"{"type":"error","id":"2.0.s.77","code":"conflict"}"#, lanes) == 2)
        #expect(reply(#"{"type":"state","id":"2.0.s.78"}"#, lanes) == nil)    // another run
        #expect(reply(#"{"type":"state","id":"2.0.e.77"}"#, lanes) == nil)    // the other half
        #expect(reply(#"{"type":"state","id":"2.0.s.777"}"#, lanes) == nil)   // longer
        #expect(reply(#"{"type":"state","id":"12.0.s.77"}"#, lanes) == nil)   // no such lane
        #expect(reply(#"{"type":"state","id":"3.0.s.77"}"#, lanes) == nil)    // nothing in flight
        #expect(reply(#"{"type":"tick","ride":"bt77-2-0","seq":1}"#, lanes) == nil)
        lanes.answered(2)
        #expect(reply(#"{"type":"state","id":"2.0.s.77"}"#, lanes) == nil)    // answered once
    }

    @Test func stateRepliesAreToldFromErrors() {
        func state(_ s: String) -> Bool { Array(s.utf8).withUnsafeBytes { isStateReply($0) } }
        #expect(state(#"{"type":"state","id":"1"}"#))
        #expect(!state(#"{"type":"error","id":"1","code":"invalid_transition"}"#))
        #expect(!state(#"{"type":"stat"#))
        #expect(!state(#"{"type":"states"}"#))
    }
}
