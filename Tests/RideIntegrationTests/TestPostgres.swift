import Foundation
import XCTest
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// A real PostgreSQL server for the tests: `initdb` into a temp directory, `postgres` on a
/// free port of 127.0.0.1 (its socket in that directory too), stopped by PID. PostgreSQL
/// refuses to run as root, so as root both run as Debian's `postgres` user through
/// `setpriv` (which execs, so the PID we hold is the postmaster's, unlike `runuser`, which
/// stays as a parent) and the directory is handed to that user.
///
/// Host connections need a password except for the superuser, so the tests can check every
/// way a password reaches libpq.
final class TestPostgres {
    let dir: String
    let port: Int
    let bin: String
    private let process: Process
    /// Signalled once when postgres exits: every wait on it ends at the exit, not at a poll.
    private let exited = DispatchSemaphore(value: 0)

    /// The binaries' folder, or nil when PostgreSQL is not installed (`make test` installs
    /// it; a developer without it gets a skip that says so).
    static var binDir: String? {
        if let b = ProcessInfo.processInfo.environment["RIDEPUSH_PG_BIN"] { return b }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        return versions.map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: "\($0)/postgres") }
    }

    /// One server for the whole test process, stopped when it exits.
    static func shared() throws -> TestPostgres {
        if let s = sharedServer { return s }
        let s = try start()
        sharedServer = s
        atexit { sharedServer?.stop() }
        return s
    }

    /// Starts a server, or throws XCTSkip if PostgreSQL is not installed.
    static func start() throws -> TestPostgres {
        guard let bin = binDir else {
            throw XCTSkip("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql, or `make test`); skipping the PostgreSQL store tests")
        }
        var lastError: Error?
        for _ in 0..<3 {  // a free port can be taken between choosing and binding it
            do { return try TestPostgres(bin: bin) } catch { lastError = error }
        }
        throw lastError!
    }

    private init(bin: String) throws {
        self.bin = bin
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ridepush-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        if getuid() == 0 {
            guard let pw = getpwnam("postgres") else { throw HarnessError("running as root but there is no postgres user to run PostgreSQL as") }
            guard chown(dir, pw.pointee.pw_uid, pw.pointee.pw_gid) == 0 else { throw HarnessError("chown \(dir) failed") }
        }
        port = try Self.freePort()
        try Self.write("superpw\n", to: "\(dir)/pwfile")
        try Self.run(Self.asPostgres(["\(bin)/initdb", "-D", "\(dir)/data", "-U", "postgres", "--pwfile=\(dir)/pwfile",
                                      "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"]),
                     log: "\(dir)/initdb.log")
        // The superuser without a password on loopback (the harness's own connections);
        // every other role needs its password.
        try Self.write("""
            local all all trust
            host all postgres 127.0.0.1/32 trust
            host all all 127.0.0.1/32 scram-sha-256
            """, to: "\(dir)/data/pg_hba.conf", chownToPostgres: true)
        process = Process()
        let argv = Self.asPostgres(["\(bin)/postgres", "-D", "\(dir)/data", "-p", String(port), "-k", dir,
                                    "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"])
        process.executableURL = URL(fileURLWithPath: argv[0])
        process.arguments = Array(argv.dropFirst())
        _ = FileManager.default.createFile(atPath: "\(dir)/server.log", contents: nil)
        let log = FileHandle(forWritingAtPath: "\(dir)/server.log")
        process.standardOutput = log
        process.standardError = log
        process.terminationHandler = { [exited] _ in exited.signal() }
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while true {
            if let c = try? PostgresConnection(settings(database: "postgres")), c.isOpen { break }
            if !process.isRunning || Date() > deadline {
                let text = (try? String(contentsOfFile: "\(dir)/server.log", encoding: .utf8)) ?? ""
                stop()
                throw HarnessError("postgres did not start on port \(port):\n\(text)")
            }
            // Not ready yet: try again in 100 ms, or at once if postgres exits meanwhile.
            if exited.wait(timeout: .now() + .milliseconds(100)) == .success { exited.signal() }
        }
    }

    deinit { stop() }

    var pid: Int32 { process.processIdentifier }

    /// Fast shutdown (SIGINT: running transactions are rolled back), then the directory goes.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGINT)
            if exited.wait(timeout: .now() + .seconds(20)) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// Settings for `database` as `user` (the password-less superuser by default), with
    /// short timeouts so a test about a dead server ends quickly.
    func settings(database: String, user: String = "postgres", password: String? = nil) -> PostgresSettings {
        var s = PostgresSettings(uri: "postgresql://\(user)@127.0.0.1:\(port)/\(database)", password: password)
        s.connectTimeoutMillis = 3_000
        s.statementTimeoutMillis = 3_000
        return s
    }

    /// A new empty database, so every test starts from nothing.
    func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: "")
        try admin("CREATE DATABASE \(name)")
        return name
    }

    /// Runs SQL as the superuser in `database`.
    @discardableResult
    func admin(_ sql: String, database: String = "postgres") throws -> PGResult {
        let c = try PostgresConnection(settings(database: database))
        return try c.query(sql)
    }

    // MARK: private

    private static func asPostgres(_ argv: [String]) -> [String] {
        getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"] + argv : argv
    }

    private static func run(_ argv: [String], log: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: argv[0])
        p.arguments = Array(argv.dropFirst())
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let h = FileHandle(forWritingAtPath: log)
        p.standardOutput = h
        p.standardError = h
        try p.run()
        p.waitUntilExit()
        if p.terminationStatus != 0 {
            throw HarnessError("\(argv.joined(separator: " ")) failed (\(p.terminationStatus)): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    private static func write(_ text: String, to path: String, chownToPostgres: Bool = true) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        if chownToPostgres, getuid() == 0, let pw = getpwnam("postgres") {
            chown(path, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw HarnessError("cannot find a free port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

nonisolated(unsafe) private var sharedServer: TestPostgres?

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
