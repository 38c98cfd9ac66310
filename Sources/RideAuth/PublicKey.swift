import COpenSSL
import RideCore

/// The one algorithm a key verifies. It follows from the key's type and curve, never from the
/// token's header (RFC 8725 §3.1): a token naming another algorithm is refused, not re-read.
public enum KeyAlgorithm: String, Sendable, Equatable {
    case rs256 = "RS256"
    case es256 = "ES256"
    case edDSA = "EdDSA"
}

/// Why a key file or one of its keys was refused; names the file and the key.
public struct KeyError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An identity provider's public key, imported into libcrypto once and used to verify many
/// tokens. RSA keys are at least 2048 bits, EC keys are P-256, OKP keys are Ed25519.
public final class PublicKey: Sendable {
    public static let minimumRSABits = 2048

    /// nil for a key read from PEM without one: it then verifies only tokens without `kid`.
    public let kid: String?
    public let algorithm: KeyAlgorithm
    /// Modulus or curve size, for messages and the RSA minimum.
    public let bits: Int
    /// The libcrypto key. Verifying reads it only, but OpenSSL promises that for concurrent
    /// use only per object type and version; the lock makes it true whatever the build.
    private let pkey: Locked<OpaquePointer>

    private init(kid: String?, algorithm: KeyAlgorithm, pkey: OpaquePointer) {
        self.kid = kid
        self.algorithm = algorithm
        self.bits = Int(EVP_PKEY_get_bits(pkey))
        self.pkey = Locked(pkey)
    }

    deinit {
        pkey.withLock { EVP_PKEY_free($0) }
    }

    // MARK: - From a JWK (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2)

    /// One JWK object. `name` says which key of which file for errors ("jwks.json key 2").
    /// Why a JWK is an encryption key (not one that verifies signatures), or nil: `"use":
    /// "enc"`, or an `alg` of JWE key management (RFC 7518 §4.1).
    static func encryptionKey(_ jwk: [String: JSON]) -> String? {
        // One with private material is not skipped: `jwk` refuses it, as a leak to fix.
        guard !privateMembers.contains(where: { jwk[$0] != nil }) else { return nil }
        if jwk["use"]?.string == "enc" { return "\"use\": \"enc\"" }
        guard let alg = jwk["alg"]?.string else { return nil }
        let exact: Set<String> = ["RSA1_5", "dir", "A128KW", "A192KW", "A256KW", "A128GCMKW", "A192GCMKW", "A256GCMKW"]
        if exact.contains(alg) || alg.hasPrefix("RSA-OAEP") || alg.hasPrefix("ECDH-ES") || alg.hasPrefix("PBES2-") {
            return "\"alg\": \"\(alg)\" is an encryption algorithm"
        }
        return nil
    }

    static let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "k"]

    public static func jwk(_ jwk: [String: JSON], name: String) throws(KeyError) -> PublicKey {
        func member(_ key: String) throws(KeyError) -> [UInt8] {
            guard let text = jwk[key]?.string else { throw KeyError("\(name): \"\(key)\" is missing or not a string") }
            guard let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw KeyError("\(name): \"\(key)\" is not base64url")
            }
            return bytes
        }
        var kid: String?
        if let raw = jwk["kid"] {
            guard let text = raw.string, !text.isEmpty else { throw KeyError("\(name): \"kid\" must be a non-empty string") }
            kid = text
        }
        let label = kid.map { "\(name) (kid \"\($0)\")" } ?? name
        // A private key in a key set is a leak waiting to be copied; refuse rather than ignore.
        for secret in privateMembers where jwk[secret] != nil {
            throw KeyError("\(label): holds private key material (\"\(secret)\"); give the public key only")
        }
        guard let kty = jwk["kty"]?.string else { throw KeyError("\(label): \"kty\" is missing") }
        let algorithm: KeyAlgorithm
        switch kty {
        case "RSA": algorithm = .rs256
        case "EC": algorithm = .es256
        case "OKP": algorithm = .edDSA
        default: throw KeyError("\(label): key type \"\(kty)\" is not supported (RSA, EC P-256, OKP Ed25519)")
        }
        // A JWK may pin its algorithm; one other than the type's own (PS256 on an RSA key,
        // say) would need a different verifier, so such a key is not used as if it were ours.
        if let alg = jwk["alg"], alg.string != algorithm.rawValue {
            throw KeyError("\(label): \"alg\" \(alg.string.map { "\"\($0)\"" } ?? "(not a string)") is not supported for a \(kty) key (only \(algorithm.rawValue))")
        }
        if let use = jwk["use"], use.string != "sig" {
            throw KeyError("\(label): \"use\" is not \"sig\"")
        }
        let pkey: OpaquePointer
        switch algorithm {
        case .rs256:
            pkey = try rsa(n: try member("n"), e: try member("e"), label: label)
        case .es256:
            guard jwk["crv"]?.string == "P-256" else {
                throw KeyError("\(label): EC curve \(jwk["crv"]?.string ?? "(none)") is not supported (P-256 only)")
            }
            let x = try member("x"), y = try member("y")
            // RFC 7518 §6.2.1.2: the coordinates are the full field size, leading zeros kept.
            guard x.count == 32, y.count == 32 else { throw KeyError("\(label): P-256 x and y must be 32 bytes each") }
            pkey = try p256(point: [0x04] + x + y, label: label)
        case .edDSA:
            guard jwk["crv"]?.string == "Ed25519" else {
                throw KeyError("\(label): OKP curve \(jwk["crv"]?.string ?? "(none)") is not supported (Ed25519 only)")
            }
            let x = try member("x")
            guard x.count == 32, let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, x, x.count) else {
                throw KeyError("\(label): not an Ed25519 public key (x must be 32 bytes)")
            }
            pkey = key
        }
        let key = PublicKey(kid: kid, algorithm: algorithm, pkey: pkey)
        try key.checkSize(label: label)
        return key
    }

    // MARK: - From PEM (`--jwt-public-key`)

    /// A PEM "PUBLIC KEY" (SubjectPublicKeyInfo) of one of the three supported types.
    public static func pem(_ pem: [UInt8], kid: String? = nil, name: String) throws(KeyError) -> PublicKey {
        let read: OpaquePointer? = pem.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let pkey = read else {
            ERR_clear_error()
            throw KeyError("\(name): not a PEM public key (expected -----BEGIN PUBLIC KEY-----)")
        }
        let algorithm: KeyAlgorithm
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA:
            algorithm = .rs256
        case EVP_PKEY_EC:
            var group = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(pkey, &group, group.count, &length) == 1,
                  String(decoding: group.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else {
                EVP_PKEY_free(pkey)
                throw KeyError("\(name): EC key not on P-256 (ES256 needs P-256)")
            }
            algorithm = .es256
        case EVP_PKEY_ED25519:
            algorithm = .edDSA
        default:
            EVP_PKEY_free(pkey)
            throw KeyError("\(name): key type not supported (RSA, EC P-256, Ed25519)")
        }
        let key = PublicKey(kid: kid, algorithm: algorithm, pkey: pkey)
        try key.checkSize(label: name)
        return key
    }

    /// Refuses an RSA key too weak to mean anything, whole, whatever file it came from. With
    /// e = 1 a "signature" is its own message (s¹ mod n = s), so anyone forges a token by
    /// writing out the padded digest; an even e is not an RSA key at all (no inverse exists).
    private func checkSize(label: String) throws(KeyError) {
        guard algorithm == .rs256 else { return }
        if bits < Self.minimumRSABits {
            throw KeyError("\(label): RSA key of \(bits) bits; RS256 needs at least \(Self.minimumRSABits)")
        }
        let usable = pkey.withLock { key -> Bool in
            var e: OpaquePointer?
            guard EVP_PKEY_get_bn_param(key, "e", &e) == 1, let e else {
                ERR_clear_error()
                return false
            }
            defer { BN_free(e) }
            // Odd and not 1: at least 3 (65537 in practice).
            return BN_is_odd(e) == 1 && BN_is_one(e) == 0
        }
        if !usable {
            throw KeyError("\(label): RSA public exponent must be odd and at least 3 (65537 in practice)")
        }
    }

    // MARK: - Verifying

    /// Whether `signature` (as carried in a JWS: PKCS #1 v1.5 for RS256, raw r‖s for ES256,
    /// raw for EdDSA) signs `message` under this key with this key's algorithm.
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        let encoded: [UInt8]
        switch algorithm {
        case .rs256:
            guard signature.count == (bits + 7) / 8 else { return false }
            encoded = signature
        case .es256:
            // RFC 7518 §3.4: exactly 64 bytes; libcrypto wants the DER SEQUENCE of r and s.
            guard signature.count == 64, let der = Self.derECDSA(signature) else { return false }
            encoded = der
        case .edDSA:
            guard signature.count == 64 else { return false }
            encoded = signature
        }
        let hashed = algorithm != .edDSA
        let ok = pkey.withLock { key -> Bool in
            guard let ctx = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestVerifyInit(ctx, nil, hashed ? EVP_sha256() : nil, nil, key) == 1 else { return false }
            return EVP_DigestVerify(ctx, encoded, encoded.count, message, message.count) == 1
        }
        // A refused signature leaves reasons on this thread's error queue; nobody reads them.
        if !ok { ERR_clear_error() }
        return ok
    }

    /// r‖s (32 bytes each) as the DER ECDSA-Sig-Value libcrypto verifies.
    static func derECDSA(_ raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        guard let r = BN_bin2bn(raw, 32, nil) else { return nil }
        guard let s = raw.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + 32, 32, nil) }) else {
            BN_free(r)
            return nil
        }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(sig, &cursor)
        }
        return written == length ? der : nil
    }

    // MARK: - libcrypto imports

    private static func rsa(n: [UInt8], e: [UInt8], label: String) throws(KeyError) -> OpaquePointer {
        guard let bn = BN_bin2bn(n, Int32(n.count), nil) else { throw KeyError("\(label): out of memory") }
        defer { BN_free(bn) }
        guard let be = BN_bin2bn(e, Int32(e.count), nil) else { throw KeyError("\(label): out of memory") }
        defer { BN_free(be) }
        let key = fromData(type: "RSA") { builder in
            OSSL_PARAM_BLD_push_BN(builder, cString("n"), bn) == 1
                && OSSL_PARAM_BLD_push_BN(builder, cString("e"), be) == 1
        }
        guard let key else { throw KeyError("\(label): not a valid RSA public key") }
        return key
    }

    private static func p256(point: [UInt8], label: String) throws(KeyError) -> OpaquePointer {
        let key = point.withUnsafeBytes { raw in
            fromData(type: "EC") { builder in
                OSSL_PARAM_BLD_push_utf8_string(builder, cString("group"), cString("prime256v1"), 0) == 1
                    && OSSL_PARAM_BLD_push_octet_string(builder, cString("pub"), raw.baseAddress, raw.count) == 1
            }
        }
        guard let key else { throw KeyError("\(label): x, y is not a point on P-256") }
        // Import already refuses points off the curve; the explicit check keeps that true
        // should a libcrypto build import lazily.
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            EVP_PKEY_free(key)
            throw KeyError("\(label): out of memory")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_public_check(ctx) == 1 else {
            ERR_clear_error()
            EVP_PKEY_free(key)
            throw KeyError("\(label): x, y is not a point on P-256")
        }
        return key
    }

    /// OSSL_PARAM_BLD keeps the name and string pointers it is given until `to_param` (it does
    /// not copy them), so they must outlive the call: a Swift String's bridged pointer does not.
    private static func cString(_ literal: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(literal.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// EVP_PKEY_fromdata with the parameters `push` adds; nil (error queue cleared) on failure.
    private static func fromData(type: String, push: (OpaquePointer) -> Bool) -> OpaquePointer? {
        defer { ERR_clear_error() }
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard push(builder), let params = OSSL_PARAM_BLD_to_param(builder) else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1,
              EVP_PKEY_fromdata(ctx, &key, ridepush_EVP_PKEY_PUBLIC_KEY(), params) == 1 else {
            EVP_PKEY_free(key)
            return nil
        }
        return key
    }
}
