import Foundation
import RideCore
import RideOptions
import RideProtocol
import RidePushClient
import Synchronization

/// `ridepush ride`'s options, one line each: parsed and printed by `--help` from this table.
let rideOptions = OptionTable(usage: """
    usage: ridepush ride start [--ride ID] [--plan PLAN] [--limit SECONDS]
           ridepush ride pause|resume|get|share ID
           ridepush ride end ID [--distance METRES] [--force]
           ridepush ride watch ID
           ridepush ride simulate ID --gpx TRACK.gpx [--speed X]
    """, options: [
    .string("--url", placeholder: "ws://HOST:PORT/ws", env: "RIDEPUSH_URL", default: "ws://127.0.0.1:8080/ws", help: "server; wss:// for TLS"),
    .string("--token", placeholder: "TOKEN", env: "RIDEPUSH_TOKEN", help: "bearer token. With `make run` it is the token= part of the page URL the server prints (it also prints this command ready to paste); otherwise make one with `ridepush token --control --sub RIDER`"),
    .string("--token-file", placeholder: "PATH", help: "read the token from PATH, again whenever it is about to expire or has expired (another process may renew the file)"),
    .string("--ride", placeholder: "ID", needs: "a ride id", help: "start: the new ride's id"),
    .string("--plan", placeholder: "PLAN", needs: "a plan id", help: "start: the fare plan's id"),
    .int("--limit", placeholder: "SECONDS", range: 1...Int(InputBounds.maxQuantity), unit: "seconds", help: "start: the ride's time limit"),
    .int("--distance", placeholder: "METRES", range: 0...Int(InputBounds.maxQuantity), unit: "metres", help: "end: the distance ridden"),
    .flag("--force", help: "end: end even where the zones refuse it or no recent position is known (ops tokens only; the receipt says so)"),
    .string("--gpx", placeholder: "PATH", needs: "a GPX file", help: "simulate: ride the track in PATH (its <trkpt> lat/lon/time), reporting each point as the ride's position at its recorded pace"),
    .string("--speed", placeholder: "X", needs: "a number", help: "simulate: play the track X times faster (default 1; points without a time are 1 s apart)"),
    .choice("--lang", of: ["ko", "en"], help: "output language (default: Korean when LC_ALL or LANG starts with ko, else English)"),
    .int("--wait", placeholder: "SECONDS", range: 1...86_400, unit: "seconds", default: 15, help: "start/pause/resume/end/get/share (and simulate's check that the server read every point): give up after this long (an unavailable or rate_limited answer is retried after 1, 2, 4, 8 s while this allows, then the server's answer is printed)"),
    .flag("--insecure", help: "with wss://, accept a self-signed certificate"),
], footer: """
    A device client on the RidePushClient SDK: requests are retried across reconnects with one
    request id (applied once); watch prints a line whenever the ride's figures change, keeps going
    through server restarts, and ends with the receipt. simulate prints what watch prints (and
    each zone change) while it reports the track's points; Ctrl-C stops it.
    """)

/// Everything the CLI prints, in one language per run.
struct Words: Sendable {
    let korean: Bool

    init(flag: String?, environment: [String: String]) {
        let lang = flag ?? environment["LC_ALL"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["LANG"] ?? ""
        korean = lang.lowercased().hasPrefix("ko")
    }

    func duration(_ s: Int64) -> String {
        let h = s / 3600, m = s % 3600 / 60, sec = s % 60
        if korean { return h > 0 ? "\(h)시간 \(m)분 \(sec)초" : "\(m)분 \(sec)초" }
        return h > 0 ? "\(h)h \(m)m \(sec)s" : "\(m)m \(sec)s"
    }

    /// `1,040원` / `1,040 KRW`; other currencies in major units with their code.
    func money(_ minor: Int64, _ currency: String) -> String {
        if currency == "KRW" {
            let digits = String(minor.magnitude)
            var grouped = ""
            for (i, c) in digits.enumerated() {
                if i > 0, (digits.count - i) % 3 == 0 { grouped.append(",") }
                grouped.append(c)
            }
            let sign = minor < 0 ? "-" : ""
            return korean ? sign + grouped + "원" : sign + grouped + " KRW"
        }
        guard let cur = Currency(code: currency) else { return "\(minor) \(currency)" }
        return cur.decimal(minor) + " " + currency
    }

    func state(_ s: RideState) -> String {
        switch s {
        case .riding: return korean ? "이용 중" : "riding"
        case .paused: return korean ? "일시정지" : "paused"
        case .ended: return korean ? "반납 완료" : "ended"
        }
    }

    /// `r-42 이용 중 3분 12초 · 1,040원 · 남은 시간 26분 48초`
    func line(_ s: RideSnapshot) -> String {
        var parts = ["\(s.ride) \(state(s.state)) \(duration(s.elapsed))", money(s.fare, s.currency)]
        if s.state == .paused || s.paused > 0 {
            parts.append(korean ? "일시정지 \(duration(s.paused))" : "paused \(duration(s.paused))")
        }
        if let r = s.remaining, s.state != .ended {
            parts.append(korean ? "남은 시간 \(duration(r))" : "\(duration(r)) left")
        }
        if let d = s.distance { parts.append(metres(d)) }
        return parts.joined(separator: " · ")
    }

    func warning(_ ride: String, _ remaining: Int64) -> String {
        korean ? "\(ride) 시간 제한까지 \(duration(remaining)) 남았습니다" : "\(ride) \(duration(remaining)) left before the time limit"
    }

    func receipt(_ r: Receipt) -> [String] {
        var out: [String] = []
        // A pause line of nothing says nothing (plans that do not bill pauses still carry one),
        // so it is left out, as the page leaves it out.
        for l in r.lines where !(l.label == .pause && l.amount == 0) {
            // The page's receipt words (public/i18n.js, receipt.*), so a rider reading both
            // sees one name per line; English in the CLI's lower case.
            let label = (korean
                ? ["unlock": "잠금 해제", "riding": "주행", "distance": "주행 거리", "pause": "일시정지 요금",
                   "cap": "요금 상한 할인", "floor": "할인 한도 조정"]
                : ["unlock": "unlock", "riding": "riding", "distance": "distance", "pause": "pause charge",
                   "cap": "fare cap", "floor": "discount limited to the fare"])[l.label.rawValue] ?? l.label.rawValue
            var text = label
            if let m = l.minutes { text += korean ? " \(m)분" : " \(m) min" }
            if let k = l.km { text += " \(k) km" }
            out.append("  \(text) \(money(l.amount, r.currency))")
        }
        let reason: String
        switch r.reason {
        case .timeLimit: reason = korean ? "시간 제한으로 종료" : "time limit reached"
        case .pauseLimit: reason = korean ? "일시정지 한도로 종료" : "pause limit reached"
        case .byOperator: reason = korean ? "운영자가 종료" : "ended by an operator"
        case .forced: reason = korean ? "운영자가 반납 불가 구역에서 강제 종료" : "ended by an operator where the zone rules refuse an end"
        case .rider: reason = korean ? "반납" : "returned by the rider"
        }
        out.append(korean ? "  합계 \(money(r.fare, r.currency)) (\(reason))" : "  total \(money(r.fare, r.currency)) (\(reason))")
        return out
    }

    func tokenHint(_ why: String) -> String {
        korean
            ? "서버가 토큰을 받지 않았습니다. --token TOKEN 또는 RIDEPUSH_TOKEN 으로 토큰을 주세요 (make run 이면 서버가 출력한 페이지 주소의 token= 부분, 아니면 ridepush token --control --sub RIDER)"
            : "the server refused the connection: \(why). Give a token with --token TOKEN or RIDEPUSH_TOKEN (with make run it is the token= part of the page URL the server printed; otherwise ridepush token --control --sub RIDER)"
    }

    func error(_ e: ProtocolError, ride: String?) -> String {
        guard korean else { return "error \(e.code.rawValue): \(e.message)" }
        let r = ride ?? ""
        switch e.code {
        case .rideNotFound: return "오류: \(r) 대여가 없습니다"
        case .invalidTransition: return "오류: 지금 상태에서는 할 수 없는 요청입니다 (\(r))"
        case .conflict: return "오류: 이미 있는 대여 번호입니다 (\(r))"
        case .forbidden: return "오류: 이 토큰으로는 할 수 없습니다 (\(r))"
        case .planNotFound: return "오류: 없는 요금제입니다"
        case .unavailable: return "오류: 서버가 지금 기록할 수 없습니다 (\(e.message)). 잠시 후 다시 시도하세요"
        case .rateLimited: return "오류: 요청이 너무 많습니다 (\(e.message)). 잠시 후 다시 시도하세요"
        case .startNotAllowed: return "오류: 대여를 시작할 수 없는 구역입니다 (\(e.message))"
        case .endNotAllowed: return "오류: 반납할 수 없는 구역입니다 (\(e.message))"
        case .positionRequired: return "오류: 최근 위치가 없어 반납할 수 없습니다. 위치를 보낸 뒤 다시 반납하세요"
        case .badRequest, .unknownType, .tooLarge, .tooManySubscriptions, .tooManyRides, .unauthorized:
            return "오류 \(e.code.rawValue)"
        }
    }

    /// `unavailable: ride storage is unavailable: …; retrying in 2 s (2/5)`: the server's answer at once.
    func retrying(_ r: RequestRetry) -> String {
        let secs = r.delay.components.seconds
        if korean {
            let what = r.error.code == .rateLimited ? "요청이 너무 많습니다" : "서버가 지금 기록할 수 없습니다"
            return "\(what) (\(r.error.message)). \(secs)초 후 다시 시도합니다 (\(r.attempt)/\(r.attempts))"
        }
        return "\(r.error.code.rawValue): \(r.error.message); retrying in \(secs) s (\(r.attempt)/\(r.attempts))"
    }

    func connection(_ s: ConnectionState, url: String) -> String? {
        switch s {
        case .waitingToReconnect(let delay, let reason):
            let secs = String(format: "%.1f", Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18)
            let why: String
            switch reason {
            case .closedByServer(let code, _):
                why = korean ? "서버가 연결을 닫음 (\(code))" : "closed by the server (\(code))"
            case .cannotConnect(let text):
                why = korean ? "\(url) 에 연결할 수 없음" : "cannot connect to \(url): \(text)"
            case .silent: why = korean ? "3초 동안 응답 없음" : "nothing received for 3 s"
            case .connectTimeout: why = korean ? "연결 시간 초과" : "connection timed out"
            case .tokenUnavailable: why = korean ? "토큰을 얻지 못함" : "no token"
            }
            return korean ? "연결 끊김: \(why). \(secs)초 후 다시 연결합니다" : "disconnected: \(why); reconnecting in \(secs) s"
        case .connected: return korean ? "연결됨: \(url)" : "connected to \(url)"
        default: return nil
        }
    }

    func gaveUp(_ url: String, seconds: Int, last: ConnectionState?) -> String {
        if case .waitingToReconnect(_, .cannotConnect(let text))? = last {
            return korean ? "\(url) 에 \(seconds)초 동안 연결할 수 없었습니다" : "cannot connect to \(url): \(text) (gave up after \(seconds) s)"
        }
        return korean ? "\(url) 에서 \(seconds)초 동안 답이 없었습니다" : "no answer from \(url) in \(seconds) s"
    }
}

/// Written from the client's tasks, read by the main thread after they finish.
final class Outcome: Sendable {
    let status = Mutex<Int32>(0)
    let lastState = Mutex<ConnectionState?>(nil)
}

func rideCommand(_ args: [String]) -> Int32 {
    let env = ProcessInfo.processInfo.environment
    let a: ParsedOptions
    do { a = try rideOptions.parse(args, environment: env) } catch { return usageFailure("ridepush ride", error) }
    if a.help || a.positional.isEmpty { print(rideOptions.help, terminator: ""); return a.help ? 0 : 2 }
    let words = Words(flag: a.string("--lang"), environment: env)
    let verb = a.positional[0]
    guard ["start", "pause", "resume", "end", "get", "share", "watch", "simulate"].contains(verb) else {
        return fail("ride: unknown action \(verb) (start, pause, resume, end, get, share, watch, simulate)")
    }
    if verb != "start", a.positional.count != 2 {
        return fail("ride \(verb): give the ride id, e.g. ridepush ride \(verb) r-42")
    }
    if verb == "start", a.positional.count > 1 { return usageFailure("ridepush ride", .unexpectedArgument(a.positional[1])) }
    let ride = verb == "start" ? "" : a.positional[1]
    let limit = a.int("--limit").map(Int64.init)
    let distance = a.int("--distance").map(Int64.init)
    let waitSeconds = a.int("--wait")!
    var track: Track?
    if verb == "simulate" {
        switch Track.load(path: a.string("--gpx"), speed: a.string("--speed")) {
        case .success(let t): track = t
        case .failure(let why): return fail("ride simulate: \(why)")
        }
    } else if let option = ["--gpx", "--speed"].first(where: { a.string($0) != nil }) {
        return fail("ride \(verb): \(option) is for simulate only")
    }
    if a.flag("--force"), verb != "end" { return fail("ride \(verb): --force is for end only") }
    let urlText = a.string("--url")!
    guard let url = URL(string: urlText), let scheme = url.scheme, ["ws", "wss"].contains(scheme), url.host != nil else {
        return fail("ride: --url \(urlText): expected ws://HOST:PORT/ws or wss://…")
    }
    let token = a.string("--token")
    let tokenFile = a.string("--token-file")
    if let f = tokenFile, (try? String(contentsOfFile: f, encoding: .utf8)) == nil {
        return fail("ride: --token-file \(f): cannot read the file")
    }

    // No log handler: the SDK (and libwebsockets under it) prints nothing; every failure is
    // reported below in the command's own words.
    signal(SIGPIPE, SIG_IGN)
    exitOnInterrupt()

    var config = RidePushClient.Configuration()
    config.transport = DefaultTransportFactory(allowSelfSigned: a.flag("--insecure"))
    let client = RidePushClient(url: url, configuration: config) {
        guard let tokenFile else { return token }
        let text = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }
    let outcome = Outcome()
    let done = DispatchSemaphore(value: 0)
    let watching = verb == "watch" || verb == "simulate"

    Task {
        var lostOnce = false
        for await s in client.connectionStates {
            outcome.lastState.withLock { $0 = s }
            guard watching else { continue }
            if case .waitingToReconnect = s { lostOnce = true }
            if case .connected = s, !lostOnce { continue }
            if let line = words.connection(s, url: urlText) { printErr(line) }
        }
    }

    Task {
        for await r in client.retries { printErr(words.retrying(r)) }
    }

    Task {
        defer { done.signal() }
        do {
            if let track {
                try await simulate(client, ride, track, words, outcome, wait: .seconds(waitSeconds))
            } else if watching {
                try await watch(client, ride, words)
            } else {
                let wait = Duration.seconds(waitSeconds)
                let reply: RideSnapshot?
                switch verb {
                case "start": reply = try await client.start(ride: a.string("--ride"), plan: a.string("--plan"),
                                                             limit: limit.map { .seconds($0) }, timeout: wait)
                case "pause": reply = try await client.pause(ride, timeout: wait)
                case "resume": reply = try await client.resume(ride, timeout: wait)
                case "end": reply = try await client.end(ride, distance: distance, force: a.flag("--force"), timeout: wait)
                case "get": reply = try await client.get(ride, timeout: wait)
                default:
                    let link = try await client.share(ride, timeout: wait)
                    print(absolute(link.url, from: url))
                    reply = nil
                }
                guard let snapshot = reply else { return }
                print(words.line(snapshot))
                if let r = snapshot.receipt { for l in words.receipt(r) { print(l) } }
            }
        } catch let e as RidePushError {
            outcome.status.withLock { $0 = 1 }
            switch e {
            case .server(let pe) where pe.code == .unauthorized: printErr(words.tokenHint(pe.message))
            case .server(let pe): printErr(words.error(pe, ride: ride.isEmpty ? a.string("--ride") : ride))
            case .closed(.unauthorized(let why)): printErr(words.tokenHint(why))
            case .timedOut: printErr(words.gaveUp(urlText, seconds: waitSeconds, last: outcome.lastState.withLock { $0 }))
            default: printErr("\(e)")
            }
        } catch {
            outcome.status.withLock { $0 = 1 }
            printErr("\(error)")
        }
        fflush(nil)
    }
    done.wait()
    client.close()
    fflush(nil)
    return outcome.status.withLock { $0 }
}

/// Prints one line whenever what a rider would see changes (ticks of a paused ride change
/// only the pause time; a tick in the same second as the snapshot changes nothing).
func watch(_ client: RidePushClient, _ ride: String, _ words: Words) async throws {
    try await watch(client.ride(ride), words)
}

func watch(_ feed: RideFeed, _ words: Words) async throws {
    let ride = feed.ride
    var last = ""
    for try await event in feed {
        switch event {
        case .state(let s), .ended(let s):
            let line = words.line(s)
            if line != last { print(line); last = line }
            if case .ended = event, let r = s.receipt { for l in words.receipt(r) { print(l) } }
        case .tick:
            guard let s = feed.latest else { continue }
            let line = words.line(s)
            if line != last { print(line); last = line }
        case .warning(let remaining):
            print(words.warning(ride, remaining))
        case .zone(let name, let rules):
            print(words.zone(ride, name, rules))
        }
        fflush(nil)
    }
}

/// The share reply's URL is relative to the page; the page is served where the WebSocket is.
func absolute(_ relative: String, from ws: URL) -> String {
    guard relative.hasPrefix("/"), var c = URLComponents(url: ws, resolvingAgainstBaseURL: false) else { return relative }
    c.scheme = c.scheme == "wss" ? "https" : "http"
    c.path = ""
    c.query = nil
    return (c.string ?? "") + relative
}

func printErr(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

/// Ctrl-C ends the command at once and quietly (exit 130), without a log line.
func exitOnInterrupt() {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGINT)
    sigaddset(&set, SIGTERM)
    pthread_sigmask(SIG_BLOCK, &set, nil)
    let blocked = set
    Thread.detachNewThread {
        var s = blocked
        var sig: Int32 = 0
        sigwait(&s, &sig)
        fflush(nil)
        exit(sig == SIGINT ? 130 : 143)
    }
}
