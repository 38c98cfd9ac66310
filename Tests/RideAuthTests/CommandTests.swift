import Foundation
import XCTest
import RideAuth

final class DurationTests: XCTestCase {
    func testParsesUnits() {
        XCTAssertEqual(parseDuration("2h"), 7200)
        XCTAssertEqual(parseDuration("30m"), 1800)
        XCTAssertEqual(parseDuration("90s"), 90)
        XCTAssertEqual(parseDuration("1d"), 86400)
        XCTAssertEqual(parseDuration("90"), 90)
        XCTAssertEqual(parseDuration("1h30m"), 5400)
        XCTAssertEqual(parseDuration("0s"), 0)
        XCTAssertEqual(parseDuration("007m"), 420)
    }

    func testRejectsNonsense() {
        for bad in ["", "h", "2x", "-1h", "+1h", "2h ", " 2h", "2H", "1.5h", "2h3", "h2", "2 h", "99999999999999999999d", "9999999999999999d", "١h"] {
            XCTAssertNil(parseDuration(bad), bad)
        }
    }
}

final class TokenCommandTests: XCTestCase {
    let secret = "command-test-secret-0123456789abcdef"
    var env: [String: String] { ["RIDEPUSH_JWT_SECRET": secret] }
    let now: Int64 = 1_700_000_000

    func verify(_ output: String, secret: String? = nil) throws -> TokenClaims {
        XCTAssertTrue(output.hasSuffix("\n"))
        let signer = TokenSigner(secret: Array((secret ?? self.secret).utf8))
        return try signer.verify(String(output.dropLast()), now: now)
    }

    func testShareLinkToken() throws {
        let result = tokenCommand(arguments: ["--watch", "--ride", "r-42", "--ttl", "2h"], environment: env, now: now)
        XCTAssertEqual(result.status, 0)
        XCTAssertEqual(try verify(result.output),
                       TokenClaims(sub: "share:r-42", scope: .watch, rides: ["r-42"], exp: now + 7200, iat: now))
        // Same claims as the server's share button would sign.
        XCTAssertEqual(try verify(result.output), TokenClaims.share(ride: "r-42", now: now, ttl: 7200))
    }

    func testControlOpsAndDefaults() throws {
        let control = tokenCommand(arguments: ["--control", "--sub=rider-1", "--ttl=1d"], environment: env, now: now)
        XCTAssertEqual(control.status, 0, control.output)
        XCTAssertEqual(try verify(control.output), TokenClaims(sub: "rider-1", scope: .control, exp: now + 86400, iat: now))

        let ops = tokenCommand(arguments: ["--control", "--ops"], environment: env, now: now)
        XCTAssertEqual(try verify(ops.output), TokenClaims(sub: "ops", scope: .control, ops: true, exp: now + 7200, iat: now))

        // No scope flag means watch; two rides, default ttl 2h.
        let two = tokenCommand(arguments: ["--ride", "r-1", "--ride", "r-2"], environment: env, now: now)
        XCTAssertEqual(try verify(two.output),
                       TokenClaims(sub: "share:r-1,r-2", scope: .watch, rides: ["r-1", "r-2"], exp: now + 7200, iat: now))

        let watcher = tokenCommand(arguments: ["--sub", "rider-9"], environment: env, now: now)
        XCTAssertEqual(try verify(watcher.output), TokenClaims(sub: "rider-9", scope: .watch, exp: now + 7200, iat: now))
    }

    func testSecretFileWinsAndIsTrimmed() throws {
        let path = NSTemporaryDirectory() + "ridepush-secret-\(UUID().uuidString)"
        let fileSecret = "file-secret-abcdefghijklmnopqrstuvwxyz012345"
        try Data((fileSecret + "\n").utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = tokenCommand(arguments: ["--ride", "r-1", "--jwt-secret-file", path], environment: env, now: now)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertEqual(try verify(result.output, secret: fileSecret).rides, ["r-1"])

        let missing = tokenCommand(arguments: ["--ride", "r-1", "--jwt-secret-file", path + ".nope"], environment: env, now: now)
        XCTAssertEqual(missing.status, 1)
        XCTAssertEqual(missing.output, "ridepush token: cannot read JWT secret file \(path).nope\n")
    }

    func testSecretErrors() {
        let none = tokenCommand(arguments: ["--ride", "r-1", "--store", "/nonexistent/rides.db"], environment: [:], now: now)
        XCTAssertEqual(none.status, 1)
        XCTAssertEqual(none.output, "ridepush token: no JWT secret: set RIDEPUSH_JWT_SECRET or pass --jwt-secret-file FILE (the server's secret), or run where the server keeps /nonexistent/ridepush.secret (give its --store)\n")
        let memory = tokenCommand(arguments: ["--ride", "r-1", "--store", "memory"], environment: [:], now: now)
        XCTAssertEqual(memory.output, "ridepush token: no JWT secret: set RIDEPUSH_JWT_SECRET or pass --jwt-secret-file FILE (the server's secret)\n")
        let empty = tokenCommand(arguments: ["--ride", "r-1"], environment: ["RIDEPUSH_JWT_SECRET": ""], now: now)
        XCTAssertEqual(empty.status, 1)
        let short = tokenCommand(arguments: ["--ride", "r-1"], environment: ["RIDEPUSH_JWT_SECRET": "changeme"], now: now)
        XCTAssertEqual(short.status, 1)
        XCTAssertEqual(short.output, "ridepush token: RIDEPUSH_JWT_SECRET is 8 bytes; HS256 needs at least 32 (try: openssl rand -hex 32)\n")
    }

    func testUsageErrorsAndHelp() {
        let help = tokenCommand(arguments: ["--help"], environment: [:], now: now)
        XCTAssertEqual(help.status, 0)
        XCTAssertEqual(help.output, tokenCommandUsage)
        XCTAssertTrue(help.output.hasPrefix("Usage: ridepush token"))
        XCTAssertEqual(tokenCommand(arguments: ["-h"], environment: [:], now: now).status, 0)

        let cases: [([String], String)] = [
            (["--control"], "--control needs --sub RIDER (the rider who will own the rides)"),
            (["--watch"], "a watch token needs --ride ID, --sub RIDER or --ops, or it could watch nothing"),
            (["--watch", "--control", "--sub", "a"], "--watch and --control exclude each other"),
            (["--ride", "r-1", "--ttl", "2x"], "--ttl 2x: expected a positive duration such as 90s, 30m, 2h or 1d"),
            (["--ride", "r-1", "--ttl", "0s"], "--ttl 0s: expected a positive duration such as 90s, 30m, 2h or 1d"),
            (["--ride", "r-1", "--ttl"], "--ttl needs a duration such as 2h"),
            (["--ride"], "--ride needs a ride id"),
            (["--ride="], "--ride needs a ride id"),
            (["--sub", ""], "--sub needs a rider id"),
            (["--ride", "r-1", "--frobnicate"], "unknown option --frobnicate"),
            (["r-1"], "unexpected argument r-1"),
            (["--ops=yes"], "--ops takes no value"),
            (["--ride", "r-1", "--ttl", "106751991167300d"], "--ttl is too long"),
        ]
        for (arguments, message) in cases {
            let result = tokenCommand(arguments: arguments, environment: env, now: now)
            XCTAssertEqual(result.status, 2, "\(arguments)")
            XCTAssertEqual(result.output, "ridepush token: \(message)\nTry 'ridepush token --help'.\n", "\(arguments)")
        }
    }
}
