// swift-tools-version: 6.0
import PackageDescription

// No package dependencies on purpose: everything beyond the toolchain comes from Debian
// through system library targets (see the Makefile for the apt packages).
let package = Package(
    name: "RidePush",
    products: [
        .executable(name: "ridepush", targets: ["ridepush"]),
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
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // <sys/epoll.h> for the bench's client (Glibc's module map leaves it out).
        .target(name: "CEpoll"),
        // Pure ride logic: state machine, fares, clock, message codec. No I/O.
        .target(name: "RideCore"),
        // Durable ride journal behind a small protocol (SQLite, memory).
        .target(name: "RideStore", dependencies: ["RideCore", "CSQLite"]),
        // JWT (HS256) tokens and what they allow.
        .target(name: "RideAuth", dependencies: ["COpenSSL", "RideCore"]),
        // The load generator behind `ridepush bench` (raw epoll client, no lws).
        .target(name: "RideBench", dependencies: ["RideCore", "COpenSSL", "CEpoll"]),
        // The libwebsockets bridge: contexts, protocol, tick hub, HTTP.
        .target(name: "RidePushServer", dependencies: ["RideCore", "RideStore", "RideAuth", "CLibWebSockets"]),
        .executableTarget(name: "ridepush", dependencies: ["RidePushServer", "RideBench", "RideAuth", "RideCore", "CLibWebSockets"]),
        // libFuzzer targets (make fuzz); built normally, a replayer of their corpora (Fuzz/corpus).
        .executableTarget(name: "RideFuzz", dependencies: ["RideCore", "RideAuth"]),
        .testTarget(name: "RideCoreTests", dependencies: ["RideCore"]),
        .testTarget(name: "RideStoreTests", dependencies: ["RideStore", "RideCore"]),
        .testTarget(name: "RideAuthTests", dependencies: ["RideAuth"]),
        .testTarget(name: "RidePushServerTests", dependencies: ["RidePushServer", "RideCore", "RideStore"]),
        .testTarget(name: "RideBenchTests", dependencies: ["RideBench"]),
    ],
    swiftLanguageModes: [.v6]
)
