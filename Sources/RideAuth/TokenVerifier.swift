import RideCore

/// Verifies every token the server accepts: RidePush's own HS256 tokens (shared secret) and the
/// identity provider's RS256 / ES256 / EdDSA tokens (public keys by `kid`). Same call as
/// `TokenSigner.verify`, so a caller swaps one for the other.
///
/// The key decides the algorithm: a token is checked only with the algorithm of the key its
/// `kid` names, and an HS256 token only with the shared secret. So an HS256 token MACed with a
/// public key as its "secret", or an RS256 header on an EC key, is refused before any crypto.
public final class TokenVerifier: Sendable {
    public struct Policy: Sendable, Equatable {
        /// Required `iss` of identity-provider tokens (RFC 7519 §4.1.1), when set.
        public var issuer: String?
        /// Required member of `aud` (a string or a list) of identity-provider tokens, when set.
        public var audience: String?
        /// Where an identity provider puts RidePush's claims when it cannot use the bare names:
        /// with "https://rides.example/" the claims `https://rides.example/scope`, `…/rides` and
        /// `…/ops` are read in place of `scope`, `rides` and `ops` (Auth0 requires namespaced
        /// custom claims; its own `scope` is the OAuth one). nil: the bare names.
        public var claimNamespace: String?
        /// Accept identity-provider tokens whatever `iss` or `aud` they carry where `issuer` or
        /// `audience` is not set. Must be said explicitly: a shared key set (Firebase's, Google's)
        /// signs tokens for every project that uses it, so without both pins any of them could
        /// act here, `ops: true` included.
        public var anyIssuer: Bool

        public init(issuer: String? = nil, audience: String? = nil, claimNamespace: String? = nil, anyIssuer: Bool = false) {
            self.issuer = issuer
            self.audience = audience
            self.claimNamespace = claimNamespace
            self.anyIssuer = anyIssuer
        }

        /// An explicit "any issuer, any audience" (tests, one-provider set-ups that pin nothing).
        public static let anyIssuerAllowed = Policy(anyIssuer: true)

        /// What identity-provider tokens lack to be accepted: "issuer", "audience", "issuer and
        /// audience", or nil when both are pinned or `anyIssuer` waives them.
        public var unpinned: String? {
            if anyIssuer { return nil }
            switch (issuer == nil, audience == nil) {
            case (true, true): return "issuer and audience"
            case (true, false): return "issuer"
            case (false, true): return "audience"
            case (false, false): return nil
            }
        }
    }

    private let hs256: TokenSigner?
    private let policy: Policy
    /// Swapped whole by `reload`; a verify in progress keeps the set it started with.
    private let current: Locked<KeySet>

    /// Told when a token names a kid the set lacks (or comes while the set is still empty), on
    /// the verifying thread: a service thread, so it only takes note (`JWKSFetcher` fetches).
    private let unknownKidObserver = Locked<(@Sendable () -> Void)?>(nil)

    /// `secret` nil: HS256 tokens are refused. An empty `keys`: asymmetric tokens are refused.
    public init(secret: [UInt8]?, keys: KeySet = .empty, policy: Policy = Policy()) {
        hs256 = secret.map { TokenSigner(secret: $0) }
        self.policy = policy
        current = Locked(keys)
    }

    public var keys: KeySet { current.withLock { $0 } }

    /// Rotation (SIGHUP): later tokens are checked against `keys`. Sessions verified before keep
    /// their claims; nothing here knows about them. Returns the set it replaced.
    @discardableResult
    public func reload(_ keys: KeySet) -> KeySet {
        current.withLock { held in
            let old = held
            held = keys
            return old
        }
    }

    /// Where keys are fetched (`--jwks-url`): `observer` hears of every token refused for a kid
    /// the set lacks, so the set can be fetched again. It must not block.
    public func onUnknownKid(_ observer: @escaping @Sendable () -> Void) {
        unknownKidObserver.withLock { $0 = observer }
    }

    /// SIGHUP: reads the key files again and swaps the set in only if they load; on an error
    /// (thrown, for the log) the previous set stays in force.
    public func reload(jwksFile: String?, publicKeyFile: String?) throws(KeyError) {
        reload(try KeySet.load(jwksFile: jwksFile, publicKeyFile: publicKeyFile))
    }

    /// Checks, in order: size and shape, header (alg, kid → key, the key's algorithm), that the
    /// policy pins issuer and audience (or says `anyIssuer`), the signature, then claims
    /// (`iss`/`aud` when configured, types) and `exp`/`nbf` against `now`
    /// with `TokenSigner.leeway`. An identity provider's token must carry `exp`.
    public func verify(_ token: String, now: Int64) throws(TokenError) -> TokenClaims {
        let (parts, header) = try TokenSigner.split(token)
        guard let alg = header["alg"]?.string else {
            throw TokenError(.unsupportedAlgorithm, "token header has no alg string (accepted: \(accepted))")
        }
        var kid: String?
        if let raw = header["kid"] {
            guard let text = raw.string else { throw TokenError(.malformed, "token kid is not a string") }
            kid = text
        }
        let keys = self.keys
        let key = keys.key(kid: kid)

        if alg == "HS256" {
            // The kid names a public key, so the token was made for that key's algorithm, or
            // made with the key's bytes as an HMAC secret: either way not ours to accept.
            if let kid, let key {
                throw TokenError(.unsupportedAlgorithm, "token alg HS256 does not match key \"\(TokenSigner.printable(kid))\" (\(key.algorithm.rawValue))")
            }
            guard let hs256 else {
                throw TokenError(.unsupportedAlgorithm, "token alg HS256 refused (accepted: \(accepted))")
            }
            return try hs256.verify(token, now: now)
        }
        // With keys fetched (`onUnknownKid`), an empty set is one not fetched yet: said so below.
        guard let algorithm = KeyAlgorithm(rawValue: alg), !keys.isEmpty || unknownKidObserver.withLock({ $0 }) != nil else {
            throw TokenError(.unsupportedAlgorithm, "token alg \"\(TokenSigner.printable(alg))\" refused (accepted: \(accepted))")
        }
        // Refused before any crypto: with a pin missing, a token the same keys signed for
        // another project would pass every check below.
        if let missing = policy.unpinned {
            throw TokenError(.invalidClaims, "identity-provider tokens are refused: no \(missing) configured (--jwt-issuer, --jwt-audience, or --jwt-any-issuer to accept any)")
        }
        if let typ = header["typ"], typ.string == nil {
            throw TokenError(.malformed, "token typ is not a string")
        }
        if header["crit"] != nil {
            throw TokenError(.malformed, "token header has crit extensions, none are supported")
        }
        guard let key else {
            if kid != nil || keys.isEmpty, let observer = unknownKidObserver.withLock({ $0 }) { observer() }
            if keys.isEmpty {
                throw TokenError(.unknownKey, "the identity provider's keys have not been fetched yet (--jwks-url); try again shortly")
            }
            if let kid { throw TokenError(.unknownKey, "token kid \"\(TokenSigner.printable(kid))\" is not a known key") }
            throw TokenError(.unknownKey, "token has no kid (the identity provider's keys are chosen by kid)")
        }
        guard key.algorithm == algorithm else {
            throw TokenError(.unsupportedAlgorithm, "token alg \(alg) does not match key \"\(TokenSigner.printable(kid ?? "(no kid)"))\" (\(key.algorithm.rawValue))")
        }
        guard parts.count == 3 else {
            throw TokenError(.malformed, "token has no signature")
        }
        guard let signature = Base64URL.decode(Substring(parts[2])) else {
            throw TokenError(.malformed, "token signature is not base64url")
        }
        let signingInput = Array(token.utf8[parts[0].startIndex..<parts[1].endIndex])
        guard key.verify(signature: signature, message: signingInput) else {
            // Libraries that sign with a general ECDSA API (OpenSSL, Java's Signature) give DER;
            // saying so saves the operator from hunting a key problem that is an encoding one.
            if key.algorithm == .es256, signature.count != 64, signature.first == 0x30 {
                throw TokenError(.badSignature, "token signature looks DER-encoded (\(signature.count) bytes); ES256 in a JWS is raw r||s, 64 bytes (RFC 7518 section 3.4)")
            }
            throw TokenError(.badSignature, "token signature does not match")
        }
        guard let payloadBytes = Base64URL.decode(Substring(parts[1])) else {
            throw TokenError(.malformed, "token payload is not base64url")
        }
        guard var payload = TokenSigner.jsonObject(payloadBytes) else {
            throw TokenError(.malformed, "token payload is not a JSON object")
        }
        try checkIssuerAndAudience(payload)
        if let namespace = policy.claimNamespace {
            for name in ["scope", "rides", "ops"] { payload[name] = payload[namespace + name] }
        }
        let claims = try TokenSigner.parseClaims(payload)
        guard claims.exp != nil else {
            throw TokenError(.invalidClaims, "token has no exp")
        }
        try Self.checkTimes(claims, now: now)
        return claims
    }

    /// What the configuration accepts, for refusals.
    private var accepted: String {
        var names = [String]()
        if hs256 != nil { names.append("HS256") }
        let keys = self.keys
        for algorithm in [KeyAlgorithm.rs256, .es256, .edDSA] where keys.keys.contains(where: { $0.algorithm == algorithm }) {
            names.append(algorithm.rawValue)
        }
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }

    private func checkIssuerAndAudience(_ payload: [String: JSON]) throws(TokenError) {
        if let issuer = policy.issuer, payload["iss"]?.string != issuer {
            throw TokenError(.invalidClaims, "token iss is not the configured issuer")
        }
        if let audience = policy.audience {
            let listed: [String]
            switch payload["aud"] {
            case .string(let one)?: listed = [one]
            case .array(let many)?: listed = many.compactMap(\.string)
            default: listed = []
            }
            guard listed.contains(audience) else {
                throw TokenError(.invalidClaims, "token aud does not name the configured audience")
            }
        }
    }

    /// exp: valid while now < exp + leeway. nbf: valid once now >= nbf - leeway. Compared
    /// against `now ∓ leeway`, saturating, so no claim value can overflow. (TokenSigner.verify
    /// does the same for HS256 inline.)
    static func checkTimes(_ claims: TokenClaims, now: Int64) throws(TokenError) {
        if let exp = claims.exp, exp <= TokenSigner.saturating(now, -TokenSigner.leeway) {
            throw TokenError(.expired, "token expired")
        }
        if let nbf = claims.nbf, nbf > TokenSigner.saturating(now, TokenSigner.leeway) {
            throw TokenError(.notYetValid, "token not yet valid")
        }
    }
}
