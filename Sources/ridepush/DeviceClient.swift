import CLibWebSockets
import Foundation
import RideCore

let rideUsage = """
usage: ridepush ride start [--ride ID] [--plan PLAN] [--limit SECONDS]
       ridepush ride pause|resume|end ID
       ridepush ride watch ID
options:
  --url ws://HOST:PORT/ws   server (RIDEPUSH_URL, default ws://127.0.0.1:8080/ws); wss:// for TLS
  --token TOKEN             bearer token (RIDEPUSH_TOKEN)
  --insecure                with wss://, accept a self-signed certificate
  --help

A device client over ride.v1 on libwebsockets' client side: start/pause/resume/end print the
ride's state line and exit (0 on success, 1 on an error reply); watch prints one line per tick
(e.g. `r-42 riding 3분 12초 1,040원`) until the ride ends.
"""

/// One request over one connection, or a live watch. Service-thread only (the main thread
/// runs the lws loop), so no lock.
final class DeviceClient {
    let request: [UInt8]
    let watching: String?
    var done = false
    var status: Int32 = 0
    var sent = false

    init(request: [UInt8], watching: String?) {
        self.request = request
        self.watching = watching
    }

    func handle(_ text: [UInt8]) {
        guard let msg = try? JSON.parse(text), let type = msg["type"]?.string else { return }
        switch type {
        case "error":
            FileHandle.standardError.write(Data("error \(msg["code"]?.string ?? "?"): \(msg["message"]?.string ?? "")\n".utf8))
            status = 1
            done = true
        case "state":
            print(line(msg))
            if let receipt = msg["receipt"], watching == nil || msg["state"]?.string == "ended" {
                printReceipt(receipt)
            }
            if watching == nil || msg["state"]?.string == "ended" { done = true }
        case "tick":
            print(line(msg))
        case "warning":
            print("\(msg["ride"]?.string ?? "") \(msg["remaining"]?.int ?? 0)s left before the time limit")
        default:
            break
        }
        fflush(nil)
    }

    func line(_ m: JSON) -> String {
        let ride = m["ride"]?.string ?? "?"
        let state = m["state"]?.string ?? "?"
        let elapsed = m["elapsed"]?.int ?? 0
        let fare = m["fare"]?.int ?? 0
        let currency = m["currency"]?.string ?? "KRW"
        return "\(ride) \(state) \(koreanDuration(elapsed)) \(money(fare, currency))"
    }

    func printReceipt(_ r: JSON) {
        let currency = r["currency"]?.string ?? "KRW"
        for l in r["lines"]?.array ?? [] {
            let minutes = l["minutes"]?.int.map { " \($0)분" } ?? ""
            print("  \(l["label"]?.string ?? "")\(minutes) \(money(l["amount"]?.int ?? 0, currency))")
        }
        print("  total \(money(r["fare"]?.int ?? 0, currency)) (\(r["reason"]?.string ?? "rider"))")
    }
}

func koreanDuration(_ s: Int64) -> String {
    s >= 3600 ? "\(s / 3600)시간 \(s % 3600 / 60)분 \(s % 60)초" : "\(s / 60)분 \(s % 60)초"
}

/// `1,040원` for KRW; other currencies as minor units with their code.
func money(_ minor: Int64, _ currency: String) -> String {
    let digits = String(minor.magnitude)
    var grouped = ""
    for (i, c) in digits.enumerated() {
        if i > 0, (digits.count - i) % 3 == 0 { grouped.append(",") }
        grouped.append(c)
    }
    let sign = minor < 0 ? "-" : ""
    if currency == "KRW" { return sign + grouped + "원" }
    guard let cur = Currency(code: currency) else { return "\(minor) \(currency)" }
    return cur.decimal(minor) + " " + currency
}

func deviceCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                    _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    guard let wsi, let ctx = lws_get_context(wsi), let u = lws_context_user(ctx) else { return 0 }
    let client = Unmanaged<DeviceClient>.fromOpaque(u).takeUnretainedValue()
    switch reason {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        lws_callback_on_writable(wsi)
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if client.done { return -1 }
        guard !client.sent else { return 0 }
        client.sent = true
        let pre = Int(clws_pre())
        var buf = [UInt8](repeating: 0, count: pre) + client.request
        let n = buf.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, $0.count - pre, LWS_WRITE_TEXT) }
        if n < client.request.count { return -1 }
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if let input { client.handle(Array(UnsafeRawBufferPointer(start: input, count: len))) }
        if client.done { lws_callback_on_writable(wsi) }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        let why = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "unknown"
        FileHandle.standardError.write(Data("cannot connect: \(why)\n".utf8))
        client.status = 1
        client.done = true
    case LWS_CALLBACK_CLIENT_CLOSED:
        if !client.done {
            FileHandle.standardError.write(Data("connection closed by the server\n".utf8))
            client.status = 1
        }
        client.done = true
    default:
        break
    }
    return 0
}

func rideCommand(_ args: [String]) -> Int32 {
    let a: Arguments
    do {
        a = try Arguments(args, valued: ["--url", "--token", "--ride", "--plan", "--limit"], switches: ["--help", "-h", "--insecure"])
    } catch { return fail("ride: \(error)") }
    if a.has("--help") || a.has("-h") || a.positional.isEmpty { print(rideUsage); return a.positional.isEmpty && !a.has("--help") ? 2 : 0 }
    let env = ProcessInfo.processInfo.environment
    let verb = a.positional[0]
    var w = JSONWriter()
    w.beginObject()
    w.field("type", verb == "watch" ? "subscribe" : verb)
    w.field("id", "cli-" + UUID().uuidString.lowercased())
    switch verb {
    case "start":
        if let r = a["--ride"] { w.field("ride", r) }
        if let p = a["--plan"] { w.field("plan", p) }
        if let l = a["--limit"] {
            guard let n = Int64(l), n > 0 else { return fail("ride start: --limit must be whole seconds") }
            w.field("limit", n)
        }
    case "pause", "resume", "end", "watch":
        guard a.positional.count == 2 else { return fail("ride \(verb): give the ride id, e.g. ridepush ride \(verb) r-42") }
        w.field("ride", a.positional[1])
    default:
        return fail("ride: unknown action \(verb) (start, pause, resume, end, watch)")
    }
    w.endObject()

    let urlText = a["--url"] ?? env["RIDEPUSH_URL"] ?? "ws://127.0.0.1:8080/ws"
    guard let url = URLComponents(string: urlText), let scheme = url.scheme, ["ws", "wss"].contains(scheme), let host = url.host else {
        return fail("ride: --url \(urlText): expected ws://HOST:PORT/ws or wss://…")
    }
    var path = url.path.isEmpty ? "/ws" : url.path
    if let token = a["--token"] ?? env["RIDEPUSH_TOKEN"] { path += "?token=" + token }
    let client = DeviceClient(request: w.bytes, watching: verb == "watch" ? a.positional[1] : nil)
    let retained = Unmanaged.passRetained(client)
    defer { retained.release() }

    let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
    protocols[0] = lws_protocols()
    protocols[0].name = UnsafePointer(strdup("ride.v1"))
    protocols[0].callback = deviceCallback
    protocols[0].rx_buffer_size = 65536
    protocols[1] = lws_protocols()
    var info = lws_context_creation_info()
    info.port = CONTEXT_PORT_NO_LISTEN
    info.protocols = UnsafePointer(protocols)
    info.user = retained.toOpaque()
    if scheme == "wss" { info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) }
    guard let ctx = lws_create_context(&info) else { return fail("ride: could not create the client context") }
    defer { lws_context_destroy(ctx) }

    var ci = lws_client_connect_info()
    ci.context = ctx
    let port = url.port ?? (scheme == "wss" ? 443 : 80)
    ci.port = Int32(port)
    ci.address = UnsafePointer(strdup(host))
    ci.path = UnsafePointer(strdup(path))
    ci.host = UnsafePointer(strdup("\(host):\(port)"))
    ci.origin = ci.host
    ci.protocol = UnsafePointer(strdup("ride.v1"))
    if scheme == "wss" {
        ci.ssl_connection = Int32(LCCSCF_USE_SSL.rawValue)
        if a.has("--insecure") {
            ci.ssl_connection |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue)
        }
    }
    guard lws_client_connect_via_info(&ci) != nil else { return fail("ride: cannot connect to \(urlText)") }
    waitForSignals(then: { exit(130) })
    while !client.done {
        if lws_service(ctx, 0) < 0 { break }
    }
    // Let the close go out.
    for _ in 0..<3 { lws_service(ctx, -1) }
    return client.status
}
