import Foundation

public let tokenCommandUsage = """
    Usage: ridepush token [--watch | --control] [--ride ID]... [--sub RIDER] [--ops]
                          [--ttl DURATION] [--jwt-secret-file FILE]

    Prints a signed token (HS256 JWT) for RidePush.

      --watch                 watch-only token (the default)
      --control               token that may start rides and act on its rider's rides
      --ride ID               limit a watch token to this ride (repeatable); a control
                              token may additionally watch the listed rides
      --sub RIDER             rider id (default: share:<ride ids> for a watch token with
                              --ride, "ops" with --ops; required otherwise)
      --ops                   operator token: may watch, and with --control end, any ride
      --ttl DURATION          lifetime, e.g. 90s, 30m, 2h, 1d, 1h30m (default 2h)
      --jwt-secret-file FILE  read the secret from FILE instead of RIDEPUSH_JWT_SECRET
      -h, --help              show this help

    The secret (at least 32 bytes) comes from --jwt-secret-file or RIDEPUSH_JWT_SECRET and
    must match the server's. Example share link token:
      ridepush token --watch --ride r-42 --ttl 2h

    """

/// `ridepush token …`. `arguments` are those after `token`. On status 0 `output` is the token
/// and a newline (for stdout, so `$(ridepush token …)` works); otherwise it is an error message
/// for stderr — status 2 for a usage error, 1 for a secret problem. `now` is injectable for tests.
public func tokenCommand(arguments: [String], environment: [String: String],
                         now: Int64 = Int64(Date().timeIntervalSince1970)) -> (output: String, status: Int32) {
    func usageError(_ message: String) -> (output: String, status: Int32) {
        ("ridepush token: \(message)\nTry 'ridepush token --help'.\n", 2)
    }

    var scope: Scope?
    var rides = [String]()
    var sub: String?
    var ops = false
    var ttl = 2 * 3600
    var secretFile: String?

    var index = 0
    while index < arguments.count {
        var option = arguments[index]
        var inlineValue: String?
        // Accept --opt=value as well as --opt value.
        if option.hasPrefix("--"), let eq = option.firstIndex(of: "=") {
            inlineValue = String(option[option.index(after: eq)...])
            option = String(option[..<eq])
        }
        index += 1
        func value() -> String? {
            if let inlineValue { return inlineValue }
            guard index < arguments.count else { return nil }
            defer { index += 1 }
            return arguments[index]
        }
        switch option {
        case "-h", "--help":
            return (tokenCommandUsage, 0)
        case "--watch", "--control":
            let wanted: Scope = option == "--watch" ? .watch : .control
            if let scope, scope != wanted { return usageError("--watch and --control exclude each other") }
            if inlineValue != nil { return usageError("\(option) takes no value") }
            scope = wanted
        case "--ops":
            if inlineValue != nil { return usageError("--ops takes no value") }
            ops = true
        case "--ride":
            guard let id = value(), !id.isEmpty else { return usageError("--ride needs a ride id") }
            rides.append(id)
        case "--sub":
            guard let rider = value(), !rider.isEmpty else { return usageError("--sub needs a rider id") }
            sub = rider
        case "--ttl":
            guard let text = value() else { return usageError("--ttl needs a duration such as 2h") }
            guard let seconds = parseDuration(text), seconds > 0 else {
                return usageError("--ttl \(text): expected a positive duration such as 90s, 30m, 2h or 1d")
            }
            ttl = seconds
        case "--jwt-secret-file":
            guard let path = value(), !path.isEmpty else { return usageError("--jwt-secret-file needs a path") }
            secretFile = path
        default:
            return usageError("unknown argument \(arguments[index - 1])")
        }
    }

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
        guard let loaded = try loadSecret(file: secretFile, environment: environment) else {
            return ("ridepush token: no JWT secret: set RIDEPUSH_JWT_SECRET or pass --jwt-secret-file FILE (the server's secret)\n", 1)
        }
        secret = loaded
    } catch {
        return ("ridepush token: \(error.message)\n", 1)
    }

    let (exp, overflow) = now.addingReportingOverflow(Int64(ttl))
    if overflow { return usageError("--ttl is too long") }
    let claims = TokenClaims(sub: rider, scope: finalScope, rides: rides.isEmpty ? nil : rides,
                             ops: ops, exp: exp, iat: now)
    return (TokenSigner(secret: secret).sign(claims) + "\n", 0)
}
