@testable import RideService
import Foundation
import RideStore
import XCTest
@testable import RidePushServer

/// A stopped server frees what it made (make asan's LeakSanitizer reported the whole graph):
/// the store worker holds the coordinator, which holds the registry, which held the worker.
final class HubLifetimeTests: XCTestCase {
    func testAStoppedHubFreesItsRegistryAndStoreWorker() throws {
        weak var hubRef: Hub?
        weak var registry: RideRegistry?
        weak var worker: StoreWorker<StoreCoordinator>?
        do {
            var config = ServerConfig()
            config.port = 0
            config.threads = 2
            config.publicDir = NSTemporaryDirectory()
            let hub = try Hub(config: config, store: MemoryStore())
            hubRef = hub
            registry = hub.registry
            worker = hub.storeWorker
            // Queued before the threads start; the first service pass reads it and stops.
            hub.shutdown()
            hub.run()
        }
        XCTAssertNil(hubRef)
        // The worker's thread let go of the worker before stop() returned.
        XCTAssertNil(worker)
        XCTAssertNil(registry)
    }
}
