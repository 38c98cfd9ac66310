import COpenSSL
import RideAuth
import RideCore

/// A private key that signs JWTs: the APNs .p8 key (EC P-256, ES256) or a Google service
/// account's key (RSA, RS256). RideAuth's PublicKey verifies; this is its signing half, for
/// the tokens RidePush presents to Apple and Google.
public final class SigningKey: Sendable {
    public let algorithm: KeyAlgorithm
    /// The libcrypto key, behind a lock for the same reason as PublicKey's: OpenSSL promises
    /// concurrent use per object type and version only.
    private let pkey: Locked<OpaquePointer>

    private init(algorithm: KeyAlgorithm, pkey: OpaquePointer) {
        self.algorithm = algorithm
        self.pkey = Locked(pkey)
    }

    deinit {
        pkey.withLock { EVP_PKEY_free($0) }
    }

    /// A PEM private key ("BEGIN PRIVATE KEY", PKCS #8: what Apple's .p8 and Google's JSON
    /// hold). `name` says which file in errors.
    public static func pem(_ pem: [UInt8], name: String) throws(KeyError) -> SigningKey {
        let read: OpaquePointer? = pem.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key = read else {
            ERR_clear_error()
            throw KeyError("\(name): not a PEM private key (expected -----BEGIN PRIVATE KEY-----)")
        }
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_EC:
            var group = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &group, group.count, &length) == 1,
                  String(decoding: group.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else {
                EVP_PKEY_free(key)
                throw KeyError("\(name): EC key not on P-256 (ES256 needs P-256)")
            }
            return SigningKey(algorithm: .es256, pkey: key)
        case EVP_PKEY_RSA:
            let bits = Int(EVP_PKEY_get_bits(key))
            guard bits >= PublicKey.minimumRSABits else {
                EVP_PKEY_free(key)
                throw KeyError("\(name): RSA key of \(bits) bits; RS256 needs at least \(PublicKey.minimumRSABits)")
            }
            return SigningKey(algorithm: .rs256, pkey: key)
        default:
            EVP_PKEY_free(key)
            throw KeyError("\(name): key type not supported (EC P-256 for APNs, RSA for a service account)")
        }
    }

    /// The JWS signature of `message` (RFC 7518 §3.3, §3.4): PKCS #1 v1.5 for RS256, raw r‖s
    /// of 64 bytes for ES256 (libcrypto writes DER; JWS and Apple want the two numbers). Nil
    /// only when libcrypto fails.
    public func sign(_ message: [UInt8]) -> [UInt8]? {
        let der: [UInt8]? = pkey.withLock { key in
            guard let ctx = EVP_MD_CTX_new() else { return nil }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return nil }
            var length = 0
            guard EVP_DigestSign(ctx, nil, &length, message, message.count) == 1 else { return nil }
            var out = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(ctx, &out, &length, message, message.count) == 1 else { return nil }
            return Array(out.prefix(length))
        }
        guard let der else {
            ERR_clear_error()
            return nil
        }
        return algorithm == .es256 ? Self.rawECDSA(der) : der
    }

    /// A DER ECDSA-Sig-Value as r‖s, each left-padded to 32 bytes.
    static func rawECDSA(_ der: [UInt8]) -> [UInt8]? {
        let sig: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig else { return nil }
        defer { ECDSA_SIG_free(sig) }
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { b -> Bool in
            BN_bn2binpad(ECDSA_SIG_get0_r(sig), b.baseAddress, 32) == 32
                && BN_bn2binpad(ECDSA_SIG_get0_s(sig), b.baseAddress! + 32, 32) == 32
        }
        return ok ? out : nil
    }
}

/// A compact JWS (header.claims.signature) from two JSON objects written by the caller.
enum CompactJWT {
    static func sign(header: [UInt8], claims: [UInt8], with key: SigningKey) -> String? {
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        guard let signature = key.sign(Array(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(signature)
    }
}
