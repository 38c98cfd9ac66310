/// What a verified token may do. Scope caps the action (only control tokens start or act on
/// rides); `ops`, ownership and `rides` decide which rides are in reach.
public struct Access: Sendable, Equatable {
    public let claims: TokenClaims

    public init(_ claims: TokenClaims) {
        self.claims = claims
    }

    /// The rider a ride started with this token belongs to.
    public var rider: String { claims.sub }

    /// Start a new ride (owned by `rider`).
    public func mayStart() -> Bool {
        claims.scope == .control
    }

    /// Pause, resume or end a ride. `rideOwner` nil means the owner is unknown (no such ride,
    /// or a ride from before ownership was recorded): then only ops may act on it.
    /// An ops token still needs control scope — ops widens which rides, not which actions.
    public func mayControl(rideOwner: String?) -> Bool {
        guard claims.scope == .control else { return false }
        if claims.ops { return true }
        return rideOwner != nil && rideOwner == claims.sub
    }

    /// Subscribe to a ride's ticks.
    /// - ops: any ride, either scope.
    /// - watch token with `rides`: exactly those rides, nothing else (share links).
    /// - watch token without `rides`: rides owned by its sub.
    /// - control token: rides owned by its sub, plus any listed in `rides`.
    public func mayWatch(rideID: String, rideOwner: String?) -> Bool {
        if claims.ops { return true }
        let listed = claims.rides?.contains(rideID) ?? false
        let owned = rideOwner != nil && rideOwner == claims.sub
        switch claims.scope {
        case .watch:
            return claims.rides != nil ? listed : owned
        case .control:
            return owned || listed
        }
    }
}
