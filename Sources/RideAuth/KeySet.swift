import Foundation
import RideCore

/// The identity provider's public keys, by `kid`: a JWKS file (RFC 7517 §5) and/or one PEM key.
/// Immutable; a reload builds a new set and swaps it in whole (`TokenVerifier.reload`).
public struct KeySet: Sendable {
    /// In file order, the PEM key (if any) last.
    public let keys: [PublicKey]
    private let byKid: [String: PublicKey]
    /// The key for tokens without `kid`: the PEM key when it has none.
    private let unnamed: PublicKey?
    /// Why each key of the JWKS that is not a signing key was left out (an identity
    /// provider's encryption key), for the log at start and on SIGHUP; empty when none was.
    public private(set) var skipped: [String] = []

    public static let empty = KeySet(checked: [])

    /// Refuses two keys with one `kid` (which would make the choice depend on order) and a
    /// second key without one.
    public init(_ keys: [PublicKey]) throws(KeyError) {
        var seen = Set<String>()
        var unnamed = 0
        for key in keys {
            if let kid = key.kid {
                guard seen.insert(kid).inserted else { throw KeyError("two keys have kid \"\(kid)\"; a kid must name one key") }
            } else {
                unnamed += 1
                guard unnamed == 1 else { throw KeyError("more than one key without a kid; tokens could not choose") }
            }
        }
        self.init(checked: keys)
    }

    private init(checked keys: [PublicKey]) {
        self.keys = keys
        var byKid = [String: PublicKey]()
        for key in keys { if let kid = key.kid { byKid[kid] = key } }
        self.byKid = byKid
        unnamed = keys.first { $0.kid == nil }
    }

    /// The key a token's `kid` names (nil `kid`: the key without one); nil when there is none.
    /// Never a guess: an unknown `kid` does not fall back to another key.
    public func key(kid: String?) -> PublicKey? {
        guard let kid else { return unnamed }
        return byKid[kid]
    }

    public var isEmpty: Bool { keys.isEmpty }

    /// A JWKS document `{"keys": [...]}`. Every signing key must be usable: one the server
    /// cannot verify with is an error, so a typo does not go unnoticed until tokens are refused.
    /// Encryption keys (`"use": "enc"`, or an encryption `alg` such as RSA-OAEP) are not
    /// signing keys and are left out: identity providers publish them beside the signing keys
    /// (Keycloak's RSA-OAEP key), and the set is still the provider's.
    public static func jwks(_ bytes: [UInt8], name: String) throws(KeyError) -> [PublicKey] {
        var skipped: [String] = []
        return try jwks(bytes, name: name, skipped: &skipped)
    }

    /// `jwks`, saying in `skipped` which encryption keys were left out and why.
    public static func jwks(_ bytes: [UInt8], name: String, skipped: inout [String]) throws(KeyError) -> [PublicKey] {
        let document: JSON
        do { document = try JSON.parse(bytes) } catch {
            throw KeyError("\(name): \(error.located(in: bytes))")
        }
        guard let list = document["keys"]?.array else { throw KeyError("\(name): not a JWKS (no \"keys\" list)") }
        guard !list.isEmpty else { throw KeyError("\(name): the \"keys\" list is empty") }
        var keys = [PublicKey]()
        for (index, item) in list.enumerated() {
            guard let jwk = item.object else { throw KeyError("\(name) key \(index + 1): not a JSON object") }
            if let why = PublicKey.encryptionKey(jwk) {
                let kid = jwk["kid"]?.string.map { " (kid \"\($0)\")" } ?? ""
                skipped.append("\(name) key \(index + 1)\(kid): skipped, \(why); only signing keys verify tokens")
                continue
            }
            keys.append(try PublicKey.jwk(jwk, name: "\(name) key \(index + 1)"))
        }
        guard !keys.isEmpty else { throw KeyError("\(name): no signing keys (every key is an encryption key)") }
        return keys
    }

    /// A JWKS document as a whole set (`--jwks-url`'s answer), saying in `skipped` which
    /// encryption keys were left out.
    public static func jwksSet(_ bytes: [UInt8], name: String) throws(KeyError) -> KeySet {
        var skipped: [String] = []
        var set = try KeySet(try jwks(bytes, name: name, skipped: &skipped))
        set.skipped = skipped
        return set
    }

    /// `--jwks-file` and `--jwt-public-key` read from disk, as at start and on SIGHUP.
    public static func load(jwksFile: String?, publicKeyFile: String?) throws(KeyError) -> KeySet {
        var keys = [PublicKey]()
        var skipped: [String] = []
        if let jwksFile {
            keys += try jwks(try read(jwksFile), name: jwksFile, skipped: &skipped)
        }
        if let publicKeyFile {
            keys.append(try PublicKey.pem(try read(publicKeyFile), name: publicKeyFile))
        }
        var set = try KeySet(keys)
        set.skipped = skipped
        return set
    }

    private static func read(_ path: String) throws(KeyError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw KeyError("cannot read \(path)") }
        return Array(data)
    }
}
