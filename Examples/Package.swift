// swift-tools-version: 6.0
import PackageDescription

// An app's view of the SDK, kept in the repository so the docs cannot drift from it: it
// depends on the repository by path and imports only RidePushClient. tests/test_examples.py
// (run by `make test`) builds it, runs ride-demo against a real server and over the
// content-state goldens (protocol/examples/push/content-state), and checks that
// README's feed example is Follow.swift and docs/sdk.md's view model is RentalModel.swift,
// as written here.
let package = Package(
    name: "RidePushExamples",
    platforms: [.iOS(.v18), .macOS(.v15), .tvOS(.v18), .watchOS(.v11)],
    dependencies: [
        // `name:` because a path dependency is otherwise known by its folder's name.
        .package(name: "RidePush", path: ".."),
    ],
    targets: [
        // docs/sdk.md's view model (RentalModel.swift, without the SwiftUI view), README's feed
        // example (Follow.swift) and a command-line app that starts, watches, pauses, resumes
        // and ends a ride with the client and then with the model.
        .executableTarget(name: "ride-demo", dependencies: ["RideLiveActivity", .product(name: "RidePushClient", package: "RidePush")]),
        // A ride's Live Activity: the attributes, what the lock screen shows, and, where
        // ActivityKit and WidgetKit exist, the ActivityKit calls and the widget (docs/sdk.md,
        // "Live Activities"). Here the shared part is built, and run by `ride-demo activity`.
        .target(name: "RideLiveActivity", dependencies: [.product(name: "RidePushClient", package: "RidePush")]),
    ],
    swiftLanguageModes: [.v6]
)
