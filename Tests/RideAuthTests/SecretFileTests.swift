import Foundation
import RideAuth
import XCTest

/// The generated secret kept beside the store (issue 26): made once, private, reused, and
/// found by `ridepush token --store`.
final class SecretFileTests: XCTestCase {
    var dir = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "secretfile-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func testMadeOnceAsSixtyFourHexDigitsModeSixHundredThenReused() throws {
        let path = SecretFile.path(besideStore: dir + "/rides.db")
        XCTAssertEqual(path, dir + "/ridepush.secret")
        XCTAssertNil(try SecretFile.read(path))
        let first = try SecretFile.readOrCreate(path)
        XCTAssertTrue(first.created)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertNotNil(text.wholeMatch(of: /[0-9a-f]{64}\n/), text)
        XCTAssertEqual(first.secret, Array(text.utf8.dropLast()))
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertNil(SecretFile.looseMode(path))
        let again = try SecretFile.readOrCreate(path)
        XCTAssertFalse(again.created)
        XCTAssertEqual(again.secret, first.secret)
        // Nothing left behind but the one file.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["ridepush.secret"])
        chmod(path, 0o644)
        XCTAssertEqual(SecretFile.looseMode(path), "644")
    }

    func testAnExistingFileIsReadNotReplacedAndAShortOneIsRefused() throws {
        let path = dir + "/ridepush.secret"
        let mine = String(repeating: "ab", count: 20)
        try (mine + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertEqual(try SecretFile.readOrCreate(path).secret, Array(mine.utf8))
        try "short\n".write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try SecretFile.readOrCreate(path)) { e in
            XCTAssertTrue("\(e)".contains("5 bytes; HS256 needs at least 32"), "\(e)")
        }
    }

    func testTokenFindsTheSecretBesideTheStoreAndAConfiguredSecretWins() throws {
        let store = dir + "/rides.db"
        let secret = try SecretFile.readOrCreate(SecretFile.path(besideStore: store)).secret
        let now: Int64 = 1_764_430_000
        let out = tokenCommand(arguments: ["--control", "--sub", "u1", "--store", store], environment: [:], now: now)
        XCTAssertEqual(out.status, 0, out.output)
        let claims = try TokenSigner(secret: secret).verify(String(out.output.dropLast()), now: now)
        XCTAssertEqual(claims.sub, "u1")
        // RIDEPUSH_STORE names it too, as for serve.
        let env = tokenCommand(arguments: ["--ops"], environment: ["RIDEPUSH_STORE": store], now: now)
        XCTAssertEqual(env.status, 0, env.output)
        XCTAssertTrue(try TokenSigner(secret: secret).verify(String(env.output.dropLast()), now: now).ops)
        // A configured secret is the server's: the file is not consulted.
        let configured = String(repeating: "k", count: 32)
        let other = tokenCommand(arguments: ["--ops", "--store", store], environment: ["RIDEPUSH_JWT_SECRET": configured], now: now)
        XCTAssertThrowsError(try TokenSigner(secret: secret).verify(String(other.output.dropLast()), now: now))
        XCTAssertNoThrow(try TokenSigner(secret: Array(configured.utf8)).verify(String(other.output.dropLast()), now: now))
    }
}
