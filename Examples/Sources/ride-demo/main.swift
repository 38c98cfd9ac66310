import Foundation
import RideLiveActivity
import RidePushClient

// ride-demo URL: a ride from start to receipt through the SDK (its Live Activity's push token
// registered on the way), then the same through docs/sdk.md's RentalModel. The token comes
// from RIDEPUSH_TOKEN (none for a server with --auth none).
//   ride-demo ws://127.0.0.1:8080/ws
// ride-demo activity FILE…: each file a content-state (protocol/examples/push/content-state),
// printed as the lock screen shows it (LockScreenRide): what the widget draws, without ActivityKit.
// One line per step on stdout; any failure goes to stderr and exits 1.

let args = CommandLine.arguments
if args.count >= 3, args[1] == "activity" {
    do {
        for path in args.dropFirst(2) {
            let content = try JSONDecoder().decode(RideActivityContent.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            print("activity " + lockScreen(LockScreenRide(content)))
        }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("ride-demo: \(error)\n".utf8))
        exit(1)
    }
}
guard args.count == 2, let url = URL(string: args[1]), url.scheme == "ws" || url.scheme == "wss" else {
    FileHandle.standardError.write(Data("usage: ride-demo ws://HOST:PORT/ws   (token in RIDEPUSH_TOKEN)\n".utf8))
    exit(2)
}
let token = ProcessInfo.processInfo.environment["RIDEPUSH_TOKEN"]

func line(_ s: RideSnapshot) -> String {
    "\(s.ride) \(s.state.rawValue) elapsed=\(s.elapsed) paused=\(s.paused) fare=\(s.fare) \(s.currency)"
}

/// One lock screen as text: instants in Unix milliseconds, amounts in major units.
func lockScreen(_ r: LockScreenRide) -> String {
    func ms(_ d: Date?) -> String { d.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "-" }
    let fare = r.fare.map { "\($0) \(r.currency)" } ?? "-"
    let next = r.nextFare.map { "\($0.amount)@\(ms($0.at))" } ?? "-"
    return "\(r.content.ride) \(r.title) timer_start=\(ms(r.timerStart)) time=\(r.elapsedText) fare=\(fare) next=\(next) "
        + "limit=\(ms(r.limit)) zone=\(r.zoneText ?? "-")"
}

/// Waits (at most `seconds`) until `ready` holds, looking every 50 ms.
@MainActor func waitUntil(_ seconds: Double, _ what: String, _ ready: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !ready() {
        guard Date() < deadline else { throw DemoError("gave up waiting for \(what)") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

struct DemoError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// The SDK directly: start, watch, pause, resume, end.
func rideWithTheClient() async throws {
    var config = RidePushClient.Configuration()
    config.requestTimeout = .seconds(10)
    let client = RidePushClient(url: url, configuration: config) { token }
    defer { client.close() }
    let started = try await client.start(limit: .seconds(600))
    print("start " + line(started))
    // Where ActivityKit exists, RideActivityController.start(started) requests the activity and
    // registers each token it is given; here a made-up 32-byte token takes the same call.
    print("activity-start " + lockScreen(LockScreenRide(RideActivityContent(started))))
    let ack = try await client.registerPush(platform: .apns, kind: .liveActivity, ride: started.ride,
                                            token: APNsToken.hex(Data((0..<32).map { UInt8($0 * 8) })))
    print("push \(ack.type) \(ack.platform.rawValue) \(ack.kind.rawValue) \(ack.ride ?? "-")")
    let feed = client.ride(started.ride)
    let watcher = Task { try await follow(feed) }
    // A second of riding as the feed shows it (ticks folded into `latest`), then pause and
    // resume a second apart.
    let deadline = Date().addingTimeInterval(5)
    while (feed.latest?.elapsed ?? 0) < 1 {
        guard Date() < deadline else { throw DemoError("no tick within 5 s") }
        try await Task.sleep(for: .milliseconds(50))
    }
    print("pause " + line(try await client.pause(started.ride)))
    try await Task.sleep(for: .seconds(1))
    print("resume " + line(try await client.resume(started.ride, timeout: .seconds(5))))
    let ended = try await client.end(started.ride, distance: 1200)
    print("end " + line(ended))
    for l in ended.receipt?.lines ?? [] { print("receipt \(l.label) \(l.amount)") }
    let ticks = try await watcher.value
    print("watched \(ticks) ticks")
}

/// docs/sdk.md's view model, driven as the buttons would drive it.
@MainActor func rideWithTheModel() async throws {
    let model = RentalModel(server: url) { token }
    await model.rent()
    guard let id = model.ride?.ride, model.state == .riding else { throw DemoError("rent: \(model.problem ?? "no ride")") }
    try await waitUntil(5, "the model's first tick") { model.isLive && (model.ride?.elapsed ?? 0) >= 1 }
    print("model rent \(id) \(model.이용시간) \(model.결제금액) live=\(model.isLive)")
    await model.pause()
    print("model pause \(model.state?.rawValue ?? "-")")
    await model.resume()
    print("model resume \(model.state?.rawValue ?? "-")")
    await model.giveBack()
    guard model.state == .ended, let receipt = model.ride?.receipt else { throw DemoError("giveBack: \(model.problem ?? "not ended")") }
    print("model giveBack \(model.state?.rawValue ?? "-") \(model.결제금액) lines=\(receipt.lines.map(\.label.rawValue).joined(separator: ","))")
}

do {
    try await rideWithTheClient()
    try await rideWithTheModel()
    print("done")
} catch {
    FileHandle.standardError.write(Data("ride-demo: \(error)\n".utf8))
    exit(1)
}
