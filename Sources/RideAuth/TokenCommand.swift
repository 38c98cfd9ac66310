import Foundation
import RideOptions

/// `ridepush token`'s options: parsed and printed by `--help` from this one table.
public let tokenOptions = OptionTable(usage: """
    Usage: ridepush token [--watch | --control] [--ride ID]... [--sub RIDER] [--ops]
                          [--ttl DURATION] [--jwt-secret-file FILE | --store PATH]
           ridepush token --verify TOKEN [--jwks-file FILE] [--jwt-public-key FILE]
                          [--jwt-secret-file FILE] [--jwt-issuer ISS --jwt-audience AUD | --jwt-any-issuer]
    """, about: "Prints a signed token (HS256 JWT) for RidePush, or checks one (--verify).", options: [
    .flag("--watch", help: "watch-only token (the default)"),
    .flag("--control", help: "token that may start rides and act on its rider's rides"),
    .string("--ride", placeholder: "ID", repeatable: true, needs: "a ride id", help: "limit a watch token to this ride; a control token may additionally watch the listed rides"),
    .string("--sub", placeholder: "RIDER", needs: "a rider id", help: "rider id (default: share:<ride ids> for a watch token with --ride, \"ops\" with --ops; required otherwise)"),
    .flag("--ops", help: "operator token: may watch, and with --control end, any ride"),
    .string("--ttl", placeholder: "DURATION", default: "2h", needs: "a duration such as 2h", help: "lifetime, e.g. 90s, 30m, 2h, 1d, 1h30m"),
    .string("--jwt-secret-file", placeholder: "FILE", needs: "a path", help: "read the secret from FILE instead of RIDEPUSH_JWT_SECRET"),
    .string("--store", placeholder: "PATH", env: "RIDEPUSH_STORE", default: "./ridepush.db", needs: "a path", help: "without a configured secret: the secret `serve` generated, in ridepush.secret beside this store"),
    .string("--verify", placeholder: "TOKEN", needs: "a token", help: "check TOKEN as the server would: print its claims, or why it is refused"),
    .string("--jwks-file", "--jwks", placeholder: "FILE", needs: "a path", help: "with --verify: the identity provider's keys (JWKS; RS256, ES256, EdDSA by kid)"),
    .string("--jwt-public-key", placeholder: "FILE", needs: "a path", help: "with --verify: one PEM public key, for tokens without kid"),
    .string("--jwt-issuer", placeholder: "ISS", needs: "an issuer", help: "with --verify: the iss identity-provider tokens must carry"),
    .string("--jwt-audience", placeholder: "AUD", needs: "an audience", help: "with --verify: the aud identity-provider tokens must name"),
    .string("--jwt-claim-namespace", placeholder: "PREFIX", needs: "a prefix", help: "with --verify: read scope, rides, ops as PREFIXscope, … from identity-provider tokens"),
    .flag("--jwt-any-issuer", help: "with --verify: accept identity-provider tokens whatever iss or aud they carry where --jwt-issuer or --jwt-audience is not given (as serve does with it)"),
], footer: """
    The secret (at least 32 bytes) comes from --jwt-secret-file or RIDEPUSH_JWT_SECRET and
    must match the server's. A server started without one keeps the secret it made in
    ridepush.secret beside its store; run this in the same folder (or give --store). Example
    share link token:
      ridepush token --watch --ride r-42 --ttl 2h
    """)

public let tokenCommandUsage = tokenOptions.help

/// `ridepush token …`. `arguments` are those after `token`. On status 0 `output` is the token
/// and a newline (for stdout, so `$(ridepush token …)` works); otherwise it is an error message
/// for stderr — status 2 for a usage error, 1 for a secret problem. `now` is injectable for tests.
public func tokenCommand(arguments: [String], environment: [String: String],
                         now: Int64 = Int64(Date().timeIntervalSince1970)) -> (output: String, status: Int32) {
    func usageError(_ message: String) -> (output: String, status: Int32) {
        ("ridepush token: \(message)\nTry 'ridepush token --help'.\n", 2)
    }

    let o: ParsedOptions
    do { o = try tokenOptions.parse(arguments, environment: environment) } catch { return usageError(error.description) }
    if o.help { return (tokenCommandUsage, 0) }
    if let stray = o.positional.first { return usageError(OptionError.unexpectedArgument(stray).description) }
    if let token = o.string("--verify") { return verifyTokenCommand(token, options: o, environment: environment, now: now) }
    for option in ["--jwks-file", "--jwt-public-key", "--jwt-issuer", "--jwt-audience", "--jwt-claim-namespace"] where o.string(option) != nil {
        return usageError("\(option) goes with --verify (a made token is HS256 with the shared secret)")
    }
    if o.flag("--jwt-any-issuer") { return usageError("--jwt-any-issuer goes with --verify (a made token is HS256 with the shared secret)") }
    if o.flag("--watch"), o.flag("--control") { return usageError("--watch and --control exclude each other") }
    let rides = o.strings("--ride")
    let sub = o.string("--sub")
    let ops = o.flag("--ops")
    let secretFile = o.string("--jwt-secret-file")
    let ttlText = o.string("--ttl")!
    guard let ttl = parseDuration(ttlText), ttl > 0 else {
        return usageError("--ttl \(ttlText): expected a positive duration such as 90s, 30m, 2h or 1d")
    }
    let scope: Scope? = o.flag("--control") ? .control : o.flag("--watch") ? .watch : nil

    // Least privilege when unspecified: a watch token.
    let finalScope = scope ?? .watch
    let rider: String
    if let sub {
        rider = sub
    } else if ops {
        rider = "ops"
    } else if finalScope == .watch, !rides.isEmpty {
        rider = "share:" + rides.joined(separator: ",")
    } else if finalScope == .control {
        return usageError("--control needs --sub RIDER (the rider who will own the rides)")
    } else {
        return usageError("a watch token needs --ride ID, --sub RIDER or --ops, or it could watch nothing")
    }

    let secret: [UInt8]
    do {
        let store = o.string("--store")!
        let generated = store == "memory" || store.contains("://") ? nil : SecretFile.path(besideStore: store)
        if let loaded = try loadSecret(file: secretFile, environment: environment) {
            secret = loaded
        } else if let generated, let loaded = try SecretFile.read(generated) {
            secret = loaded
        } else {
            let beside = generated.map { ", or run where the server keeps \($0) (give its --store)" } ?? ""
            return ("ridepush token: no JWT secret: set RIDEPUSH_JWT_SECRET or pass --jwt-secret-file FILE (the server's secret)\(beside)\n", 1)
        }
    } catch {
        return ("ridepush token: \(error.message)\n", 1)
    }

    let (exp, overflow) = now.addingReportingOverflow(Int64(ttl))
    if overflow { return usageError("--ttl is too long") }
    let claims = TokenClaims(sub: rider, scope: finalScope, rides: rides.isEmpty ? nil : rides,
                             ops: ops, exp: exp, iat: now)
    return (TokenSigner(secret: secret).sign(claims) + "\n", 0)
}
