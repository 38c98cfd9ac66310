import Foundation
import XCTest

/// The split of issue 25 held by the source itself: libwebsockets stays in the adapter
/// (RidePushServer) and the SDK's Linux transport (RidePushClient), the headroom is read only
/// there, and the adapter stays thin.
final class AdapterBoundaryTests: XCTestCase {
    private let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")

    /// Every Swift file of every target: (target, file name, text).
    private func files() throws -> [(target: String, name: String, text: String)] {
        let fm = FileManager.default
        var out: [(String, String, String)] = []
        for target in try fm.contentsOfDirectory(atPath: sources.path).sorted() {
            let dir = sources.appendingPathComponent(target)
            // A target's folders (RideService's chapters) included.
            guard let names = fm.subpaths(atPath: dir.path) else { continue }
            for name in names.sorted() where name.hasSuffix(".swift") {
                out.append((target, name, try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)))
            }
        }
        XCTAssertGreaterThan(out.count, 100, "read the sources from \(sources.path)")
        return out
    }

    /// Code lines only: a comment may name lws.
    private func code(_ text: String) -> [Substring] {
        text.split(separator: "\n", omittingEmptySubsequences: false).filter {
            !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//")
        }
    }

    func testOnlyTheAdapterAndTheSDKImportLibWebSockets() throws {
        let importers = Set(try files().filter { f in code(f.text).contains { $0.hasPrefix("import CLibWebSockets") } }.map(\.target))
        XCTAssertEqual(importers, ["RidePushServer", "RidePushClient"])
    }

    func testTheHeadroomIsReadOnlyInTheAdapter() throws {
        for f in try files() where f.target != "RidePushServer" && f.target != "RidePushClient" {
            for line in code(f.text) {
                XCTAssertFalse(line.contains("clws_pre") || line.contains("LWS_PRE"), "\(f.target)/\(f.name): \(line)")
            }
        }
        let service = try files().filter { $0.target == "RideService" }
        XCTAssertFalse(service.isEmpty)
    }

    /// The adapter reaches the stores and the webhook sender through RideStore's capability
    /// protocols and RideService; only its composition root (Hub.swift, which builds them from
    /// what the executable hands it) may import the sender's target, and no file imports a
    /// concrete store target or names a concrete store type.
    func testTheAdapterNamesNoConcreteStoreOutsideItsCompositionRoot() throws {
        let compositionRoot: Set<String> = ["Hub.swift"]
        let concreteTargets = ["RideStoreSQLite", "RideStorePostgres", "RideWebhooks"]
        let concreteTypes = ["MemoryStore", "SQLiteStore", "PostgresStore", "PostgresClusterFeed", "SQLiteOutbox", "PostgresOutbox"]
        let adapter = try files().filter { $0.target == "RidePushServer" }
        XCTAssertGreaterThan(adapter.count, 10)
        for f in adapter {
            for line in code(f.text) {
                for t in concreteTargets where line.hasPrefix("import \(t)") {
                    XCTAssertTrue(compositionRoot.contains(f.name) && t == "RideWebhooks",
                                  "RidePushServer/\(f.name) imports \(t): reach it through a RideStore capability or RideService")
                }
                for t in concreteTypes {
                    XCTAssertNil(line.range(of: "\\b\(t)\\b", options: .regularExpression),
                                 "RidePushServer/\(f.name) names \(t): ask for a capability (StoreTraits, ClusterFeedSource, SharedJournal)")
                }
            }
        }
    }

    /// Issue 37: the adapter reaches the service side through RideServer, which the
    /// composition root (Hub and its extensions) builds and hands to each service thread; no
    /// other file names a `hub`, so no shard, callback or route can lean on a back-reference.
    func testOnlyTheCompositionRootReachesTheHub() throws {
        let compositionRoot: Set<String> = ["Hub.swift", "HubContexts.swift"]
        let adapter = try files().filter { $0.target == "RidePushServer" }
        XCTAssertTrue(Set(adapter.map(\.name)).isSuperset(of: compositionRoot), "the composition root's files were renamed")
        for f in adapter where !compositionRoot.contains(f.name) {
            for line in code(f.text) {
                XCTAssertNil(line.range(of: #"\bhub\s*[.:]"#, options: .regularExpression),
                             "RidePushServer/\(f.name) reaches the hub: take what it needs from RideServer (`service.`): \(line)")
                // The code before a trailing comment: a comment may say where a thing is made.
                let code = line.components(separatedBy: "//")[0]
                XCTAssertNil(code.range(of: #"\bHub\b"#, options: .regularExpression),
                             "RidePushServer/\(f.name) names Hub outside the composition root: \(line)")
            }
        }
    }

    func testTheAdapterStaysThin() throws {
        let lines = try files().filter { $0.target == "RidePushServer" }.reduce(0) { $0 + $1.text.split(separator: "\n", omittingEmptySubsequences: false).count - 1 }
        XCTAssertGreaterThan(lines, 0)
        XCTAssertLessThan(lines, 2_400, "RidePushServer has \(lines) lines")
    }

    func testNoUnsafeUnownedNoImplicitlyUnwrapped() throws {
        let server = ["RidePushServer", "RideService", "RideStore", "RideStoreSQLite", "RideStorePostgres", "RideCore", "RideAuth", "RideWebhooks", "RideProtocol"]
        for f in try files() where server.contains(f.target) {
            for line in code(f.text) {
                XCTAssertFalse(line.contains("unowned(unsafe)"), "\(f.target)/\(f.name): \(line)")
                XCTAssertNil(line.range(of: #"(var|let) \w+: [^=]+!\s*(//.*)?$"#, options: .regularExpression),
                             "\(f.target)/\(f.name): an implicitly unwrapped optional: \(line)")
            }
        }
    }

    /// Each `@unchecked Sendable` names its owner or lock, in every target (the SDK's and the
    /// test doubles' too), and there are no more of them than after issue 37: a new shared
    /// class takes `Locked`, atomics or immutable fields and is checked by the compiler.
    func testEveryUncheckedSendableSaysWhyAndTheyDoNotGrow() throws {
        var count = 0
        for f in try files() {
            for line in code(f.text) where line.contains("@unchecked Sendable") {
                count += 1
                XCTAssertTrue(line.contains("//"), "\(f.target)/\(f.name): an @unchecked Sendable without its owner or lock: \(line)")
            }
        }
        XCTAssertGreaterThan(count, 0)
        XCTAssertLessThanOrEqual(count, 19, "\(count) @unchecked Sendable: make the new one Sendable (Locked, atomics, lets)")
    }
}
