import Foundation
import RideCore
import RideHTTPClient
import RideWebhooks

// The webhook sender without the server, for tests/test_webhooks_sender.py: the real event
// encoder, signature, retry schedule, sender machine and loop, and HTTP client, fed from a memory
// outbox. One JSON object per output line. The secret comes from RIDEPUSH_WEBHOOK_SECRET.
//   ridepush-webhook-probe send URL RIDES [--timeout MS] [--give-up MS] [--limit S] [--ca-file PEM]
//       commits RIDES rides' four transitions, interleaved, then delivers them; prints every
//       attempt, then a summary once nothing is pending (or after --limit seconds, default 60)
//   ridepush-webhook-probe sign TIMESTAMP      the signature header of stdin's bytes

signal(SIGPIPE, SIG_IGN)
let args = CommandLine.arguments
guard let secretText = ProcessInfo.processInfo.environment["RIDEPUSH_WEBHOOK_SECRET"], !secretText.isEmpty else {
    FileHandle.standardError.write(Data("ridepush-webhook-probe: set RIDEPUSH_WEBHOOK_SECRET\n".utf8))
    exit(2)
}
let secret = Array(secretText.utf8)

/// One line, written at once (unbuffered), so a reader sees each attempt as it happens.
@Sendable func emit(_ build: (inout JSONWriter) -> Void) {
    var w = JSONWriter()
    w.beginObject()
    build(&w)
    w.endObject()
    FileHandle.standardOutput.write(Data(w.bytes + [0x0A]))
}

func option(_ name: String) -> Int64? {
    guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
    return Int64(args[i + 1])
}

switch args.count > 1 ? args[1] : "" {
case "sign" where args.count == 3:
    guard let t = Int64(args[2]) else { exit(2) }
    let body = Array(FileHandle.standardInput.readDataToEndOfFile())
    print(WebhookSignature.header(secret: secret, timestamp: t, body: body))

case "send" where args.count >= 4:
    let url = args[2]
    do { _ = try WebhookURL(url) } catch {
        FileHandle.standardError.write(Data("ridepush-webhook-probe: \(error.message)\n".utf8))
        exit(2)
    }
    guard let rides = Int(args[3]), rides > 0 else { exit(2) }
    let clock = SystemClock()
    let outbox = MemoryOutbox()
    // Interleaved commits: every ride starts, then every ride pauses, and so on, as a busy
    // server would commit them; each ride's four events must still arrive in this order.
    for type in WebhookEventType.allCases {
        for r in 0..<rides {
            let id = "r-\(r)"
            var w = JSONWriter()
            w.beginObject()
            w.field("id", id)
            w.field("state", type == .ended ? "ended" : type == .paused ? "paused" : "active")
            w.endObject()
            let event = WebhookEvent(type: type, rideID: id, created: clock.now(), ride: w.bytes)
            outbox.append(event, endpoints: [url])
        }
    }
    var settings = WebhookSender.Settings(secret: secret)
    if let timeout = option("--timeout") { settings.timeout = timeout }
    if let giveUp = option("--give-up") { settings.schedule = RetrySchedule(giveUpAfter: giveUp) }
    if let i = args.firstIndex(of: "--ca-file"), i + 1 < args.count {
        do { settings.client = try HTTPClient(caFile: args[i + 1]) } catch {
            FileHandle.standardError.write(Data("ridepush-webhook-probe: \(error.message)\n".utf8))
            exit(2)
        }
    }
    let sender = WebhookSender(settings: settings, outbox: outbox, clock: clock) { attempt in
        emit { w in
            w.field("seq", attempt.row.seq)
            w.field("event", attempt.row.eventID)
            w.field("ride", attempt.row.rideID)
            w.field("result", attempt.result.summary)
            switch attempt.update {
            case .delivered(_, let n): w.field("update", "delivered"); w.field("attempts", Int64(n))
            case .retry(_, let n, let at, _): w.field("update", "retry"); w.field("attempts", Int64(n)); w.field("retry_in_ms", at - attempt.at)
            case .dead(_, let n, _): w.field("update", "dead"); w.field("attempts", Int64(n))
            }
            w.field("at", attempt.at)
        }
    }
    let started = clock.now()
    let limit = (option("--limit") ?? 60) * 1000
    sender.start()
    while !outbox.pendingRows.isEmpty, clock.now() - started < limit {
        usleep(20_000)
    }
    sender.stop()
    let counts = sender.counts
    // The sender's view as /metrics would show it, refreshed by one more outbox read.
    let metrics = WebhookMetrics(outbox: outbox.stats(), attempts: counts).prometheusText(now: clock.now())
    emit { w in
        w.field("pending", Int64(outbox.pendingRows.count))
        w.field("dead", Int64(outbox.deadRows.count))
        w.field("delivered", Int64(counts.delivered))
        w.field("retried", Int64(counts.retried))
        w.field("elapsed_ms", clock.now() - started)
        w.field("metrics", metrics)
    }

default:
    FileHandle.standardError.write(Data("usage: ridepush-webhook-probe send URL RIDES [--timeout MS] [--give-up MS] [--limit S] [--ca-file PEM] | sign TIMESTAMP\n".utf8))
    exit(2)
}
