import Glibc
import Synchronization

/// One `--webhook`: where events go, which types it takes, and the keys its deliveries are
/// signed with (several while a secret is rolled: every one signs, Stripe's `v1=` repeated).
public struct WebhookEndpoint: Sendable, Equatable {
    /// The URL without `#types`: the outbox rows' `endpoint`, so a changed filter is the same lane.
    public let url: String
    /// nil: every type.
    public let types: Set<String>?
    public var secrets: [[UInt8]]

    public init(url: String, types: Set<String>? = nil, secrets: [[UInt8]] = []) {
        self.url = url
        self.types = types
        self.secrets = secrets
    }

    public func wants(_ type: String) -> Bool { types?.contains(type) ?? true }

    /// `URL` or `URL#ride.ended,ride.started`: the URL checked, the types known ones.
    public static func parse(_ flag: String) throws(WebhookSecretError) -> WebhookEndpoint {
        let hash = flag.firstIndex(of: "#")
        let url = String(flag[..<(hash ?? flag.endIndex)])
        do { _ = try WebhookURL(url) } catch { throw WebhookSecretError(message: error.message) }
        guard let hash else { return WebhookEndpoint(url: url) }
        let known = WebhookEventType.allCases.map(\.rawValue)
        let types = flag[flag.index(after: hash)...].split(separator: ",").map(String.init)
        for t in types where !known.contains(t) {
            throw WebhookSecretError(message: "\(flag): unknown event type \"\(t)\" (known: \(known.joined(separator: ", ")))")
        }
        guard !types.isEmpty else { throw WebhookSecretError(message: "\(flag): no event type after #") }
        return WebhookEndpoint(url: url, types: Set(types))
    }
}

/// The endpoints as configured now, shared by the store worker (which rows a transition
/// writes) and the sender (which keys sign): replaced whole on SIGHUP. Secrets of an endpoint
/// no longer configured are kept, so its rows still pending go out signed as before.
public final class WebhookRoster: Sendable {
    private let state: Mutex<(endpoints: [WebhookEndpoint], retired: [String: [[UInt8]]])>

    public init(_ endpoints: [WebhookEndpoint]) {
        state = Mutex((endpoints, [:]))
    }

    public var endpoints: [WebhookEndpoint] { state.withLock { $0.endpoints } }

    public func replace(_ endpoints: [WebhookEndpoint]) {
        state.withLock { s in
            for old in s.endpoints where !endpoints.contains(where: { $0.url == old.url }) { s.retired[old.url] = old.secrets }
            s.endpoints = endpoints
        }
    }

    /// The keys `url`'s deliveries are signed with (nil: never configured).
    public func secrets(for url: String) -> [[UInt8]]? {
        state.withLock { s in s.endpoints.first { $0.url == url }?.secrets ?? s.retired[url] }
    }

    /// `--webhook` and `--webhook-secret-file` as given: one file for every endpoint, or one
    /// per `--webhook` in the same order; each file one secret per line (every one signs).
    /// With a file each, no two endpoints may share a key (a receiver could replay to another).
    ///
    /// `endpointsFile` (`--webhook-endpoints-file`, re-read on SIGHUP) adds one endpoint per
    /// line, `URL[#types] [SECRET_FILE]` (`#` at the start of a line is a comment); a line
    /// without its own secret file takes the one `--webhook-secret-file`.
    public static func configure(webhooks: [String], secretFiles files: [String], endpointsFile: String? = nil) throws(WebhookSecretError) -> [WebhookEndpoint] {
        var endpoints = [WebhookEndpoint]()
        for flag in webhooks { endpoints.append(try WebhookEndpoint.parse(flag)) }
        var listed = [WebhookEndpoint]()
        if let endpointsFile {
            let text = String(decoding: try readSecretFile(endpointsFile, limit: 65_536), as: UTF8.self)
            // Characters: "\r\n" is one, a newline.
            for (n, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let words = line.split(whereSeparator: \.isWhitespace)
                guard let first = words.first, !first.hasPrefix("#") else { continue }
                guard words.count <= 2 else {
                    throw WebhookSecretError(message: "\(endpointsFile) line \(n + 1): URL[#types] [SECRET_FILE], nothing more")
                }
                var endpoint = try WebhookEndpoint.parse(String(first))
                if words.count == 2 {
                    endpoint.secrets = try loadWebhookSecrets(file: String(words[1]))
                } else if files.count != 1 {
                    throw WebhookSecretError(message: "\(endpointsFile) line \(n + 1): no secret file on the line and no single --webhook-secret-file for it")
                }
                listed.append(endpoint)
            }
            guard !listed.isEmpty || !endpoints.isEmpty else { throw WebhookSecretError(message: "\(endpointsFile): no endpoint in it") }
        }
        if endpoints.isEmpty {
            let shared = files.count == 1 ? try loadWebhookSecrets(file: files[0]) : []
            return listed.map { e in var e = e; if e.secrets.isEmpty { e.secrets = shared }; return e }
        }
        guard !files.isEmpty else {
            throw WebhookSecretError(message: "--webhook needs --webhook-secret-file F (RIDEPUSH_WEBHOOK_SECRET_FILE): the key receivers verify RidePush-Signature with (make one: openssl rand -hex 32 > F)")
        }
        guard files.count == 1 || files.count == endpoints.count else {
            throw WebhookSecretError(message: "--webhook-secret-file given \(files.count) times for \(endpoints.count) --webhook URLs: give it once (one key for all) or once per --webhook, in the same order")
        }
        var keys = [[[UInt8]]]()
        for f in files { keys.append(try loadWebhookSecrets(file: f)) }
        if files.count > 1 {
            let all = keys.flatMap { $0 }
            guard Set(all).count == all.count else {
                throw WebhookSecretError(message: "--webhook-secret-file: two endpoints share a key; give each --webhook its own (openssl rand -hex 32 > F)")
            }
        }
        for i in endpoints.indices { endpoints[i].secrets = keys[files.count == 1 ? 0 : i] }
        return endpoints + listed.map { e in var e = e; if e.secrets.isEmpty { e.secrets = keys[0] }; return e }
    }
}

/// `--webhook-secret-file`: one secret per line (trailing whitespace dropped, blank lines
/// skipped), each at least 32 bytes. Several lines are a roll in progress: every one signs.
public func loadWebhookSecrets(file: String) throws(WebhookSecretError) -> [[UInt8]] {
    let bytes = try readSecretFile(file)
    var secrets = [[UInt8]]()
    for var line in bytes.split(separator: 0x0A, omittingEmptySubsequences: true).map(Array.init) {
        while let last = line.last, last == 0x0D || last == 0x20 || last == 0x09 { line.removeLast() }
        guard !line.isEmpty else { continue }
        guard line.count >= 32 else {
            throw WebhookSecretError(message: "webhook secret file \(file): line \(secrets.count + 1) holds \(line.count) bytes; at least 32 are needed (try: openssl rand -hex 32)")
        }
        secrets.append(line)
    }
    guard !secrets.isEmpty else {
        throw WebhookSecretError(message: "webhook secret file \(file) holds 0 bytes; at least 32 are needed (try: openssl rand -hex 32)")
    }
    return secrets
}
