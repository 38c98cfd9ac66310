// swift-tools-version: 6.0
import PackageDescription

// No package dependencies on purpose: everything beyond the toolchain comes from Debian
// through system library targets (see the Makefile for the apt packages).
let package = Package(
    name: "RidePush",
    // RideCore's ManualClock uses Synchronization's Mutex (iOS 18 / macOS 15), and so does the
    // client: the oldest platforms an app importing RidePushClient can run on.
    platforms: [.iOS(.v18), .macOS(.v15), .tvOS(.v18), .watchOS(.v11)],
    products: [
        .executable(name: "ridepush", targets: ["ridepush"]),
        // The Swift SDK for devices and apps (docs/sdk.md).
        .library(name: "RidePushClient", targets: ["RidePushClient"]),
        // ride.v1's typed messages on their own, for a server or tool that speaks the protocol
        // without the SDK's connection logic (RidePushClient re-exports it).
        .library(name: "RideProtocol", targets: ["RideProtocol"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibWebSockets",
            pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq for the multi-node store (--store postgresql://…).
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // libcurl for every outbound HTTP call (RideHTTPClient): Debian's build has HTTP/2 (nghttp2).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // <sys/epoll.h> for the bench's client (Glibc's module map leaves it out), and the service
        // threads' poll() answered from epoll (poll_epoll.c).
        .target(name: "CEpoll"),
        // TLS for the bench's client (`ridepush bench --url wss://…`): libssl behind plain return codes.
        .target(name: "CBenchTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // The command-line parser every command shares (serve, ride, token, bench); standard library only.
        .target(name: "RideOptions"),
        // Pure ride logic: state machine, fares, clock, message codec. No I/O.
        .target(name: "RideCore"),
        // ride.v1 both ways, typed: the one definition the server, the SDK and the CLI share.
        .target(name: "RideProtocol", dependencies: ["RideCore"]),
        // The client SDK: reconnecting ride feeds, retry-safe requests; lws transport on Linux,
        // URLSessionWebSocketTask on Apple platforms.
        .target(name: "RidePushClient", dependencies: [
            "RideProtocol", "RideCore",
            .target(name: "CLibWebSockets", condition: .when(platforms: [.linux])),
        ]),
        // The durable ride journal's contract, the store worker (group commit, health, probes)
        // and the memory store. No database library: each store is its own target.
        .target(name: "RideStore", dependencies: ["RideCore"]),
        // The embedded default store: one SQLite file in WAL mode.
        .target(name: "RideStoreSQLite", dependencies: ["RideStore", "RideCore", "CSQLite", "RideWebhooks"]),
        // The store a fleet of nodes shares, through libpq, and its LISTEN connection.
        .target(name: "RideStorePostgres", dependencies: ["RideStore", "RideCore", "CLibPQ", "RideWebhooks"]),
        // Fault injection and test doubles for the store: only test targets depend on it, so a
        // release `ridepush` does not contain it.
        .target(name: "RideStoreTesting", dependencies: ["RideStore", "RideCore"]),
        // The ride service driven without lws or sockets, on a manual clock (EmbeddedService);
        // only test targets depend on it.
        .target(name: "RideServiceTesting", dependencies: ["RideService", "RideCore", "RideStore", "RideStoreTesting", "RideWebhooks"]),
        // JWT (HS256) tokens and what they allow.
        .target(name: "RideAuth", dependencies: ["COpenSSL", "RideCore", "RideOptions"]),
        // Outbound HTTP on libcurl's multi interface: one thread, HTTP/2 where the peer speaks it,
        // TLS always verified (a private CA besides the system's), proxies from the environment.
        .target(name: "RideHTTPClient", dependencies: ["CCurl", "RideCore"]),
        // Webhooks without the server: event body, Stripe-scheme signature, retry schedule, the
        // outbox sender's state machine and loop, the POST through RideHTTPClient.
        .target(name: "RideWebhooks", dependencies: ["COpenSSL", "RideCore", "RideStore", "RideHTTPClient"]),
        // The lock screen without I/O (issue 38): APNs Live Activity and FCM payloads, the ES256
        // provider token and the RS256 service-account assertion, answers as verdicts, and the
        // schedule of what is pushed when. The HTTP client and the server's wiring are elsewhere.
        .target(name: "RideDevicePush", dependencies: ["RideCore", "RideProtocol", "RideAuth", "COpenSSL"]),
        // The device-push sender (issue 38): push intents from the outbox, the schedule, APNs and
        // FCM over RideHTTPClient, on a thread of its own.
        .target(name: "RidePushSender", dependencies: ["RideDevicePush", "RideWebhooks", "RideHTTPClient", "RideStore", "RideService", "RideProtocol", "RideCore", "RideAuth"]),
        // The load generator behind `ridepush bench` (raw epoll client, no lws); `--tick-encode`
        // builds tick batches in the service's own registry, so it uses RideService.
        .target(name: "RideBench", dependencies: ["RideCore", "RideService", "COpenSSL", "CEpoll", "CBenchTLS", "RideOptions"]),
        // The libwebsockets bridge: contexts, protocol, tick hub, HTTP.
        // The ride service's pure pieces (no libwebsockets): moved here from RidePushServer a step
        // at a time (issue 25); RidePushServer is becoming the lws adapter around it.
        .target(name: "RideService", dependencies: ["RideCore", "RideProtocol", "RideAuth", "RideStore", "RideWebhooks", "RideHTTPClient", "RideDevicePush", "COpenSSL"]),
        .target(name: "RidePushServer", dependencies: ["RideService", "RideCore", "RideProtocol", "RideStore", "RideAuth", "RideWebhooks", "RideHTTPClient", "CLibWebSockets", "CEpoll"]),
        .executableTarget(name: "ridepush", dependencies: ["RidePushServer", "RidePushSender", "RideService", "RideStore", "RideStoreSQLite", "RideStorePostgres", "RideWebhooks", "RideHTTPClient", "RideBench", "RideAuth", "RideCore", "RideProtocol", "RidePushClient", "RideOptions"]),
        // A small client of the SDK for the integration tests (tests/test_sdk.py): many feeds in one process.
        .executableTarget(name: "ridepush-sdk-probe", dependencies: ["RidePushClient", "RideProtocol", "RideCore"]),
        // Sends webhooks from a memory outbox for tests/test_webhooks_sender.py (a Python receiver checks them).
        .executableTarget(name: "ridepush-webhook-probe", dependencies: ["RideWebhooks", "RideHTTPClient", "RideCore"]),
        // libFuzzer targets (make fuzz); built normally, a replayer of their corpora (Fuzz/corpus).
        .executableTarget(name: "RideFuzz", dependencies: ["RideCore", "RideProtocol", "RideAuth", "RideWebhooks", "RideService"]),
        .testTarget(name: "RideCoreTests", dependencies: ["RideCore", "RideProtocol"]),
        .testTarget(name: "RideProtocolTests", dependencies: ["RideProtocol", "RideCore"]),
        .testTarget(name: "RidePushClientTests", dependencies: ["RidePushClient", "RideProtocol", "RideCore"]),
        .testTarget(name: "RideStoreTests", dependencies: ["RideStore", "RideStoreSQLite", "RideStorePostgres", "RideStoreTesting", "RideCore", "RideWebhooks"]),
        .testTarget(name: "RideAuthTests", dependencies: ["RideAuth", "RideCore", "COpenSSL"]),
        .testTarget(name: "RideServiceTests", dependencies: ["RideService", "RideServiceTesting", "RideStoreTesting", "RideCore", "RideProtocol", "RideAuth", "RideStore", "RideWebhooks"]),
        .testTarget(name: "RidePushServerTests", dependencies: ["RidePushServer", "RideService", "RideCore", "RideProtocol", "RideStore", "RideStorePostgres", "CEpoll"]),
        .testTarget(name: "RideBenchTests", dependencies: ["RideBench"]),
        .testTarget(name: "RideOptionsTests", dependencies: ["RideOptions"]),
        .testTarget(name: "RideWebhooksTests", dependencies: ["RideWebhooks", "RideCore", "RideStore", "RideStoreSQLite"]),
        .testTarget(name: "RideDevicePushTests", dependencies: ["RideDevicePush", "RideProtocol", "RideCore", "RideAuth"]),
        // Tests against real things, with bounded waits: SQLite files, a PostgreSQL server, local
        // HTTP servers in child processes, threads racing a store (docs/testing.md). The targets
        // above are unit tests: no sleeps, timers on a manual clock.
        .testTarget(name: "RideIntegrationTests", dependencies: [
            "RideStore", "RideStoreSQLite", "RideStorePostgres", "RideStoreTesting", "RideCore", "RideWebhooks", "RideHTTPClient",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
