import Testing
@testable import RideBench

@Suite struct HistogramTests {
    @Test func percentilesOfKnownValues() {
        var h = LatencyHistogram()
        for ms in 1...100 { h.record(micros: Int64(ms) * 1000 - 50) }  // 0.95, 1.95, … 99.95 ms
        #expect(h.count == 100)
        #expect(h.percentileMillis(0.50) == 50.0)
        #expect(h.percentileMillis(0.90) == 90.0)
        #expect(h.percentileMillis(0.99) == 99.0)
        #expect(h.percentileMillis(1.0) == 99.95)   // capped at the exact max
        #expect(h.maxMillis == 99.95)
        #expect(LatencyHistogram().percentileMillis(0.5) == nil)
    }

    @Test func mergeEqualsRecordingEverythingInOne() {
        var a = LatencyHistogram(), b = LatencyHistogram(), all = LatencyHistogram()
        for i in 0..<5000 {
            let v = Int64((i * 7919) % 400_000)
            if i % 3 == 0 { a.record(micros: v) } else { b.record(micros: v) }
            all.record(micros: v)
        }
        var merged = a
        merged.merge(b)
        #expect(merged == all)
        for p in [0.5, 0.9, 0.99] { #expect(merged.percentileMillis(p) == all.percentileMillis(p)) }
    }

    @Test func sparseRoundTripAndMergeAcrossProcesses() {
        var a = LatencyHistogram(), b = LatencyHistogram()
        a.record(micros: 95_000); a.record(micros: 180_000)
        b.record(micros: 12_345_678)   // beyond the range: overflow bucket, exact max
        b.record(micros: -5)           // clock skew: clamped to 0
        let back = LatencyHistogram(sparse: a.sparse)
        #expect(back == a)
        var m = LatencyHistogram(sparse: a.sparse)
        m.merge(LatencyHistogram(sparse: b.sparse))
        #expect(m.count == 4)
        #expect(m.maxMillis == 12_345.678)
        #expect(m.percentileMillis(0.25) == 0.1)
        #expect(m.percentileMillis(0.50) == 95.1)
        #expect(m.percentileMillis(1.0) == 12_345.678)
    }
}

@Suite struct SeqTests {
    @Test func firstTickIsTheBaseline() {
        var s = SeqTracker()
        #expect(s.observe(1000) == 0)
        #expect(s.observe(1001) == 0)
        #expect(s.gaps == 0)
    }

    @Test func gapsAndDuplicates() {
        var s = SeqTracker()
        s.observe(5)
        #expect(s.observe(6) == 0)
        #expect(s.observe(9) == 2)     // 7 and 8 missed
        #expect(s.observe(9) == 0)     // duplicate
        #expect(s.observe(8) == 0)     // late/old: duplicate, not a gap
        #expect(s.observe(10) == 0)
        #expect(s.gaps == 2)
        #expect(s.duplicates == 2)
        #expect(s.last == 10)
    }

    @Test func missedInWindowCountsAgainstEmittedTicks() {
        // 3 connections got all 10, one got 7, one got none
        #expect(BenchSummary.missed(emitted: 10, counts: [10: 3, 7: 1, 0: 1]) == 13)
        #expect(BenchSummary.missed(emitted: 0, counts: [0: 5]) == 0)
    }
}

@Suite struct ScanTests {
    func scan(_ s: String) -> ScannedMessage {
        Array(s.utf8).withUnsafeBytes { scanMessage($0) }
    }

    @Test func referenceTick() {
        #expect(scan(#"{"type":"tick","ride":"r1","state":"riding","elapsed":61,"fare":680,"currency":"KRW","seq":42,"at":1764430000123}"#)
                == .tick(seq: 42, at: 1_764_430_000_123))
    }

    @Test func ridePushTickAndSpacing() {
        #expect(scan(#"{"type": "tick", "ride":"r-42","state":"paused","elapsed":192,"paused":4,"fare":1040,"currency":"KRW","seq" : 1234 ,"at":  1764430000000}"#)
                == .tick(seq: 1234, at: 1_764_430_000_000))
    }

    @Test func atIsNotStartedAt() {
        // a state message has started_at but no seq/at: not a tick
        #expect(scan(#"{"type":"state","ride":"r1","state":"riding","started_at":1764430000000,"ended_at":null}"#) == .other)
        // a tick whose "at" is missing is malformed even if started_at is present
        #expect(scan(#"{"type":"tick","seq":1,"started_at":5}"#) == .malformed)
    }

    @Test func errors() {
        #expect(scan(#"{"type":"error","id":"b-3","code":"conflict","message":"ride exists"}"#) == .error(code: "conflict"))
        #expect(scan(#"{"type":"error","code":"ride_not_found","message":"no"}"#) == .error(code: "ride_not_found"))
        #expect(scan(#"{"type":"error"}"#) == .error(code: ""))
        #expect(scan("not json") == .malformed)
    }
}

@Suite struct OptionTests {
    @Test func defaults() throws {
        let o = try BenchOptions.parse(["-n", "19000"])
        #expect(o.effectiveRides == 9500)
        #expect(o.effectiveProcs == 3)
        #expect(o.effectiveCreate)          // default URL path is /ws
        #expect(o.host == "127.0.0.1" && o.port == 8080 && o.path == "/ws")
    }

    @Test func referenceServerURL() throws {
        let o = try BenchOptions.parse(["--url", "ws://localhost:9001/", "-n", "2000", "-r", "500", "--duration=10", "--token", "a.b c"])
        #expect(o.port == 9001 && o.path == "/" && o.host == "127.0.0.1")
        #expect(!o.effectiveCreate)
        #expect(o.effectiveRides == 500 && o.duration == 10)
        #expect(o.requestTarget == "/?token=a.b%20c")
    }

    @Test func wssURLsSpeakTLSOnPort443UnlessGiven() throws {
        let a = try BenchOptions.parse(["--url", "wss://localhost/ws", "--ca", "/tmp/ca.pem"])
        #expect(a.tls && a.port == 443 && a.host == "127.0.0.1" && a.path == "/ws" && a.caFile == "/tmp/ca.pem")
        let b = try BenchOptions.parse(["--url", "wss://127.0.0.1:8443/ws"])
        #expect(b.tls && b.port == 8443 && b.caFile == nil)
        let c = try BenchOptions.parse(["--url", "ws://127.0.0.1/ws"])
        #expect(!c.tls && c.port == 80)
        #expect(throws: BenchError.self) { try BenchOptions.parse(["--url", "ws://127.0.0.1/ws", "--ca", "x.pem"]) }
    }

    @Test func authFrameKeepsTheTokenOutOfTheURL() throws {
        let o = try BenchOptions.parse(["--token", "a.b.c", "--auth-frame"])
        #expect(o.authFrame && o.token == "a.b.c")
        #expect(o.requestTarget == "/ws")
        #expect(throws: BenchError.self) { try BenchOptions.parse(["--auth-frame"]) }
    }

    @Test func laterFlagsWin() throws {
        // workers get the parent's flags plus their own --worker/--procs
        let o = try BenchOptions.parse(["-n", "100", "--procs", "1", "--no-create", "--worker", "1", "--procs", "2"])
        #expect(o.effectiveProcs == 2 && o.workerIndex == 1 && !o.effectiveCreate)
    }

    @Test func rejectsBadInput() {
        #expect(throws: BenchError.self) { try TransitionOptions.parse(["--url", "wss://127.0.0.1/ws"]) }  // the fan-out bench speaks TLS, this one not
        #expect(throws: BenchError.self) { try BenchOptions.parse(["--url", "ws://example.com/ws"]) }
        #expect(throws: BenchError.self) { try BenchOptions.parse(["-n", "40000", "--procs", "1"]) }
        #expect(throws: BenchError.self) { try BenchOptions.parse(["--bogus"]) }
        #expect(throws: BenchError.self) { try BenchOptions.parse(["-n"]) }
    }

    @Test func windowEdgesFallBetweenTicks() {
        let w = BenchWindow.after(readyMillis: 1_000_250, warmup: 1, duration: 10, grace: 3)
        #expect(w.t0 == 1_002_500 && w.t1 == 1_012_500 && w.end == 1_015_500)
        #expect(w.contains(at: 1_003_000) && !w.contains(at: 1_012_500) && !w.contains(at: 1_002_000))
    }
}
