import Foundation

/// Minimum configured secret length: RFC 7518 §3.2 requires an HS256 key of at least 256 bits.
public let minimumSecretLength = 32

public struct SecretError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The configured JWT secret: `--jwt-secret-file` if given (it wins, being explicit), else
/// `RIDEPUSH_JWT_SECRET`; nil when neither is set (the caller decides — `serve` makes a random
/// one, `token` refuses). The bytes are used as-is, except that trailing whitespace/newlines
/// are dropped from a file, since `echo secret > file` adds one. Throws for an unreadable
/// file or a secret shorter than `minimumSecretLength`.
public func loadSecret(file: String?, environment: [String: String]) throws(SecretError) -> [UInt8]? {
    var bytes: [UInt8]
    var origin: String
    if let file {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw SecretError("cannot read JWT secret file \(file)")
        }
        bytes = Array(data)
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 {
            bytes.removeLast()
        }
        origin = "JWT secret file \(file)"
    } else if let value = environment["RIDEPUSH_JWT_SECRET"], !value.isEmpty {
        bytes = Array(value.utf8)
        origin = "RIDEPUSH_JWT_SECRET"
    } else {
        return nil
    }
    guard bytes.count >= minimumSecretLength else {
        throw SecretError("\(origin) is \(bytes.count) bytes; HS256 needs at least \(minimumSecretLength) (try: openssl rand -hex 32)")
    }
    return bytes
}
