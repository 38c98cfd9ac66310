import Foundation
import RideStore

/// Where and how to reach PostgreSQL: any libpq connection URI (`postgresql://user@host:port/db?…`,
/// several hosts, `sslmode=…`), plus a password read from a file when it must not sit in the
/// URI or the environment. Without either, libpq's own sources apply (`PGPASSFILE`,
/// `~/.pgpass`, `PGPASSWORD`).
public struct PostgresSettings: Sendable {
    public var uri: String
    /// From `--store-password-file`; wins over a password in the URI.
    public var password: String?
    /// Connecting (TCP, TLS, authentication) must finish within this.
    public var connectTimeoutMillis: Int = 3_000
    /// Any one statement; the client gives up 2 s after it (the server is gone).
    public var statementTimeoutMillis: Int = 3_000
    public var applicationName: String = "ridepush"
    /// How long a group whose COMMIT lost its connection may wait for a primary to settle
    /// it on (see `PostgresStore.settle`): a failover manager promotes a standby within
    /// seconds; past this the outcome is left to the catch-up read and the client's retry.
    /// The store thread waits that long (requests queue, ticks go on), once per lost COMMIT.
    public var settleTimeoutMillis: Int = 15_000

    public init(uri: String, password: String? = nil) {
        self.uri = uri
        self.password = password
    }

    /// Whether a `--store` value names PostgreSQL rather than an SQLite file.
    public static func isURI(_ s: String) -> Bool {
        s.hasPrefix("postgresql://") || s.hasPrefix("postgres://")
    }

    /// Reads a password file: its first line, without the line break. Throws a message
    /// naming the file.
    public static func password(fromFile path: String) throws(StoreError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StoreError(.unavailable, "--store-password-file \(path): cannot read the file")
        }
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let password = line.hasSuffix("\r") ? String(line.dropLast()) : line
        if password.isEmpty { throw StoreError(.unavailable, "--store-password-file \(path): the file is empty") }
        return password
    }

    /// How many hosts the URI names (`postgresql://u@db1:5432,db2:5432/db`, or
    /// `?host=db1,db2`); libpq tries them in turn, each within `connect_timeout`.
    public var hostCount: Int { Self.hostCount(uri) }

    public static func hostCount(_ uri: String) -> Int {
        guard let scheme = uri.range(of: "://") else { return 1 }
        let rest = uri[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        var count = authority.split(separator: ",", omittingEmptySubsequences: false).count
        if let q = rest.firstIndex(of: "?") {
            for p in rest[rest.index(after: q)...].split(separator: "&") where p.hasPrefix("host=") || p.hasPrefix("hostaddr=") {
                let v = p.split(separator: "=", maxSplits: 1).last ?? ""
                count = max(count, v.split(separator: ",", omittingEmptySubsequences: false).count)
            }
        }
        return max(1, count)
    }

    /// The URI with any password replaced by `***`, for logs and error messages.
    public var redacted: String { Self.redact(uri) }

    /// `uri` with its password hidden; anything that is not a URI comes back unchanged.
    public static func redact(_ uri: String) -> String {
        guard let scheme = uri.range(of: "://") else { return uri }
        var out = String(uri[..<scheme.upperBound])
        var rest = uri[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            if let colon = userinfo.firstIndex(of: ":") {
                out += userinfo[..<colon] + ":***"
            } else {
                out += userinfo
            }
            out += authority[at...]
        } else {
            out += authority
        }
        rest = rest[authorityEnd...]
        // A password may also come as a query parameter.
        guard let q = rest.firstIndex(of: "?") else { return out + rest }
        out += rest[..<q] + "?"
        let params = rest[rest.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false).map { p -> String in
            p.lowercased().hasPrefix("password=") ? "password=***" : String(p)
        }
        return out + params.joined(separator: "&")
    }
}
