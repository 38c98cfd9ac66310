import RideAuth
import RideCore
import RideWebhooks

/// Everything `ridepush serve` can be told; defaults are the documented ones.
public struct ServerConfig: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var publicDir = "./public"
    /// A file path, or "memory" for a throw-away server.
    public var store = "./ridepush.db"
    public var plans: [FarePlan] = [.standard]
    public var threads = 1
    /// Largest client message; bigger ones get `too_large`.
    public var maxFrame = 4096
    public var maxSubscriptions = 32
    /// Open rides one rider may have (every open ride is encoded every second, watched or
    /// not); past it a start gets `too_many_rides`. Tokens with `ops` are exempt.
    public var maxOpenRidesPerRider = 5
    public var maxConnectionsPerIP = 4096
    /// Count a loopback peer (a reverse proxy on this host) by its X-Real-IP / X-Forwarded-For.
    public var trustProxy = false
    /// Control messages per second per connection before `rate_limited`.
    public var controlRate = 20
    /// Seconds without a pong before a dead peer is dropped; pings go out at half of it.
    public var keepalive = 30
    public var handshakeTimeout = 10
    /// Seconds a subscriber may stay unable to take its ticks before it is disconnected.
    public var slowConsumerLag = 10
    public var allowedOrigins: [String] = []
    public var tlsCert: String?
    public var tlsKey: String?
    public var auth: AuthMode = .none
    /// The identity provider's keys (`--jwks-file`, `--jwt-public-key`), loaded at start and
    /// re-read from these files on SIGHUP; what its tokens must say (`--jwt-issuer`, …).
    public var jwksFile: String?
    public var jwtPublicKeyFile: String?
    public var identityKeys: KeySet = .empty
    /// `--jwks-url`: the keys are fetched from the provider instead (docs/jwks.md), and what
    /// the fetches achieved, for /metrics and /healthz (nil without it).
    public var jwksURL: String?
    public var keySource: KeySourceStatus?
    public var tokenPolicy = TokenVerifier.Policy()
    /// Tests only (`--ws-echo BYTES`): serve the echo WebSocket at /echo (EchoEndpoint.swift)
    /// taking messages up to this size; nil (the default): no /echo.
    public var wsEcho: Int?
    /// `--webhook` URLs: each committed transition is POSTed to every one (docs/webhooks.md).
    public var webhooks: [String] = []
    /// The endpoints with their event types and keys (`--webhook URL#types`,
    /// `--webhook-secret-file`: one secret per line, every one signs), re-read on SIGHUP.
    public var webhookRoster = WebhookRoster([])
    /// `/healthz` says `degraded` while a delivery has waited longer than this (ms).
    public var webhookHealthAge: Int64 = 15 * 60_000
    /// `--outbound-ca-file`: PEM certificates every outbound https call (webhooks, and any
    /// other call out) trusts besides the system's store; nil: the system's store only.
    public var outboundCAFile: String?
    /// With APNs or FCM configured: the device-push sender (docs/push.md), started and stopped
    /// with the server.
    public var devicePush: (any DevicePushOutlet)?
    /// `--zones`: the GBFS geofencing_zones.json as loaded, and its bytes (`GET /zones`).
    public var zones: Geofencing?
    public var zonesDocument: [UInt8]?
    /// `--max-speed-kph`: a position implying more, from the last accepted one, is dropped.
    public var maxSpeedKph: Double = 60
    /// `--retain-ended DAYS`: ended rides older than this are deleted (docs/retention.md);
    /// nil (the default): every ride is kept.
    public var retainEndedDays: Int?
    /// `--drain-seconds`: on SIGTERM the WebSockets are closed with 1012 spread over this many
    /// seconds (DrainPlan), so riders reconnect to the other nodes in a trickle; 0 closes them
    /// all at once (and SIGINT, a person at a terminal, always does).
    public var drainSeconds = 10

    public enum AuthMode: Sendable {
        case none
        /// Tokens required: HS256 with `secret` when set, and/or `identityKeys`.
        case jwt(secret: [UInt8]?)
    }

    public init() {}
}

/// A startup problem explained for the person running the server.
public struct ServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
