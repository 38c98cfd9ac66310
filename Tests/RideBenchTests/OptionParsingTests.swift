@testable import RideBench
import Testing

/// The bench's flags on the shared parser: the same values and messages either way a flag is written.
@Suite struct BenchOptionParsing {
    func failure(_ args: [String]) -> String? {
        do { _ = try BenchOptions.parse(args); return nil } catch { return error.description }
    }

    func transitionFailure(_ args: [String]) -> String? {
        do { _ = try TransitionOptions.parse(args); return nil } catch { return error.description }
    }

    @Test func everyFlagLandsInItsField() throws {
        let o = try BenchOptions.parse(["--url=ws://127.0.0.2:9000/ws?x=1", "--clients", "300", "--rides=7", "-d", "5",
                                        "-c", "100", "-i", "9", "-s", "2", "--procs", "3", "-P", "4242", "--token", "t",
                                        "--create", "--connect-timeout=30", "--warmup", "0", "--grace", "60", "--json"])
        var want = BenchOptions()
        want.host = "127.0.0.2"; want.port = 9000; want.path = "/ws?x=1"
        want.clients = 300; want.rides = 7; want.duration = 5; want.ramp = 100; want.inflight = 9; want.sources = 2
        want.procs = 3; want.serverPID = 4242; want.token = "t"; want.create = true; want.connectTimeout = 30
        want.warmup = 0; want.grace = 60; want.json = true
        #expect(o == want)
    }

    @Test func noFlagsIsTheStructsDefaults() throws {
        #expect(try BenchOptions.parse([]) == BenchOptions())
        #expect(try TransitionOptions.parse(["--transitions"]) == TransitionOptions())
    }

    @Test func theLaterOfCreateAndNoCreateCounts() throws {
        #expect(try BenchOptions.parse(["--create", "--no-create"]).create == false)
        #expect(try BenchOptions.parse(["--no-create", "--create"]).create == true)
        #expect(try BenchOptions.parse([]).create == nil)
    }

    @Test func helpIsAFieldNotAnError() throws {
        #expect(try BenchOptions.parse(["-n", "0", "--help"]).help)
        #expect(try TransitionOptions.parse(["--transitions", "-h"]).help)
    }

    @Test func messages() {
        #expect(failure(["--bogus"]) == "unknown option --bogus")
        #expect(failure(["-n"]) == "-n needs a value")
        #expect(failure(["-n", "0"]) == "-n 0: expected a whole number from 1 to 1000000")
        #expect(failure(["--sources=255"]) == "--sources 255: expected a whole number from 1 to 254")
        #expect(failure(["--create=1"]) == "--create takes no value")
        #expect(failure(["stray"]) == "unexpected argument stray")
        #expect(failure(["--url", "http://127.0.0.1/"]) == "--url must start with ws://, got http://127.0.0.1/")
        #expect(failure(["-n", "40000", "--procs", "1"]) == "40000 clients over 1 processes is more than 19000 per process (file limit); raise --procs")
        #expect(failure(["-n", "2", "--procs", "3"]) == "--procs 3 is more than --clients 2")
        #expect(failure(["--worker", "2", "--procs", "2", "-n", "10"]) == "--worker 2 out of range for --procs 2")
    }

    @Test func transitions() throws {
        let o = try TransitionOptions.parse(["--transitions", "--clients", "8", "--one-ride=500", "--disk", "/tmp", "--json"])
        #expect(o.connections == 8 && o.oneRide == 500 && o.depth == 1 && o.disk == "/tmp" && o.json)
        // --depth given beside --one-ride is kept.
        #expect(try TransitionOptions.parse(["--one-ride", "5", "--depth", "4"]).depth == 4)
        #expect(try TransitionOptions.parse(["-n", "3"]).depth == 2)
        #expect(transitionFailure(["--connections", "4097"]) == "--connections 4097: expected a whole number from 1 to 4096")
        #expect(transitionFailure(["--ramp", "5"]) == "unknown option --ramp")
    }

    @Test func helpListsEveryFlagButTheInternalOne() {
        for flag in ["--url", "-n, --clients", "-r, --rides", "-d, --duration", "-c, --ramp", "-i, --inflight", "-s, --sources",
                     "--procs", "-P, --pid", "--token", "--create", "--no-create", "--connect-timeout", "--warmup", "--grace",
                     "--json", "-h, --help"] {
            #expect(BenchOptions.usage.contains("\n  \(flag) "), "\(flag)")
        }
        #expect(!BenchOptions.usage.contains("--worker"))
        #expect(BenchOptions.usage.contains("-n, --clients N      connections (default 1000)\n"))
    }

    @Test func tickEncodeFlagsAndDefaults() throws {
        #expect(try TickEncodeOptions.parse(["--tick-encode"]) == TickEncodeOptions())
        let o = try TickEncodeOptions.parse(["--tick-encode", "--rides=500", "-w", "20", "--seconds", "3", "--json"])
        var want = TickEncodeOptions()
        want.rides = 500; want.watched = 20; want.seconds = 3; want.json = true
        #expect(o == want)
        // Every ride watched unless told; never more watched than there are rides.
        #expect(TickEncodeOptions().effectiveWatched == 100_000)
        #expect(try TickEncodeOptions.parse(["--rides", "10", "--watched", "50"]).effectiveWatched == 10)
        #expect(try TickEncodeOptions.parse(["--watched", "0"]).effectiveWatched == 0)
        #expect(try TickEncodeOptions.parse(["--tick-encode", "--help"]).help)
        #expect(throws: BenchError.self) { try TickEncodeOptions.parse(["--tick-encode", "--seconds", "0"]) }
        #expect(throws: BenchError.self) { try TickEncodeOptions.parse(["--tick-encode", "--url", "ws://x"]) }
        #expect(BenchOptions.usage.contains("--tick-encode --help"))
    }

    /// What the mode reports, on a few rides: every watched ride's tick in every batch.
    @Test func tickEncodeRunsWithoutAServer() {
        var o = TickEncodeOptions()
        o.rides = 200; o.watched = 50; o.seconds = 2
        let r = TickEncodeBench.run(o)
        #expect(r.rides == 200 && r.watched == 50 && r.cpuNanos.count == 2)
        #expect(r.frames == [50, 50] && r.bytes.allSatisfy { $0 > 50 * 100 })
        #expect(Set((0..<1_000).map(TickEncodeBench.rideID)).count == 1_000, "ride ids are distinct")
    }
}
