import Foundation
import RideAuth
import RideCore
import RideOptions
import RidePushServer
import RideService
import RideStore
import RideStorePostgres
import RideStoreSQLite
import RideHTTPClient
import RideWebhooks

/// `ridepush serve`'s options, one line each: parsed and printed by `--help` from this table.
let serveOptions: OptionTable = {
    let d = ServerConfig()
    return OptionTable(usage: "usage: ridepush serve [options]", about: """
        Serves the page, /healthz, /metrics, /rides/{id}, /plans, /quote and the WebSocket
        protocol ride.v1 at /ws, on one port. Most options can also come from the environment.
        """, options: [
        .string("--host", placeholder: "ADDR", env: "RIDEPUSH_HOST", default: d.host, help: "address to bind: IPv4, IPv6 (::1, :: for every interface) or localhost; 0.0.0.0: every IPv4 interface"),
        .int("--port", range: 0...65535, env: "RIDEPUSH_PORT", default: d.port, help: "port, 0 picks a free one"),
        .string("--public", placeholder: "DIR", env: "RIDEPUSH_PUBLIC", default: d.publicDir, help: "the page's folder"),
        .string("--store", placeholder: "PATH|memory|postgresql://USER@HOST:PORT/DB", env: "RIDEPUSH_STORE", default: d.store, help: "SQLite ride journal; memory keeps rides only while the process runs; a libpq URI shares one PostgreSQL store between nodes, see deploy/README.md"),
        .flag("--create-store", env: "RIDEPUSH_CREATE_STORE", help: "make the SQLite store file if it does not exist; without it a missing file is refused, so a mistyped path cannot start an empty store"),
        .string("--store-password-file", placeholder: "F", env: "RIDEPUSH_STORE_PASSWORD_FILE", help: "PostgreSQL password, first line of F; else from the URI, PGPASSFILE or ~/.pgpass"),
        .string("--plans", placeholder: "FILE", env: "RIDEPUSH_PLANS", help: "GBFS system_pricing_plans.json with the fare plans; without it the built-in plan"),
        .string("--zones", placeholder: "FILE", env: "RIDEPUSH_ZONES", help: "GBFS geofencing_zones.json (2.1 to 3.1): refuse starts and ends where its rules do, push zone changes, served at /zones (docs/zones.md)"),
        .int("--max-speed-kph", placeholder: "KPH", range: 1...1000, env: "RIDEPUSH_MAX_SPEED_KPH", default: 60, help: "a reported position implying more than this from the last one is dropped (counted on /metrics)"),
        .choice("--auth", of: ["jwt", "none"], env: "RIDEPUSH_AUTH", default: "jwt", help: "jwt: tokens required; none: anyone may do anything, refused with a non-loopback --host"),
        .string("--jwt-secret-file", placeholder: "FILE", help: "HS256 secret, or RIDEPUSH_JWT_SECRET; without either a random secret is made once and kept in ridepush.secret beside the SQLite store (mode 0600; per process with --store memory or PostgreSQL), and the page, device-client and operator console links are printed with tokens"),
        // The identity provider's tokens (docs/jwks.md); re-read on SIGHUP.
        .string("--jwks-file", placeholder: "FILE", env: "RIDEPUSH_JWKS_FILE", help: "the identity provider's public keys as a JWKS (RS256, ES256, EdDSA), chosen by the token's kid; re-read on SIGHUP"),
        .string("--jwks-url", placeholder: "URL", env: "RIDEPUSH_JWKS_URL", help: "fetch the identity provider's JWKS from this https:// URL instead (Keycloak's …/protocol/openid-connect/certs, Auth0's /.well-known/jwks.json; a private CA with --outbound-ca-file): refreshed on its Cache-Control max-age within 5 min to 24 h, at once for an unknown kid (at most once a minute) and on SIGHUP; a failed fetch keeps the last good set"),
        .string("--jwt-public-key", placeholder: "FILE", env: "RIDEPUSH_JWT_PUBLIC_KEY", help: "one PEM public key (RSA, P-256 or Ed25519) for the identity provider's tokens; re-read on SIGHUP"),
        .string("--jwt-issuer", placeholder: "ISS", env: "RIDEPUSH_JWT_ISSUER", help: "the iss the identity provider's tokens must carry; required with --jwks-file, --jwks-url or --jwt-public-key (or --jwt-any-issuer)"),
        .string("--jwt-audience", placeholder: "AUD", env: "RIDEPUSH_JWT_AUDIENCE", help: "the aud the identity provider's tokens must name; required with --jwks-file, --jwks-url or --jwt-public-key (or --jwt-any-issuer)"),
        .flag("--jwt-any-issuer", env: "RIDEPUSH_JWT_ANY_ISSUER", help: "accept the identity provider's tokens whatever iss or aud they carry where --jwt-issuer or --jwt-audience is not given (never with a shared key set such as Firebase's: any project's tokens would be accepted); logged as a warning at start"),
        .string("--jwt-claim-namespace", placeholder: "PREFIX", env: "RIDEPUSH_JWT_CLAIM_NAMESPACE", help: "read scope, rides and ops of the identity provider's tokens as PREFIXscope, PREFIXrides, PREFIXops"),
        .string("--tls-cert", placeholder: "FILE", env: "RIDEPUSH_TLS_CERT", help: "PEM certificate: serve https:// and wss://"),
        .string("--tls-key", placeholder: "FILE", env: "RIDEPUSH_TLS_KEY", help: "PEM private key"),
        .int("--threads", range: 1...64, env: "RIDEPUSH_THREADS", default: min(64, ProcessInfo.processInfo.activeProcessorCount), defaultShown: "number of cores", help: "service threads"),
        .int("--max-frame", placeholder: "BYTES", range: 64...(1 << 20), default: d.maxFrame, help: "largest client message"),
        .int("--max-subscriptions", range: 1...Int.max, default: d.maxSubscriptions, help: "per connection"),
        .int("--max-open-rides-per-rider", range: 1...Int.max, env: "RIDEPUSH_MAX_OPEN_RIDES_PER_RIDER", default: d.maxOpenRidesPerRider, help: "open rides one rider's token may have; ops tokens are exempt"),
        .int("--max-connections-per-ip", range: 1...Int.max, env: "RIDEPUSH_MAX_CONNECTIONS_PER_IP", default: d.maxConnectionsPerIP, help: "connections per client address, WebSocket and HTTP alike"),
        .flag("--trust-proxy", env: "RIDEPUSH_TRUST_PROXY", help: "behind a reverse proxy on this host: count connections from a loopback peer by their X-Real-IP (or last X-Forwarded-For) address; without it those headers are ignored"),
        .int("--control-rate", range: 1...Int.max, default: d.controlRate, help: "control messages per second per connection"),
        .int("--keepalive", placeholder: "SECONDS", range: 2...3600, env: "RIDEPUSH_KEEPALIVE", default: d.keepalive, help: "drop peers silent this long; ping at half"),
        .int("--handshake-timeout", placeholder: "SECONDS", range: 1...600, default: d.handshakeTimeout, help: "how long each step of a new connection may take: the TLS handshake and request headers (else it is closed), authenticating (else 4401), and each message once begun (else 1008); an HTTP request with a body must be complete within it from its start, however steadily the bytes arrive (else the connection is closed)"),
        .int("--slow-consumer-lag", placeholder: "SECONDS", range: 1...3600, default: d.slowConsumerLag, help: "disconnect a subscriber that has not read its ticks for this long"),
        .choice("--log-format", of: ["text", "json"], env: "RIDEPUSH_LOG_FORMAT", default: "text", help: "text: libwebsockets' lines; json: one object per line with time, level, message and fields"),
        // Webhooks (docs/webhooks.md): one POST per committed transition, from the store's outbox.
        .string("--webhook", placeholder: "URL", env: "RIDEPUSH_WEBHOOK", repeatable: true, envSeparator: ",", help: "POST every ride transition (ride.started, paused, resumed, ended) to this http:// or https:// URL, signed, at least once, in order per ride; URL#ride.ended,ride.started: only those types"),
        .string("--webhook-secret-file", placeholder: "F", env: "RIDEPUSH_WEBHOOK_SECRET_FILE", repeatable: true, envSeparator: ",", help: "HMAC-SHA256 keys of the RidePush-Signature header, one per line (each at least 32 bytes; several while rolling: every one signs); required with --webhook. Once for every --webhook, or once per --webhook in the same order: each endpoint its own key, so no receiver can replay events to another"),
        .string("--webhook-endpoints-file", placeholder: "F", env: "RIDEPUSH_WEBHOOK_ENDPOINTS_FILE", help: "more endpoints, one per line: URL[#types] [SECRET_FILE] (without one, the --webhook-secret-file); re-read with the secret files on SIGHUP"),
        .int("--webhook-health-age", placeholder: "S", range: 1...604_800, env: "RIDEPUSH_WEBHOOK_HEALTH_AGE", default: 900, help: "/healthz says degraded (still 200) while a webhook delivery has waited longer than S seconds"),
        // Every outbound https call (webhooks, and any other call out) verifies its peer against
        // the system's store and this file: a private CA, an inspecting proxy's CA.
        .string("--outbound-ca-file", placeholder: "F", env: "RIDEPUSH_OUTBOUND_CA_FILE", help: "PEM CA certificates trusted besides the system's for every outbound https call (webhooks, --jwks-url, APNs, FCM, the OAuth token); proxies come from HTTPS_PROXY/NO_PROXY"),
        // Device pushes (docs/push.md): Live Activities over APNs, Android notifications over FCM.
        .string("--apns-key-file", placeholder: "F", env: "RIDEPUSH_APNS_KEY_FILE", help: "the APNs auth key (AuthKey_KID.p8, EC P-256) provider tokens are signed with; with --apns-key-id, --apns-team-id and --apns-topic, Live Activities registered by riders are updated over APNs (docs/push.md)"),
        .string("--apns-key-id", placeholder: "KID", env: "RIDEPUSH_APNS_KEY_ID", help: "the key's id (the kid of the provider token)"),
        .string("--apns-team-id", placeholder: "TEAM", env: "RIDEPUSH_APNS_TEAM_ID", help: "the Apple developer team id (the iss of the provider token)"),
        .string("--apns-topic", placeholder: "BUNDLE_ID", env: "RIDEPUSH_APNS_TOPIC", help: "the app's bundle id; pushes go to BUNDLE_ID.push-type.liveactivity"),
        .string("--apns-url", placeholder: "URL", env: "RIDEPUSH_APNS_URL", default: "https://api.push.apple.com", help: "APNs; https://api.sandbox.push.apple.com for development builds"),
        .string("--fcm-service-account", placeholder: "F", env: "RIDEPUSH_FCM_SERVICE_ACCOUNT", help: "a Google service account's JSON key: Android notifications registered by riders are driven over FCM v1 (docs/push.md)"),
        .string("--fcm-url", placeholder: "URL", env: "RIDEPUSH_FCM_URL", default: "https://fcm.googleapis.com", help: "FCM's HTTP v1 API"),
        .int("--live-activity-dismiss-after", placeholder: "SECONDS", range: 0...86_400, env: "RIDEPUSH_LIVE_ACTIVITY_DISMISS_AFTER", default: 900, help: "how long an ended ride stays on the lock screen (the end push's dismissal-date)"),
        .int("--retain-ended", placeholder: "DAYS", range: 1...36_500, env: "RIDEPUSH_RETAIN_ENDED", help: "delete rides that ended more than DAYS ago, with their journal, replies, traces and given-up webhook deliveries, in small batches (docs/retention.md); without it every ride is kept"),
        .int("--drain-seconds", placeholder: "SECONDS", range: 0...3600, env: "RIDEPUSH_DRAIN_SECONDS", default: d.drainSeconds, help: "on SIGTERM: /healthz says draining (503), the port closes, and the WebSockets are closed with 1012 spread over this many seconds so riders reconnect to other nodes in a trickle; the process exits at once when none is left (docs/operations.md#rolling-restarts); 0: close them all at once"),
        .string("--allow-origin", placeholder: "ORIGIN", env: "RIDEPUSH_ALLOW_ORIGIN", repeatable: true, envSeparator: ",", help: "allowed browser Origin; without one, any"),
        // Tests only, so not in --help: the Autobahn echo endpoint at /echo (docs/testing.md).
        .int("--ws-echo", placeholder: "BYTES", range: 64...(64 << 20), help: "echo endpoint /echo with this message limit (tests only)", hidden: true),
    ])
}()

func serveCommand(_ args: [String]) -> Int32 {
    let env = ProcessInfo.processInfo.environment
    let o: ParsedOptions
    do { o = try serveOptions.parse(args, environment: env) } catch { return usageFailure("ridepush serve", error) }
    if o.help { print(serveOptions.help, terminator: ""); return 0 }
    if let stray = o.positional.first { return usageFailure("ridepush serve", .unexpectedArgument(stray)) }
    var c = ServerConfig()
    // Before any thread starts, so every thread inherits the mask and only the signal thread
    // takes SIGINT, SIGTERM and SIGHUP (SIGHUP's default action would end the process).
    blockServerSignals()
    do throws(ServerError) {
        let logFormat = Log.Format(rawValue: o.string("--log-format")!)!
        LogSink.install(logFormat)
        c.host = o.string("--host")!
        c.port = o.int("--port")!
        c.publicDir = o.string("--public")!
        c.store = o.string("--store")!
        c.threads = o.int("--threads")!
        c.maxFrame = o.int("--max-frame")!
        c.maxSubscriptions = o.int("--max-subscriptions")!
        c.maxOpenRidesPerRider = o.int("--max-open-rides-per-rider")!
        c.wsEcho = o.int("--ws-echo")
        c.maxConnectionsPerIP = o.int("--max-connections-per-ip")!
        c.trustProxy = o.flag("--trust-proxy")
        c.controlRate = o.int("--control-rate")!
        c.keepalive = o.int("--keepalive")!
        c.handshakeTimeout = o.int("--handshake-timeout")!
        c.slowConsumerLag = o.int("--slow-consumer-lag")!
        c.allowedOrigins = o.strings("--allow-origin")
        c.tlsCert = o.string("--tls-cert")
        c.tlsKey = o.string("--tls-key")
        if (c.tlsCert == nil) != (c.tlsKey == nil) { throw ServerError("--tls-cert and --tls-key go together") }
        for f in [c.tlsCert, c.tlsKey].compactMap({ $0 }) where !FileManager.default.isReadableFile(atPath: f) {
            throw ServerError("cannot read \(f) (TLS certificate or key)")
        }
        let plansPath = o.string("--plans")
        if let path = plansPath {
            let data = try readPlansFile(path)
            do { c.plans = try GBFSPlans.load(data) } catch { throw ServerError("--plans \(path): \(error)") }
        }
        let zonesPath = o.string("--zones")
        if let path = zonesPath {
            let data = try readGBFSFile(path, flag: "--zones", file: "geofencing_zones.json", example: "", maxMiB: 32)
            do { c.zones = try GBFSZones.parse(data) } catch { throw ServerError("--zones \(path): \(error)") }
            c.zonesDocument = data
        }
        c.maxSpeedKph = Double(o.int("--max-speed-kph")!)
        c.retainEndedDays = o.int("--retain-ended")
        c.drainSeconds = o.int("--drain-seconds")!
        var links: (control: String, ops: String)?
        var secretNote = ""
        var configuredSecret: [UInt8]?
        switch o.string("--auth")! {
        case "none":
            if o.string("--jwks-file") != nil || o.string("--jwt-public-key") != nil || o.string("--jwks-url") != nil {
                throw ServerError("--jwks-file, --jwks-url and --jwt-public-key need --auth jwt (with --auth none no token is checked)")
            }
            guard c.host.hasPrefix("127.") || c.host == "localhost" || c.host == "::1" || c.host == "[::1]" else {
                throw ServerError("--auth none is refused with --host \(c.host): anyone on the network could end anyone's ride. Bind 127.0.0.1 or use tokens.")
            }
            Log.warn("authentication is OFF (--auth none): anyone who can reach the port may start, end and watch any ride")
        default:
            do {
                configuredSecret = try loadSecret(file: o.string("--jwt-secret-file"), environment: env)
            } catch { throw ServerError(error.message) }
            c.jwksFile = o.string("--jwks-file")
            c.jwtPublicKeyFile = o.string("--jwt-public-key")
            c.jwksURL = try jwksURL(o.string("--jwks-url"), besideFiles: c.jwksFile != nil || c.jwtPublicKeyFile != nil)
            do { c.identityKeys = try KeySet.load(jwksFile: c.jwksFile, publicKeyFile: c.jwtPublicKeyFile) } catch {
                throw ServerError(error.message)
            }
            c.tokenPolicy = TokenVerifier.Policy(issuer: o.string("--jwt-issuer"), audience: o.string("--jwt-audience"),
                                                 claimNamespace: o.string("--jwt-claim-namespace"), anyIssuer: o.flag("--jwt-any-issuer"))
            if !c.identityKeys.isEmpty || c.jwksURL != nil {
                // Whoever else the provider's keys sign for (a shared key set signs for every
                // project) would otherwise be accepted here, ops tokens included.
                if let missing = c.tokenPolicy.unpinned {
                    throw ServerError("--jwks-file, --jwks-url and --jwt-public-key need --jwt-issuer and --jwt-audience (no \(missing) given): without them a token the same keys signed for anyone else is accepted. To accept any issuer and audience on purpose, add --jwt-any-issuer")
                }
                let open = [c.tokenPolicy.issuer == nil ? "iss" : nil, c.tokenPolicy.audience == nil ? "aud" : nil].compactMap { $0 }
                if c.tokenPolicy.anyIssuer, !open.isEmpty {
                    Log.warn("--jwt-any-issuer: the identity provider's tokens are accepted whatever their \(open.joined(separator: " and ")); anyone those keys sign tokens for may act here, ops included")
                }
            }
            c.auth = .jwt(secret: configuredSecret)  // with no key either, a generated one is set once the store opened
        }
        let webhookFlags = o.strings("--webhook"), endpointsFile = o.string("--webhook-endpoints-file")
        if !webhookFlags.isEmpty || endpointsFile != nil {
            do {
                c.webhookRoster = WebhookRoster(try WebhookRoster.configure(webhooks: webhookFlags, secretFiles: o.strings("--webhook-secret-file"),
                                                                            endpointsFile: endpointsFile))
            } catch { throw ServerError(error.message.hasPrefix("--") ? error.message : "--webhook: \(error.message)") }
            c.webhooks = c.webhookRoster.endpoints.map(\.url)
            c.webhookHealthAge = Int64(o.int("--webhook-health-age")!) * 1000
        } else if !o.strings("--webhook-secret-file").isEmpty {
            Log.warn("--webhook-secret-file without --webhook: no webhooks are sent")
        }
        if let caFile = o.string("--outbound-ca-file") {
            do { try HTTPClient.check(caFile: caFile) } catch { throw ServerError("--outbound-ca-file: \(error.message)") }
            c.outboundCAFile = caFile
        }
        let store: RideStore
        // The sender's own view of the store's outbox (opened after the store, which makes the
        // table), and how to close it once the server has stopped the sender.
        var outbox: WebhookOutbox?
        var closeOutbox: () -> Void = {}
        if c.store == "memory" {
            // Device pushes keep their intents in the same outbox (docs/push.md).
            let memory = c.webhooks.isEmpty && !wantsDevicePush(o) ? nil : MemoryOutbox()
            outbox = c.webhooks.isEmpty ? nil : memory
            store = MemoryStore(outbox: memory)
        } else if PostgresSettings.isURI(c.store) {
            let pg = try openPostgres(c.store, passwordFile: o.string("--store-password-file"))
            store = pg
            if !c.webhooks.isEmpty {
                let o = PostgresOutbox(pg.settings)
                outbox = o
                closeOutbox = { o.close() }
            }
        } else {
            let create = o.flag("--create-store")
            let parent = URL(fileURLWithPath: c.store).deletingLastPathComponent().path
            if !create, !FileManager.default.fileExists(atPath: c.store), FileManager.default.fileExists(atPath: parent) {
                throw ServerError("--store \(c.store): no such file. Check the path; to start a new, empty store there, add --create-store (RIDEPUSH_CREATE_STORE=1)")
            }
            do { store = try SQLiteStore(path: c.store) } catch { throw ServerError("--store \(c.store): \(error.message)") }
            if !c.webhooks.isEmpty {
                do {
                    let o = try SQLiteOutbox(path: c.store)
                    outbox = o
                    closeOutbox = { o.close() }
                } catch { throw ServerError("--store \(c.store): webhook outbox: \(error.message)") }
            }
        }
        // After the store: its folder exists, and a refused store leaves no secret file behind.
        if case .jwt = c.auth, configuredSecret == nil, c.identityKeys.isEmpty, c.jwksURL == nil {
            let secret: [UInt8]
            do { (secret, secretNote) = try generatedSecret(store: c.store) } catch {
                throw ServerError("\(error.message) (with no secret configured the server keeps the one it makes beside the store; or set RIDEPUSH_JWT_SECRET or --jwt-secret-file)")
            }
            c.auth = .jwt(secret: secret)
            let now = Int64(Date().timeIntervalSince1970)
            let signer = TokenSigner(secret: secret)
            links = (signer.sign(TokenClaims(sub: "local", scope: .control, exp: now + 12 * 3600, iat: now)),
                     signer.sign(TokenClaims(sub: "ops", scope: .control, ops: true, exp: now + 12 * 3600, iat: now)))
        }
        let keyFetcher: JWKSFetcher?
        if let url = c.jwksURL { keyFetcher = try firstKeyFetch(url, config: &c) } else { keyFetcher = nil }
        let push = try devicePushSender(o, store: store, config: c)
        c.devicePush = push?.sender
        let hub = try Hub(config: c, store: store, faults: StoreFaults.fromEnvironment(), outbox: outbox)
        if let keyFetcher, let verifier = hub.verifier { keyFetcher.start(verifier: verifier) }
        let scheme = c.tlsCert == nil ? "http" : "https"
        // What is really bound; for every interface also where this machine reaches it.
        let bound = hub.urlHost, shown = hub.localURLHost
        print("ridepush: serving \(scheme)://\(bound):\(hub.port)/ (WebSocket \(scheme == "https" ? "wss" : "ws")://\(bound):\(hub.port)/ws, \(c.threads) threads, store \(PostgresSettings.redact(c.store)))")
        if hub.listensEverywhere {
            print("ridepush: listening on every \(bound == "0.0.0.0" ? "IPv4 " : "")interface; on this machine: \(scheme)://\(shown):\(hub.port)/")
        }
        print("ridepush: \(c.plans.count == 1 ? "plan" : "plans") \(plansPath.map { "from \($0)" } ?? "built in"): "
              + c.plans.map { "\($0.id) \"\($0.displayName)\" \($0.currency.code)" }.joined(separator: ", "))
        if let z = c.zones, let path = zonesPath {
            print("ridepush: zones from \(path): \(z.zones.count) zones, GBFS \(z.version), positions over \(o.int("--max-speed-kph")!) km/h dropped")
        }
        if logFormat == .json {  // the text format's stdout lines above already say it
            Log.info("serving", ["url": .string("\(scheme)://\(bound):\(hub.port)/"), "threads": .int(Int64(c.threads)),
                             "version": .string(BuildInfo.version), "commit": .string(BuildInfo.commit)])
        }
        if keyFetcher == nil { for note in c.identityKeys.skipped { Log.info(note) } }
        if !c.identityKeys.isEmpty || keyFetcher != nil {
            let kids = c.identityKeys.isEmpty ? "none yet (refused until --jwks-url answers)" : c.identityKeys.keys.map { "\($0.kid ?? "(no kid)") \($0.algorithm.rawValue)" }.joined(separator: ", ")
            print("ridepush: identity provider keys\(keyFetcher.map { " from \($0.url)" } ?? ""): " + kids
                  + (configuredSecret == nil ? " (no HS256 secret: RidePush's own tokens and share links are off)" : ", and HS256"))
        }
        if let (t, ops) = links {
            print("ridepush: open \(scheme)://\(shown):\(hub.port)/?token=\(t)")
            print("ridepush: device client: RIDEPUSH_TOKEN=\(t) \(CommandLine.arguments[0]) ride start --url \(scheme == "https" ? "wss" : "ws")://\(shown):\(hub.port)/ws")
            print("ridepush: operator console: \(scheme)://\(shown):\(hub.port)/ops/?token=\(ops)")
            print("ridepush: " + secretNote)
        }
        fflush(nil)
        // SIGTERM (systemd, a rolling restart) drains over --drain-seconds; SIGINT is a person
        // at a terminal, who wants the prompt back now: everything closes at once.
        let drainSeconds = c.drainSeconds, roster = c.webhookRoster, secretFiles = o.strings("--webhook-secret-file")
        waitForSignals(drainSeconds: drainSeconds, reload: {
            if let keyFetcher { keyFetcher.refreshNow() } else { hub.reloadKeys() }
            reloadWebhooks(roster, webhooks: webhookFlags, files: secretFiles, endpointsFile: endpointsFile)
        }, then: { sig in hub.shutdown(drainSeconds: sig == SIGINT ? 0 : drainSeconds) })
        hub.run()
        keyFetcher?.stop()
        closeOutbox()  // the senders stopped within run()
        push?.close()
        print("ridepush: stopped")
        return 0
    } catch {
        return fail("ridepush serve: \(error.description)")
    }
}

/// SIGHUP: the secret files and the endpoints file read again (a roll: add the new line, then
/// drop the old one once receivers have it; an endpoint added or dropped); a file that no
/// longer loads keeps what is in use, and says why.
func reloadWebhooks(_ roster: WebhookRoster, webhooks: [String], files: [String], endpointsFile: String?) {
    guard !webhooks.isEmpty || endpointsFile != nil else { return }
    do {
        let endpoints = try WebhookRoster.configure(webhooks: webhooks, secretFiles: files, endpointsFile: endpointsFile)
        roster.replace(endpoints)
        Log.info("webhooks reloaded: " + endpoints.map { "\($0.url) \($0.secrets.count) key(s)" }.joined(separator: ", "))
    } catch {
        Log.error("webhooks not reloaded, the endpoints and keys in use are kept: \(error.message)")
    }
}

/// The secret when none is configured, and a start-up note saying where it lives: kept in
/// `ridepush.secret` beside a SQLite store (made on the first start, reused after), so the
/// printed links and every token outlive a restart; per process for memory and PostgreSQL.
func generatedSecret(store: String) throws(SecretError) -> (secret: [UInt8], note: String) {
    if store == "memory" || PostgresSettings.isURI(store) {
        return (TokenSigner.randomSecret(),
                "(no secret configured: a random one was made for this process; set RIDEPUSH_JWT_SECRET to keep tokens across restarts)")
    }
    let path = SecretFile.path(besideStore: store)
    let (secret, created) = try SecretFile.readOrCreate(path)
    if let mode = SecretFile.looseMode(path) {
        Log.warn("\(path) has mode \(mode): anyone who can read it can make tokens for this server (chmod 600 \(path))")
    }
    return (secret, "(no secret configured: \(created ? "made one and kept it" : "using the one kept") in \(path); the links above work after a restart, and ridepush token finds it)")
}

/// SIGINT and SIGTERM are blocked in every thread and taken by one waiting thread, which
/// asks the server to drain (close its sockets with 1012) and stop.
/// SIGINT, SIGTERM and SIGHUP blocked in the calling thread (and so in every thread it starts);
/// `waitForSignals` takes them with sigwait.
@discardableResult
func blockServerSignals() -> sigset_t {
    signal(SIGPIPE, SIG_IGN)
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGINT)
    sigaddset(&set, SIGTERM)
    sigaddset(&set, SIGHUP)
    pthread_sigmask(SIG_BLOCK, &set, nil)
    return set
}

/// A thread of its own takes the signals: SIGHUP runs `reload` there (file I/O is fine on it;
/// no handler runs in signal context), SIGINT or SIGTERM runs `stop` and ends the thread.
func waitForSignals(drainSeconds: Int, reload: @escaping @Sendable () -> Void, then stop: @escaping @Sendable (Int32) -> Void) {
    let blocked = blockServerSignals()
    Thread.detachNewThread {
        var s = blocked
        var sig: Int32 = 0
        while true {
            guard sigwait(&s, &sig) == 0 else { continue }
            if sig == SIGHUP {
                reload()
                continue
            }
            Log.info("signal \(sig): draining (closing connections)", ["signal": .int(Int64(sig))])
            stop(sig)
            // The last resort (issue 36): whatever a connection, a stuck store or a library
            // does, a process told to stop is gone within its drain time and a margin, so a
            // supervisor's stop or a rolling deploy never waits on it. A clean stop returns
            // from main long before this wakes; sleep restarts if a signal interrupts it.
            let bound = Int64(sig == SIGINT ? 0 : drainSeconds) + stopMarginSeconds + watchdogMarginSeconds
            var left = UInt32(bound)
            while left > 0 { left = sleep(left) }
            Log.error("still running \(bound) s after signal \(sig): exiting without finishing the shutdown",
                      ["signal": .int(Int64(sig)), "seconds": .int(bound)])
            _exit(1)
        }
    }
}

/// What the shutdown watchdog allows beyond the drain for the rest of the stop (contexts
/// destroyed, the store worker and the webhook sender stopped).
/// What a drain may take past its own length (requests answered, the last sockets closed:
/// Shard.run's bound), and what the watchdog allows past that.
let stopMarginSeconds: Int64 = 3
let watchdogMarginSeconds: Int64 = 5

/// The plans file's bytes, or why not in words: missing, a directory, not readable.
func readPlansFile(_ path: String) throws(ServerError) -> [UInt8] {
    try readGBFSFile(path, flag: "--plans", file: "system_pricing_plans.json", example: "; see plans.example.json", maxMiB: 4)
}

/// A GBFS file given by `flag`: its bytes, or why not in words.
func readGBFSFile(_ path: String, flag: String, file: String, example: String, maxMiB: Int) throws(ServerError) -> [UInt8] {
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
        throw ServerError("\(flag) \(path): no such file (give the path of a GBFS \(file)\(example))")
    }
    if isDir.boolValue {
        throw ServerError("\(flag) \(path): is a directory; give the path of the JSON file in it (e.g. \(path.hasSuffix("/") ? path : path + "/")\(file))")
    }
    guard let f = fopen(path, "r") else {
        let why = errno == EACCES ? "permission denied (the server runs as uid \(getuid()))" : String(cString: strerror(errno))
        throw ServerError("\(flag) \(path): cannot open the file: \(why)")
    }
    defer { fclose(f) }
    var out = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n > 0 { out += buf[0..<n] }
        if n < buf.count { break }
        // A pricing file is kilobytes, a city's zones a few MiB; refuse a mistaken larger one before parsing it.
        guard out.count <= maxMiB << 20 else { throw ServerError("\(flag) \(path): larger than \(maxMiB) MiB; is it the right file?") }
    }
    if ferror(f) != 0 { throw ServerError("\(flag) \(path): cannot read the file: \(String(cString: strerror(errno)))") }
    return out
}

/// The PostgreSQL store named by a `--store` URI: connects (every failure names the URI with
/// its password hidden), creates or upgrades the schema.
func openPostgres(_ uri: String, passwordFile: String?) throws(ServerError) -> PostgresStore {
    var settings = PostgresSettings(uri: uri)
    do throws(StoreError) {
        if let passwordFile { settings.password = try PostgresSettings.password(fromFile: passwordFile) }
        return try PostgresStore(settings)
    } catch {
        throw ServerError("--store: \(error.message)")
    }
}

/// A refused command line: the command, what was wrong, and where to look.
func usageFailure(_ command: String, _ error: OptionError) -> Int32 {
    switch error {
    case .unknownOption, .unexpectedArgument: return fail("\(command): \(error) (see \(command) --help)")
    default: return fail("\(command): \(error)")
    }
}

func fail(_ message: String) -> Int32 {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    return 2
}
