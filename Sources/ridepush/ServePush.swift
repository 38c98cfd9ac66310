import Foundation
import RideAuth
import RideCore
import RideDevicePush
import RideHTTPClient
import RideOptions
import RidePushSender
import RideService
import RideStore
import RideStorePostgres
import RideStoreSQLite
import RideWebhooks

/// The device-push sender `serve`'s flags ask for (docs/push.md), on its own view of the store,
/// or nil when neither APNs nor FCM is configured. `close` runs after the server stopped it.
func devicePushSender(_ o: ParsedOptions, store: RideStore, config c: ServerConfig) throws(ServerError) -> (sender: PushSender, close: () -> Void)? {
    let apnsFlags = ["--apns-key-file", "--apns-key-id", "--apns-team-id", "--apns-topic"]
    let given = apnsFlags.filter { o.string($0) != nil }
    guard wantsDevicePush(o) else { return nil }
    guard given.isEmpty || given.count == apnsFlags.count else {
        throw ServerError("\(apnsFlags.filter { o.string($0) == nil }.joined(separator: ", ")) missing: APNs needs \(apnsFlags.joined(separator: ", ")) together")
    }
    let client: HTTPClient
    // APNs and FCM speak HTTP/2: a few connections each, every push a stream on one of them
    // (Apple asks providers to reuse connections rather than open one per burst).
    do { client = try HTTPClient(caFile: c.outboundCAFile, maxHostConnections: 4) } catch { throw ServerError("--outbound-ca-file: \(error.message)") }
    var settings = PushSender.Settings(client: client)
    settings.schedule.dismissAfter = Int64(o.int("--live-activity-dismiss-after")!) * 1000
    if let file = o.string("--apns-key-file") {
        guard let pem = FileManager.default.contents(atPath: file) else { throw ServerError("--apns-key-file \(file): cannot read it") }
        do {
            let key = try SigningKey.pem(Array(pem), name: file)
            let credentials = try APNsCredentials(keyID: o.string("--apns-key-id")!, teamID: o.string("--apns-team-id")!, key: key)
            settings.apns = PushSender.APNs(credentials: credentials, topic: o.string("--apns-topic")!, url: try baseURL(o, "--apns-url"))
        } catch let e as KeyError { throw ServerError("--apns-key-file: \(e.message)") } catch let e as ServerError { throw e } catch {
            throw ServerError("--apns-key-file: \(error)")
        }
    }
    if let file = o.string("--fcm-service-account") {
        guard let json = FileManager.default.contents(atPath: file) else { throw ServerError("--fcm-service-account \(file): cannot read it") }
        do {
            settings.fcm = PushSender.FCM(account: try FCMServiceAccount(json: Array(json), name: file), url: try baseURL(o, "--fcm-url"))
        } catch let e as KeyError { throw ServerError("--fcm-service-account: \(e.message)") } catch let e as ServerError { throw e } catch {
            throw ServerError("--fcm-service-account: \(error)")
        }
    }
    let outbox: PushIntentOutbox
    var close: () -> Void = {}
    if let pg = store as? PostgresStore {
        let o = PostgresPushIntents(pg.settings)
        outbox = o
        close = { o.close() }
    } else if store is SQLiteStore {
        do {
            let o = try SQLitePushIntents(path: c.store)
            outbox = o
            close = { o.close() }
        } catch { throw ServerError("--store \(c.store): push outbox: \(error.message)") }
    } else if let memory = store as? MemoryStore, let rows = memory.outboxSink as? MemoryOutbox {
        outbox = MemoryPushIntents(outbox: rows, store: memory)
    } else {
        throw ServerError("device pushes need the store's outbox")
    }
    let sender = PushSender(settings: settings, outbox: outbox) { a in
        // The push log: every answer, so an outage reads as attempts and a dropped token as such.
        Log.info("push \(a.target.platform.rawValue) \(a.push.event.rawValue) p\(a.push.priority.rawValue) ride \(a.push.content.ride) \(a.push.content.state.rawValue) to …\(a.target.token.suffix(8)): \(a.status.map(String.init) ?? "no answer") \(a.verdict)",
                 ["ride": .string(a.push.content.ride), "platform": .string(a.target.platform.rawValue), "event": .string(a.push.event.rawValue)])
    }
    return (sender, close)
}

/// Whether any APNs or FCM flag was given.
func wantsDevicePush(_ o: ParsedOptions) -> Bool {
    ["--apns-key-file", "--apns-key-id", "--apns-team-id", "--apns-topic", "--fcm-service-account"].contains { o.string($0) != nil }
}

/// `--apns-url`, `--fcm-url`: an https (or, for a local stand-in, http) base without a trailing slash.
private func baseURL(_ o: ParsedOptions, _ flag: String) throws(ServerError) -> String {
    var url = o.string(flag)!
    while url.hasSuffix("/") { url.removeLast() }
    guard url.hasPrefix("https://") || url.hasPrefix("http://") else { throw ServerError("\(flag) \(url): not an https:// URL") }
    return url
}
