import Foundation
import RideCore
import RideProtocol
import RidePushClient

// A client of the SDK for tests/test_sdk.py, one JSON object per output line.
//   ridepush-sdk-probe watch URL RIDE [SECONDS]      every event of one feed
//   ridepush-sdk-probe many URL PREFIX N TICKS       N clients, one per ride PREFIX-0 … PREFIX-(N-1),
//                                                    until each saw TICKS ticks; then RSS and threads
//   ridepush-sdk-probe push URL register|unregister PLATFORM KIND RIDE|- TOKEN
//                                                    one registerPush / unregisterPush call ("-": no
//                                                    ride); its acknowledgement or the error it threw
// A token, if any, comes from RIDEPUSH_TOKEN. The feeds run in detached tasks: the main
// thread (the main actor) only waits. RIDEPUSH_PROBE_LOG=1 gives the clients a log handler
// that writes `log LEVEL LINE` to stderr; without it the SDK must print nothing at all.

signal(SIGPIPE, SIG_IGN)
// One socket per client: lift the soft file limit toward the hard one (at most 20,000).
var limit = rlimit()
getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = min(limit.rlim_max, 20_000)
setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
let args = CommandLine.arguments
let token = ProcessInfo.processInfo.environment["RIDEPUSH_TOKEN"]

func emit(_ fields: [(String, String)]) {
    var w = JSONWriter()
    w.beginObject()
    for (k, v) in fields {
        w.key(k)
        if let n = Int64(v) { w.int(n) } else { w.string(v) }
    }
    w.endObject()
    print(String(decoding: w.bytes, as: UTF8.self))
    fflush(nil)
}

func describe(_ e: RideEvent) -> [(String, String)] {
    switch e {
    case .state(let s): return [("kind", "state"), ("state", s.state.rawValue), ("elapsed", "\(s.elapsed)"), ("at", "\(s.at)")]
    case .tick(let t): return [("kind", "tick"), ("state", t.state.rawValue), ("elapsed", "\(t.elapsed)"), ("at", "\(t.at)")]
    case .warning(let r): return [("kind", "warning"), ("remaining", "\(r)")]
    case .zone(let name, _): return [("kind", "zone"), ("zone", name ?? "")]
    case .ended(let s): return [("kind", "ended"), ("elapsed", "\(s.elapsed)"), ("fare", "\(s.fare)"), ("at", "\(s.at)")]
    }
}

/// Resident memory (kB) and threads of this process, from /proc/self/status.
func procStatus() -> (rssKB: Int, threads: Int, fds: Int) {
    let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? -1
        }
        return -1
    }
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    return (field("VmRSS"), field("Threads"), fds)
}

let done = DispatchSemaphore(value: 0)
guard args.count >= 4, let url = URL(string: args[2]) else {
    FileHandle.standardError.write(Data("usage: ridepush-sdk-probe watch URL RIDE [SECONDS] | many URL PREFIX N TICKS | push URL register|unregister PLATFORM KIND RIDE|- TOKEN\n".utf8))
    exit(2)
}

var config = RidePushClient.Configuration()
if ProcessInfo.processInfo.environment["RIDEPUSH_PROBE_LOG"] == "1" {
    config.logHandler = { level, line in FileHandle.standardError.write(Data("log \(level) \(line)\n".utf8)) }
}

switch args[1] {
case "watch":
    let client = RidePushClient(url: url, configuration: config) { token }
    let ride = args[3]
    Task.detached {
        for await s in client.connectionStates {
            switch s {
            case .connected: emit([("kind", "connected")])
            case .waitingToReconnect(let d, let why): emit([("kind", "waiting"), ("delay_ms", "\(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)"), ("why", "\(why)")])
            case .closed(let r): emit([("kind", "closed"), ("why", "\(r)")])
            default: break
            }
        }
    }
    Task.detached {
        do {
            for try await e in client.ride(ride) { emit(describe(e)) }
            emit([("kind", "finished")])
        } catch {
            emit([("kind", "error"), ("error", "\(error)")])
        }
        done.signal()
    }
    if args.count > 4, let s = Double(args[4]) {
        _ = done.wait(timeout: .now() + s)
    } else {
        done.wait()
    }

case "many":
    guard args.count == 6, let n = Int(args[4]), let ticks = Int(args[5]), n > 0, n <= 5000 else { exit(2) }
    let before = procStatus()
    emit([("kind", "baseline"), ("rss_kb", "\(before.rssKB)"), ("threads", "\(before.threads)")])
    let reached = Locked(0)  // not Mutex: TSan sees pthread locks only
    let started = Date()
    var clients: [RidePushClient] = []
    for i in 0..<n {
        let client = RidePushClient(url: url, configuration: config) { token }
        clients.append(client)
        let ride = "\(args[3])-\(i)"
        Task.detached {
            var seen = 0
            do {
                for try await e in client.ride(ride) {
                    if case .tick = e { seen += 1 }
                    if seen == ticks {
                        if reached.withLock({ $0 += 1; return $0 }) == n { done.signal() }
                    }
                }
            } catch RidePushError.closed(.closedByClient) {
                // the run is over
            } catch {
                emit([("kind", "error"), ("ride", ride), ("error", "\(error)")])
            }
        }
    }
    // Bounded: two minutes at most, however slow the machine.
    let ok = done.wait(timeout: .now() + 120) == .success
    let after = procStatus()
    emit([("kind", "result"), ("clients", "\(n)"), ("ticks_each", "\(ticks)"), ("all_reached", ok ? "1" : "0"),
          ("reached", "\(reached.withLock { $0 })"), ("seconds", String(format: "%.1f", Date().timeIntervalSince(started))),
          ("rss_kb", "\(after.rssKB)"), ("threads", "\(after.threads)"), ("fds", "\(after.fds)"),
          ("rss_kb_per_client", String(format: "%.1f", Double(after.rssKB - before.rssKB) / Double(n)))])
    for c in clients { c.close() }

case "push":
    guard args.count == 8, args[3] == "register" || args[3] == "unregister",
          let platform = PushPlatform(rawValue: args[4]), let kind = PushKind(rawValue: args[5]) else { exit(2) }
    var pushConfig = config
    pushConfig.requestTimeout = .seconds(10)
    let client = RidePushClient(url: url, configuration: pushConfig) { token }
    let ride = args[6] == "-" ? nil : args[6]
    Task.detached {
        do {
            let ack = args[3] == "register"
                ? try await client.registerPush(platform: platform, kind: kind, ride: ride, token: args[7])
                : try await client.unregisterPush(platform: platform, kind: kind, ride: ride, token: args[7])
            emit([("kind", ack.type), ("platform", ack.platform.rawValue), ("push_kind", ack.kind.rawValue), ("ride", ack.ride ?? "")])
        } catch RidePushError.server(let e) {
            emit([("kind", "error"), ("code", e.code.rawValue), ("message", e.message)])
        } catch {
            emit([("kind", "error"), ("code", ""), ("message", "\(error)")])
        }
        done.signal()
    }
    done.wait()
    client.close()

default:
    exit(2)
}
exit(0)
