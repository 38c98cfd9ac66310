import Foundation

/// The process clock: Unix milliseconds that never step.
///
/// It runs on CLOCK_MONOTONIC, starts at the wall clock (CLOCK_REALTIME) and is brought back
/// to it by slewing when the two disagree: at most `maxSlew` faster or slower than monotonic
/// time, the way NTP daemons slew instead of stepping. A wall-clock step (an NTP step, a VM
/// restore, an operator's `date -s`) therefore moves no ride: elapsed time, fares, limits and
/// token expiry all follow time that passed, and the shared timer keeps firing every second.
///
/// Why 5 ms per second: a second of this clock is then 995–1005 ms of real time, a 0.5 %
/// error no rider sees (elapsed is shown in whole seconds; a completed-minute fare moves at
/// most 0.3 s early or late) and that keeps the ticks' latency (`at` to delivery) inside its
/// 5 ms histogram bucket. It is ten times NTP's own 0.5 ms/s, so the millisecond offsets NTP
/// itself leaves are absorbed in well under a second; a 30-minute step takes 100 hours to
/// absorb, during which `/metrics` shows the offset (`ridepush_clock_offset_seconds`)
/// and nodes differ by it (a multi-node fleet needs the wall clock right before start).
public final class SlewingClock: RideClock, ClockReport, Sendable {
    /// A time source in microseconds.
    public typealias Source = @Sendable () -> Int64

    /// Most the clock runs fast or slow against monotonic time, in parts per million.
    public static let maxSlewPPM: Int64 = 5_000
    /// A change of the wall-clock offset above this between two readings (plus 0.1 % of the
    /// time between them, far above any NTP frequency correction) is a step, not drift.
    public static let stepThresholdMicros: Int64 = 100_000

    private struct State {
        var mono: Int64     // monotonic µs at the last reading
        var process: Int64  // this clock, Unix µs, at the last reading
        var offset: Int64   // wall − process at the last reading, µs
        var carry: Int64    // slew budget below 1 µs, in µs × 10⁻⁶
        var steps: Int64 = 0
        var unreported: [Int64] = []  // wall-clock jumps since the last `takeSteps`, µs
    }

    private let monotonic: Source
    private let wall: Source
    private let state: Locked<State>  // not Mutex: ThreadSanitizer sees pthread locks only

    public init(monotonic: @escaping Source, wall: @escaping Source) {
        self.monotonic = monotonic
        self.wall = wall
        let m = monotonic(), w = wall()
        state = Locked(State(mono: m, process: w, offset: 0, carry: 0))
    }

    /// The process's clock over the real CLOCK_MONOTONIC and CLOCK_REALTIME.
    public static let system = SlewingClock(monotonic: { systemMicros(CLOCK_MONOTONIC) },
                                            wall: { systemMicros(CLOCK_REALTIME) })

    public func now() -> UnixMillis {
        let us = nowMicros()
        return us >= 0 ? us / 1000 : (us - 999) / 1000
    }

    public func nowMicros() -> Int64 {
        state.withLock { s in
            let m = monotonic(), w = wall()
            let dm = max(0, m - s.mono)  // CLOCK_MONOTONIC does not go back; a fake one might
            var p = s.process + dm
            let jump = (w - p) - s.offset  // how far the wall moved against monotonic time
            if abs(jump) > Self.stepThresholdMicros + dm / 1000 {
                s.steps += 1
                if s.unreported.count < 16 { s.unreported.append(jump) }
            }
            let budget = dm * Self.maxSlewPPM + s.carry
            let room = budget / 1_000_000
            s.carry = budget % 1_000_000
            p += min(room, max(-room, w - p))
            s.mono = m
            s.process = p
            s.offset = w - p
            return p
        }
    }

    /// Wall-clock steps seen since the process started.
    public var steps: Int64 { state.withLock { $0.steps } }

    /// Wall clock minus this clock at the last reading: what slewing has still to absorb.
    public var offsetMillis: Int64 { state.withLock { $0.offset / 1000 } }

    /// The steps not yet logged (each the wall clock's jump in ms, + forward, − back).
    public func takeSteps() -> [Int64] {
        state.withLock { s in
            defer { s.unreported.removeAll() }
            return s.unreported.map { $0 / 1000 }
        }
    }
}

/// What a clock that watches the wall clock reports on /metrics.
public protocol ClockReport: Sendable {
    var steps: Int64 { get }
    var offsetMillis: Int64 { get }
    func takeSteps() -> [Int64]
}

