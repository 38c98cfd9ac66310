import COpenSSL
import RideCore

/// Signs and verifies RidePush tokens: JWT compact serialization, HS256 only.
public struct TokenSigner: Sendable {
    /// Seconds of clock skew tolerated on `exp` and `nbf`.
    public static let leeway: Int64 = 30
    /// Longer tokens are refused before any decoding, so a hostile client cannot make the
    /// server base64-decode and parse megabytes per attempt. Real tokens are a few hundred bytes.
    public static let maxTokenLength = 8192

    private let secret: [UInt8]

    /// `secret` is the raw HMAC key. RFC 7518 §3.2 asks for at least 32 bytes; `loadSecret`
    /// enforces that for configured secrets, `randomSecret()` always meets it.
    public init(secret: [UInt8]) {
        precondition(!secret.isEmpty, "TokenSigner needs a non-empty secret")
        self.secret = secret
    }

    /// 32 bytes from OpenSSL's CSPRNG, for a per-process secret when none is configured.
    /// Traps if the CSPRNG fails: carrying on with a guessable secret would be worse.
    public static func randomSecret() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        guard ok == 1 else { fatalError("RAND_bytes failed; refusing to run with a weak secret") }
        return bytes
    }

    // {"alg":"HS256","typ":"JWT"} — constant, so every token we issue has the same header.
    private static let encodedHeader = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))

    public func sign(_ claims: TokenClaims) -> String {
        let signingInput = Self.encodedHeader + "." + Base64URL.encode(Array(Self.claimsJSON(claims).utf8))
        return signingInput + "." + Base64URL.encode(mac(Array(signingInput.utf8)))
    }

    /// Signs arbitrary header and payload JSON with this secret. Internal: it exists so tests
    /// can forge correctly signed tokens with hostile headers (alg none, HS512) and claims.
    func sign(headerJSON: String, payloadJSON: String) -> String {
        let signingInput = Base64URL.encode(Array(headerJSON.utf8)) + "." + Base64URL.encode(Array(payloadJSON.utf8))
        return signingInput + "." + signature(signingInput)
    }

    /// A token's dot-separated parts and its decoded header, checked for size and shape; what
    /// every verifier (HS256 here, the identity provider's keys in TokenVerifier) reads first.
    /// Two parts are still read far enough to name the algorithm, so an unsigned `alg: none`
    /// token without its trailing dot is reported as such.
    static func split(_ token: String) throws(TokenError) -> ([Substring.UTF8View.SubSequence], [String: JSON]) {
        if token.utf8.count > maxTokenLength {
            throw TokenError(.malformed, "token too long")
        }
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3 else {
            throw TokenError(.malformed, "token must have three dot-separated parts")
        }
        guard let headerBytes = Base64URL.decode(Substring(parts[0])) else {
            throw TokenError(.malformed, "token header is not base64url")
        }
        guard let header = jsonObject(headerBytes) else {
            throw TokenError(.malformed, "token header is not a JSON object")
        }
        return (parts, header)
    }

    /// The encoded HS256 signature of any signing input, even one that is not base64url. Internal, for tests.
    func signature(_ signingInput: String) -> String {
        Base64URL.encode(mac(Array(signingInput.utf8)))
    }

    /// Checks, in this order: size and shape, header (`alg` must be exactly "HS256"),
    /// signature (constant time), then claim types, then `exp`/`nbf` against `now` with
    /// `leeway`. Claims are not parsed before the signature holds, so unsigned input never
    /// reaches the claim parser.
    public func verify(_ token: String, now: Int64) throws(TokenError) -> TokenClaims {
        let (parts, header) = try Self.split(token)
        try Self.checkHeader(header)
        guard parts.count == 3 else {
            throw TokenError(.malformed, "token has no signature")
        }
        guard let signature = Base64URL.decode(Substring(parts[2])) else {
            throw TokenError(.malformed, "token signature is not base64url")
        }
        let signingInput = Array(token.utf8[parts[0].startIndex..<parts[1].endIndex])
        let expected = mac(signingInput)
        // Length is public (always 32 for HS256); only the content compare must be constant time.
        guard signature.count == expected.count,
              CRYPTO_memcmp(signature, expected, expected.count) == 0 else {
            throw TokenError(.badSignature, "token signature does not match")
        }
        guard let payloadBytes = Base64URL.decode(Substring(parts[1])) else {
            throw TokenError(.malformed, "token payload is not base64url")
        }
        guard let payload = Self.jsonObject(payloadBytes) else {
            throw TokenError(.malformed, "token payload is not a JSON object")
        }
        let claims = try Self.parseClaims(payload)
        // exp: valid while now < exp + leeway. nbf: valid once now >= nbf - leeway.
        // Written as comparisons against `now ∓ leeway` (saturating) so no claim value can overflow.
        if let exp = claims.exp, exp <= Self.saturating(now, -Self.leeway) {
            throw TokenError(.expired, "token expired")
        }
        if let nbf = claims.nbf, nbf > Self.saturating(now, Self.leeway) {
            throw TokenError(.notYetValid, "token not yet valid")
        }
        return claims
    }

    // MARK: - Internals

    private func mac(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let result = HMAC(EVP_sha256(), secret, Int32(secret.count), data, data.count, &out, &length)
        // HMAC only fails on allocation failure or a broken libcrypto; there is no safe fallback.
        guard result != nil, length == 32 else { fatalError("HMAC-SHA256 failed in libcrypto") }
        return Array(out.prefix(Int(length)))
    }

    static func saturating(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b < 0 ? .min : .max) : sum
    }

    private static func checkHeader(_ header: [String: JSON]) throws(TokenError) {
        guard let rawAlg = header["alg"] else {
            throw TokenError(.unsupportedAlgorithm, "token header has no alg (only HS256 is accepted)")
        }
        guard let alg = rawAlg.string else {
            throw TokenError(.unsupportedAlgorithm, "token alg is not a string (only HS256 is accepted)")
        }
        guard alg == "HS256" else {
            throw TokenError(.unsupportedAlgorithm, "token alg \"\(printable(alg))\" refused (only HS256 is accepted)")
        }
        if let typ = header["typ"], typ.string == nil {
            throw TokenError(.malformed, "token typ is not a string")
        }
        // RFC 7515 §4.1.11: a recipient that does not understand `crit` extensions must reject.
        if header["crit"] != nil {
            throw TokenError(.malformed, "token header has crit extensions, none are supported")
        }
    }

    /// The refused alg goes back to the client; keep it short and plain.
    static func printable(_ s: String) -> String {
        let clean = s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }
        let text = String(String.UnicodeScalarView(clean.prefix(16)))
        return clean.count > 16 ? text + "…" : text
    }

    // RideCore's parser, as for every other client input: bounded depth, duplicate members
    // keep the last (which RFC 7519 §4 allows), numbers kept as their text.
    static func jsonObject(_ bytes: [UInt8]) -> [String: JSON]? {
        guard !bytes.isEmpty, let value = try? JSON.parse(bytes) else { return nil }
        return value.object
    }

    static func parseClaims(_ object: [String: JSON]) throws(TokenError) -> TokenClaims {
        guard let sub = object["sub"]?.string, !sub.isEmpty else {
            throw TokenError(.invalidClaims, "token sub must be a non-empty string")
        }
        guard let scopeName = object["scope"]?.string, let scope = Scope(rawValue: scopeName) else {
            throw TokenError(.invalidClaims, "token scope must be \"control\" or \"watch\"")
        }
        var rides: [String]?
        if let raw = object["rides"] {
            guard let list = raw.array else {
                throw TokenError(.invalidClaims, "token rides must be a list of strings")
            }
            var ids = [String]()
            for item in list {
                guard let id = item.string else {
                    throw TokenError(.invalidClaims, "token rides must be a list of strings")
                }
                ids.append(id)
            }
            rides = ids
        }
        var ops = false
        if let raw = object["ops"] {
            guard let flag = raw.bool else {
                throw TokenError(.invalidClaims, "token ops must be true or false")
            }
            ops = flag
        }
        func date(_ name: String) throws(TokenError) -> Int64? {
            guard let raw = object[name] else { return nil }
            // Whole numbers written as such: 1.5, 1e30 or "1" are refused, not rounded.
            guard let value = raw.int else {
                throw TokenError(.invalidClaims, "token \(name) must be whole seconds since the epoch")
            }
            return value
        }
        return TokenClaims(sub: sub, scope: scope, rides: rides, ops: ops,
                           exp: try date("exp"), nbf: try date("nbf"), iat: try date("iat"))
    }

    /// Compact JSON with keys in sorted order, written by hand so the output is byte-for-byte
    /// predictable (tests pin it against a Python-made token) and cannot fail.
    static func claimsJSON(_ c: TokenClaims) -> String {
        var members = [String]()
        if let exp = c.exp { members.append(#""exp":\#(exp)"#) }
        if let iat = c.iat { members.append(#""iat":\#(iat)"#) }
        if let nbf = c.nbf { members.append(#""nbf":\#(nbf)"#) }
        if c.ops { members.append(#""ops":true"#) }
        if let rides = c.rides { members.append(#""rides":["# + rides.map(jsonString).joined(separator: ",") + "]") }
        members.append(#""scope":"# + jsonString(c.scope.rawValue))
        members.append(#""sub":"# + jsonString(c.sub))
        return "{" + members.joined(separator: ",") + "}"
    }

    private static func jsonString(_ s: String) -> String {
        var w = JSONWriter(reserving: s.utf8.count + 8)
        w.string(s)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
