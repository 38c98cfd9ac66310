import RideCore
import COpenSSL
import Foundation
@testable import RideAuth

/// A key pair made by libcrypto for this test run, with what an identity provider would publish
/// (its JWK, its PEM) and sign (a JWS with the JOSE signature encoding). Nothing is pinned, so a
/// verifier bug cannot hide behind a stale fixture.
final class TestKeyPair {
    enum Kind { case rsa(bits: Int), p256, p384, ed25519 }

    let kind: Kind
    private let pkey: OpaquePointer

    init(_ kind: Kind) {
        self.kind = kind
        let name: String
        switch kind {
        case .rsa: name = "RSA"
        case .p256, .p384: name = "EC"
        case .ed25519: name = "ED25519"
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, name, nil) else { fatalError("no \(name) keygen") }
        defer { EVP_PKEY_CTX_free(ctx) }
        precondition(EVP_PKEY_keygen_init(ctx) == 1)
        switch kind {
        case .rsa(let bits): precondition(EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1)
        case .p256: precondition(EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1)
        case .p384: precondition(EVP_PKEY_CTX_set_group_name(ctx, "P-384") == 1)
        case .ed25519: break
        }
        var key: OpaquePointer?
        precondition(EVP_PKEY_generate(ctx, &key) == 1 && key != nil, "keygen failed")
        pkey = key!
    }

    deinit { EVP_PKEY_free(pkey) }

    var alg: String {
        switch kind {
        case .rsa: "RS256"
        case .p256: "ES256"
        case .p384: "ES384"
        case .ed25519: "EdDSA"
        }
    }

    /// The public JWK members (no kid, no alg), as JSON text members.
    func jwkMembers() -> String {
        switch kind {
        case .rsa:
            return #""kty":"RSA","n":"\#(b64(bn("n")))","e":"\#(b64(bn("e")))""#
        case .p256, .p384:
            let size = if case .p256 = kind { 32 } else { 48 }
            let crv = if case .p256 = kind { "P-256" } else { "P-384" }
            return #""kty":"EC","crv":"\#(crv)","x":"\#(b64(bn("qx", pad: size)))","y":"\#(b64(bn("qy", pad: size)))""#
        case .ed25519:
            var raw = [UInt8](repeating: 0, count: 32)
            var length = raw.count
            precondition(EVP_PKEY_get_raw_public_key(pkey, &raw, &length) == 1 && length == 32)
            return #""kty":"OKP","crv":"Ed25519","x":"\#(b64(raw))""#
        }
    }

    func jwk(kid: String?) -> String {
        "{" + (kid.map { #""kid":"\#($0)","# } ?? "") + jwkMembers() + "}"
    }

    /// SubjectPublicKeyInfo PEM, as `openssl pkey -pubout` writes it.
    func pem() -> [UInt8] {
        let bio = BIO_new(BIO_s_mem())!
        defer { BIO_free(bio) }
        precondition(PEM_write_bio_PUBKEY(bio, pkey) == 1)
        var out = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(bio)))
        precondition(BIO_read(bio, &out, Int32(out.count)) == out.count)
        return out
    }

    /// The JWS signature of `message` (RFC 7518 §3.3–3.4, RFC 8037 §3.1): for EC the raw r‖s.
    func sign(_ message: [UInt8]) -> [UInt8] {
        let der = signDER(message)
        switch kind {
        case .p256: return Self.raw(der: der, size: 32)
        case .p384: return Self.raw(der: der, size: 48)
        default: return der
        }
    }

    /// The signature as libcrypto makes it (DER for ECDSA).
    func signDER(_ message: [UInt8]) -> [UInt8] {
        let ctx = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(ctx) }
        let digest: OpaquePointer? = switch kind {
        case .ed25519: nil
        case .p384: EVP_sha384()
        default: EVP_sha256()
        }
        precondition(EVP_DigestSignInit(ctx, nil, digest, nil, pkey) == 1)
        var length = 0
        precondition(EVP_DigestSign(ctx, nil, &length, message, message.count) == 1)
        var out = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(ctx, &out, &length, message, message.count) == 1)
        return Array(out.prefix(length))
    }

    /// A compact JWS with this header and payload JSON, signed by this key.
    func token(header: String, payload: String) -> String {
        let input = b64(Array(header.utf8)) + "." + b64(Array(payload.utf8))
        return input + "." + b64(sign(Array(input.utf8)))
    }

    func token(kid: String?, payload: String, alg: String? = nil) -> String {
        let kidMember = kid.map { #","kid":"\#($0)""# } ?? ""
        return token(header: #"{"alg":"\#(alg ?? self.alg)","typ":"JWT"\#(kidMember)}"#, payload: payload)
    }

    private func bn(_ name: String, pad: Int? = nil) -> [UInt8] {
        var value: OpaquePointer?
        precondition(EVP_PKEY_get_bn_param(pkey, name, &value) == 1 && value != nil, "no \(name)")
        defer { BN_free(value) }
        let size = pad ?? Int((BN_num_bits(value) + 7) / 8)
        var out = [UInt8](repeating: 0, count: size)
        precondition(BN_bn2binpad(value, &out, Int32(size)) == size)
        return out
    }

    private static func raw(der: [UInt8], size: Int) -> [UInt8] {
        let sig = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, der.count)
        }!
        defer { ECDSA_SIG_free(sig) }
        var r = [UInt8](repeating: 0, count: size), s = r
        precondition(BN_bn2binpad(ECDSA_SIG_get0_r(sig), &r, Int32(size)) == size)
        precondition(BN_bn2binpad(ECDSA_SIG_get0_s(sig), &s, Int32(size)) == size)
        return r + s
    }
}

func b64(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }

/// An RSA public key built by hand from a modulus and exponent (libcrypto imports any e), as
/// SubjectPublicKeyInfo PEM: how a weak key a provider (or an attacker) publishes would look.
func rsaPublicPEM(n: [UInt8], e: [UInt8]) -> [UInt8] {
    let bn = BN_bin2bn(n, Int32(n.count), nil)!, be = BN_bin2bn(e, Int32(e.count), nil)!
    defer { BN_free(bn); BN_free(be) }
    let builder = OSSL_PARAM_BLD_new()!
    defer { OSSL_PARAM_BLD_free(builder) }
    // OSSL_PARAM_BLD keeps the name pointers until to_param: static strings, not bridged ones.
    func name(_ s: StaticString) -> UnsafePointer<CChar> { UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self) }
    precondition(OSSL_PARAM_BLD_push_BN(builder, name("n"), bn) == 1 && OSSL_PARAM_BLD_push_BN(builder, name("e"), be) == 1)
    let params = OSSL_PARAM_BLD_to_param(builder)!
    defer { OSSL_PARAM_free(params) }
    let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil)!
    defer { EVP_PKEY_CTX_free(ctx) }
    var key: OpaquePointer?
    precondition(EVP_PKEY_fromdata_init(ctx) == 1 && EVP_PKEY_fromdata(ctx, &key, ridepush_EVP_PKEY_PUBLIC_KEY(), params) == 1)
    defer { EVP_PKEY_free(key) }
    let bio = BIO_new(BIO_s_mem())!
    defer { BIO_free(bio) }
    precondition(PEM_write_bio_PUBKEY(bio, key) == 1)
    var out = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(bio)))
    precondition(BIO_read(bio, &out, Int32(out.count)) == out.count)
    return out
}

/// `{"keys":[...]}` of these JWKs.
func jwks(_ members: [String]) -> [UInt8] {
    Array(#"{"keys":["#.utf8) + Array(members.joined(separator: ",").utf8) + Array("]}".utf8)
}
