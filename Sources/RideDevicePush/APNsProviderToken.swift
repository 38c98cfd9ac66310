import RideAuth
import RideCore

/// What signs APNs provider tokens (`--apns-key-file`, `--apns-key-id`, `--apns-team-id`).
public struct APNsCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    public let key: SigningKey

    public init(keyID: String, teamID: String, key: SigningKey) throws(KeyError) {
        guard key.algorithm == .es256 else { throw KeyError("the APNs key must be an EC P-256 key (ES256), the .p8 file Apple gives") }
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
    }

    /// The provider token issued at `issuedAt` (Unix seconds): ES256, header `kid`, claims
    /// `iss` (the team) and `iat`. Nil only when libcrypto fails to sign.
    public func token(issuedAt: Int64) -> String? {
        var h = JSONWriter(reserving: 48)
        h.beginObject()
        h.field("alg", "ES256")
        h.field("kid", keyID)
        h.endObject()
        var c = JSONWriter(reserving: 48)
        c.beginObject()
        c.field("iss", teamID)
        c.field("iat", issuedAt)
        c.endObject()
        return CompactJWT.sign(header: h.bytes, claims: c.bytes, with: key)
    }
}

/// The provider token every request carries, signed again only when needed: Apple refuses a
/// token older than an hour (ExpiredProviderToken) and one renewed more often than every
/// 20 minutes (TooManyProviderTokenUpdates). Shared by the sender's transfers.
public final class ProviderTokenCache: Sendable {
    /// Replaced once this old: past Apple's 20-minute minimum, well before its hour.
    public static let renewAge: Int64 = 50 * 60_000

    private let credentials: APNsCredentials
    private let clock: any RideClock
    private let current = Locked<(token: String, issuedAt: UnixMillis)?>(nil)

    public init(_ credentials: APNsCredentials, clock: any RideClock) {
        self.credentials = credentials
        self.clock = clock
    }

    /// The token to send now: the current one, or a new one once it is `renewAge` old.
    public func token() -> String? {
        let now = clock.now()
        return current.withLock { c in
            if let c, now - c.issuedAt < Self.renewAge, now >= c.issuedAt { return c.token }
            return issue(&c, now)
        }
    }

    /// Apple answered `403 ExpiredProviderToken` to `rejected`: a new token, unless another
    /// transfer's answer already replaced it (every request in flight gets the same 403).
    public func renew(replacing rejected: String) -> String? {
        let now = clock.now()
        return current.withLock { c in
            if let c, c.token != rejected { return c.token }
            return issue(&c, now)
        }
    }

    private func issue(_ c: inout (token: String, issuedAt: UnixMillis)?, _ now: UnixMillis) -> String? {
        // `iat` in whole seconds, as JWT has it; the age is measured from the same second.
        let seconds = now >= 0 ? now / 1000 : (now - 999) / 1000
        guard let t = credentials.token(issuedAt: seconds) else { return nil }
        c = (t, seconds * 1000)
        return t
    }
}
