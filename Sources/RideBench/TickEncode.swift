import Glibc
import RideCore
import RideOptions
import RideService

/// `ridepush bench --tick-encode`: the CPU one second's tick batch costs to build (issue 29),
/// without sockets. N open rides go into a registry as the server holds them (its plans, one
/// slot per core); W of them count a subscriber (only watched rides' ticks are encoded). A
/// manual clock moves one second per batch — nothing sleeps — and each `RideRegistry.tick` is
/// timed on this thread's CPU clock.
public struct TickEncodeOptions: Equatable, Sendable {
    public var rides = 100_000
    public var watched: Int?          // default: every ride
    public var seconds = 10
    public var json = false
    public var help = false

    public init() {}

    public var effectiveWatched: Int { min(rides, watched ?? rides) }

    static let table: OptionTable = {
        let d = TickEncodeOptions()
        return OptionTable(usage: """
            usage: ridepush bench --tick-encode [--rides N] [--watched W] [--seconds S] [--json]
            """, about: """
            Builds N open rides in memory (every 8th paused, every 4th with a 2-hour limit, started
            over the last hour), marks W of them watched, then builds S seconds' tick batches on a
            manual clock and reports the CPU time of each build (p50 and max) and its bytes.
            """, options: [
            .flag("--tick-encode", help: "this benchmark (instead of the tick fan-out one)"),
            .int("-r", "--rides", range: 1...10_000_000, default: d.rides, help: "open rides"),
            .int("-w", "--watched", placeholder: "W", range: 0...10_000_000, help: "rides with a subscriber (default all)"),
            .int("-d", "--seconds", placeholder: "S", range: 1...600, default: d.seconds, help: "batches, one per second of the manual clock"),
            .flag("--json", help: "print only the JSON result on stdout"),
        ])
    }()

    public static let usage = table.help

    public static func parse(_ args: [String]) throws(BenchError) -> TickEncodeOptions {
        let p: ParsedOptions
        do { p = try table.parse(args) } catch { throw BenchError.usage(error.description) }
        var o = TickEncodeOptions()
        if p.help { o.help = true; return o }
        if let stray = p.positional.first { throw BenchError.usage(OptionError.unexpectedArgument(stray).description) }
        o.rides = p.int("--rides")!
        o.watched = p.int("--watched")
        o.seconds = p.int("--seconds")!
        o.json = p.flag("--json")
        return o
    }
}

/// What one run measured.
public struct TickEncodeResult: Sendable {
    public var rides: Int
    public var watched: Int
    /// CPU nanoseconds of each batch's build, in order.
    public var cpuNanos: [Int64]
    /// Bytes of each batch (every watched ride's tick, back to back).
    public var bytes: [Int]
    /// Ticks (frames) in each batch.
    public var frames: [Int]

    func percentileMillis(_ q: Double) -> Double {
        let s = cpuNanos.sorted()
        guard !s.isEmpty else { return 0 }
        return Double(s[min(s.count - 1, Int(Double(s.count - 1) * q + 0.5))]) / 1e6
    }

    var json: String {
        JSONOut.object([
            ("rides", .int(rides)), ("watched", .int(watched)), ("batches", .int(cpuNanos.count)),
            ("cpu_ms_p50", .num(percentileMillis(0.5), 3)), ("cpu_ms_max", .num(Double(cpuNanos.max() ?? 0) / 1e6, 3)),
            ("cpu_ms_first", .num(Double(cpuNanos.first ?? 0) / 1e6, 3)),
            ("bytes_per_batch", .int(bytes.last ?? 0)), ("frames_per_batch", .int(frames.last ?? 0)),
        ]).text
    }

    var text: String {
        let b = bytes.last ?? 0, f = frames.last ?? 0
        return """
            tick-encode: \(rides) rides, \(watched) watched, \(cpuNanos.count) batches
            CPU per batch: p50 \(fixed(percentileMillis(0.5))) ms, max \(fixed(Double(cpuNanos.max() ?? 0) / 1e6)) ms (first \(fixed(Double(cpuNanos.first ?? 0) / 1e6)) ms)
            bytes per batch: \(b) (\(f) frames\(f > 0 ? ", \(b / f) bytes each" : ""))

            """
    }

    private func fixed(_ v: Double) -> String {
        let r = (v * 1000).rounded() / 1000
        return String(r)
    }
}

public enum TickEncodeBench {
    public static func main(_ arguments: [String]) -> Int32 {
        let o: TickEncodeOptions
        do { o = try TickEncodeOptions.parse(arguments) } catch {
            printErr("ridepush bench --tick-encode: \(error)\n\n\(TickEncodeOptions.usage)")
            return 2
        }
        if o.help { print(TickEncodeOptions.usage, terminator: ""); return 0 }
        let r = run(o)
        print(o.json ? r.json : r.text, terminator: o.json ? "\n" : "")
        return r.watched == 0 || (r.bytes.last ?? 0) > 0 ? 0 : 1
    }

    public static func run(_ o: TickEncodeOptions) -> TickEncodeResult {
        let clock = ManualClock()
        let start = clock.now()
        let threads = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let registry = RideRegistry(plans: [.standard], shards: threads, clock: clock, metrics: Metrics(), pre: 16)
        let watched = o.effectiveWatched
        registry.publishing { v in
            for i in 0..<o.rides {
                // Started over the last hour, so elapsed times and fares have 1-4 digits.
                var ride = Ride(id: rideID(i), planID: FarePlan.standard.id, owner: "rider-\(i % 50_000)",
                                limit: i % 4 == 0 ? 7200 : nil, startedAt: start - Int64(i % 3600) * 1000 - Int64(i % 997))
                if i % 8 == 7, case .success((_, let paused)) = ride.step(.pause, at: start - Int64(i % 300) * 1000) {
                    ride = paused
                }
                let live = registry.add(ride, &v)
                // Spread evenly: ride i is watched when the i-th share of W rounds up to a new one.
                if (i + 1) * watched / o.rides != i * watched / o.rides {
                    live.subscriberCount.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
        var result = TickEncodeResult(rides: o.rides, watched: watched, cpuNanos: [], bytes: [], frames: [])
        for seq in 1...Int64(o.seconds) {
            clock.advance(seconds: 1)
            let (nanos, bytes, frames) = build(registry, seq: seq, at: clock.now())
            result.cpuNanos.append(nanos)
            result.bytes.append(bytes)
            result.frames.append(frames)
        }
        return result
    }

    /// One batch, timed on this thread's CPU clock (the batch is let go after the clock is read,
    /// as the server lets it go after the fan-out). Not inlined: callgrind's
    /// `--toggle-collect='*TickEncodeBench*build*'` counts exactly this.
    @inline(never)
    static func build(_ registry: RideRegistry, seq: Int64, at: UnixMillis) -> (nanos: Int64, bytes: Int, frames: Int) {
        let before = threadCPUNanos()
        let (batch, _, _) = registry.tick(seq: seq, at: at) { _, _ in }
        let nanos = threadCPUNanos() - before
        return (nanos, batch.frames.count, batch.ends.count)
    }

    /// A server-made ride id's shape: "r-" and 10 letters or digits (RideBook.newRideID).
    static func rideID(_ i: Int) -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)
        var id = "r-"
        var n = UInt64(i) &* 0x9E37_79B9_7F4A_7C15
        for _ in 0..<10 {
            id.unicodeScalars.append(Unicode.Scalar(alphabet[Int(n % 32)]))
            n /= 32
        }
        return id
    }

    static func threadCPUNanos() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
