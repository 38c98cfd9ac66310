import Foundation
import XCTest

/// A test case with a fresh directory of its own for store files, removed after each test.
class StoreDirectoryTestCase: XCTestCase {
    var dir: URL!
    var path: String { dir.appendingPathComponent("rides.db").path }

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ridestore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }
}
