import RideCore

/// Reads `exp` from a JWT's payload, unverified: only to know when to ask for a new token
/// (the server verifies; a client never trusts what it reads here for anything else).
enum TokenExpiry {
    static func exp(_ token: String) -> Int64? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]), let json = try? JSON.parse(payload) else { return nil }
        return json["exp"]?.int
    }
}
