/// What a token may be used for. The scope is the ceiling on actions; `ops`, `rides` and
/// `sub` decide which rides those actions reach (see `Access`).
public enum Scope: String, Sendable, Equatable, CaseIterable {
    /// Start rides, pause/resume/end own rides, watch own rides.
    case control
    /// Subscribe only.
    case watch
}

/// The claims RidePush signs and reads. Unknown claims in a verified token are ignored
/// (RFC 7519 §4); the ones below are type-checked strictly.
public struct TokenClaims: Sendable, Equatable {
    /// Rider id; rides started with this token belong to it.
    public var sub: String
    public var scope: Scope
    /// Ride ids the token may watch in addition to the sub's own rides; for a watch token
    /// present it is the *only* set of rides it may watch.
    public var rides: [String]?
    /// Operator: may watch any ride, and with control scope pause/resume/end any ride.
    public var ops: Bool
    /// NumericDate seconds since the epoch.
    public var exp: Int64?
    public var nbf: Int64?
    public var iat: Int64?

    public init(sub: String, scope: Scope, rides: [String]? = nil, ops: Bool = false,
                exp: Int64? = nil, nbf: Int64? = nil, iat: Int64? = nil) {
        self.sub = sub
        self.scope = scope
        self.rides = rides
        self.ops = ops
        self.exp = exp
        self.nbf = nbf
        self.iat = iat
    }

    /// The claims behind a share link: watch-only, limited to one ride, expiring after `ttl`
    /// seconds. The sub `share:<ride>` never owns a ride, so it grants nothing beyond `rides`.
    public static func share(ride: String, now: Int64, ttl: Int64) -> TokenClaims {
        TokenClaims(sub: "share:" + ride, scope: .watch, rides: [ride], exp: now + ttl, iat: now)
    }
}
