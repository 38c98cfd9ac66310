import RideAuth
import RideCore

/// A Google service account's JSON key (`--fcm-service-account`): who RidePush is to Google,
/// which Firebase project it sends for, and where it trades an assertion for an access token.
public struct FCMServiceAccount: Sendable {
    public let clientEmail: String
    public let projectID: String
    public let tokenURI: String
    /// Sent as the assertion's `kid` when the file has one, so Google finds the key at once.
    public let privateKeyID: String?
    public let key: SigningKey

    /// The file's bytes; `name` says which file in errors.
    public init(json: [UInt8], name: String) throws(KeyError) {
        let parsed: JSON
        do { parsed = try JSON.parse(json) } catch {
            throw KeyError("\(name): not JSON (\(error.reason) at byte \(error.offset))")
        }
        guard let o = parsed.object else { throw KeyError("\(name): not a JSON object") }
        func field(_ k: String) throws(KeyError) -> String {
            guard let s = o[k]?.string, !s.isEmpty else { throw KeyError("\(name): missing \"\(k)\" (a Google service account key has it)") }
            return s
        }
        if let type = o["type"]?.string, type != "service_account" {
            throw KeyError("\(name): \"type\" is \"\(type.prefix(40))\", not \"service_account\"")
        }
        clientEmail = try field("client_email")
        projectID = try field("project_id")
        tokenURI = try field("token_uri")
        privateKeyID = o["private_key_id"]?.string
        key = try SigningKey.pem(Array(try field("private_key").utf8), name: "\(name) private_key")
        guard key.algorithm == .rs256 else { throw KeyError("\(name): private_key is not an RSA key (RS256)") }
    }

    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Google accepts an assertion valid for at most an hour.
    public static let assertionLifetime: Int64 = 3600

    /// The JWT-bearer assertion (RFC 7523) issued at `issuedAt` (Unix seconds): RS256, `iss`
    /// the account, `scope` FCM, `aud` the token endpoint, expiring an hour later.
    public func assertion(issuedAt: Int64) -> String? {
        var h = JSONWriter(reserving: 96)
        h.beginObject()
        h.field("alg", "RS256")
        h.field("typ", "JWT")
        if let kid = privateKeyID { h.field("kid", kid) }
        h.endObject()
        var c = JSONWriter(reserving: 256)
        c.beginObject()
        c.field("iss", clientEmail)
        c.field("scope", Self.scope)
        c.field("aud", tokenURI)
        c.field("iat", issuedAt)
        c.field("exp", issuedAt + Self.assertionLifetime)
        c.endObject()
        return CompactJWT.sign(header: h.bytes, claims: c.bytes, with: key)
    }

    /// The form body POSTed to `tokenURI` (application/x-www-form-urlencoded). The assertion is
    /// base64url and dots, which need no escaping.
    public static func tokenRequestBody(assertion: String) -> [UInt8] {
        Array(("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion).utf8)
    }
}

/// The OAuth2 access token FCM requests carry, kept until shortly before it expires.
public final class FCMAccessTokenCache: Sendable {
    /// Renewed this long before Google's expiry, so no request leaves with a token that
    /// expires on the way.
    public static let margin: Int64 = 60_000

    private let clock: any RideClock
    private let current = Locked<(token: String, expires: UnixMillis)?>(nil)

    public init(clock: any RideClock) { self.clock = clock }

    /// The token to send now, or nil: then fetch one (`FCMServiceAccount.assertion`) and `store` it.
    public func token() -> String? {
        let now = clock.now()
        return current.withLock { c in
            guard let c, now < c.expires - Self.margin else { return nil }
            return c.token
        }
    }

    public enum ResponseError: Error, Equatable {
        case notATokenResponse(String)
    }

    /// Keeps the token endpoint's answer (`access_token`, `expires_in` seconds), counted from
    /// when it was received. Returns the token.
    @discardableResult
    public func store(response body: [UInt8]) throws(ResponseError) -> String {
        guard let o = (try? JSON.parse(body))?.object, let token = o["access_token"]?.string, !token.isEmpty,
              let expiresIn = o["expires_in"]?.int, expiresIn > 0 else {
            throw .notATokenResponse("the token endpoint's answer has no access_token and expires_in")
        }
        let now = clock.now()
        current.withLock { $0 = (token, now + min(expiresIn, 86_400) * 1000) }
        return token
    }

    /// FCM answered 401 to `rejected`: forget it (unless already replaced), so the next
    /// `token()` is nil and a new one is fetched.
    public func invalidate(_ rejected: String) {
        current.withLock { c in
            if c?.token == rejected { c = nil }
        }
    }
}
