import RideOptions

/// `ridepush token --verify TOKEN …`: checks a token as the server would with the same key
/// options, so an operator can test an identity provider's token before pointing riders at the
/// server. Status 0 and the verified claims as compact JSON; status 1 and the refusal (its kind
/// and reason) otherwise; status 2 for a usage or key-file problem.
func verifyTokenCommand(_ token: String, options o: ParsedOptions, environment: [String: String],
                        now: Int64) -> (output: String, status: Int32) {
    for flag in ["--watch", "--control", "--ops"] where o.flag(flag) {
        return ("ridepush token: \(flag) makes a token; --verify checks one\nTry 'ridepush token --help'.\n", 2)
    }
    for option in ["--ride", "--sub"] where !o.strings(option).isEmpty {
        return ("ridepush token: \(option) makes a token; --verify checks one\nTry 'ridepush token --help'.\n", 2)
    }
    let secret: [UInt8]?
    do { secret = try loadSecret(file: o.string("--jwt-secret-file"), environment: environment) } catch {
        return ("ridepush token: \(error.message)\n", 2)
    }
    let keys: KeySet
    do { keys = try KeySet.load(jwksFile: o.string("--jwks-file"), publicKeyFile: o.string("--jwt-public-key")) } catch {
        return ("ridepush token: \(error.message)\n", 2)
    }
    if secret == nil, keys.isEmpty {
        return ("ridepush token: nothing to verify with: give --jwks-file, --jwt-public-key, --jwt-secret-file or RIDEPUSH_JWT_SECRET\n", 2)
    }
    let policy = TokenVerifier.Policy(issuer: o.string("--jwt-issuer"), audience: o.string("--jwt-audience"),
                                      claimNamespace: o.string("--jwt-claim-namespace"), anyIssuer: o.flag("--jwt-any-issuer"))
    let verifier = TokenVerifier(secret: secret, keys: keys, policy: policy)
    do {
        let claims = try verifier.verify(token, now: now)
        return (TokenSigner.claimsJSON(claims) + "\n", 0)
    } catch {
        return ("ridepush token: refused (\(error.kind.rawValue)): \(error.message)\n", 1)
    }
}
