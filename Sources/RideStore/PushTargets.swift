import RideCore

/// A device's push target as a store keeps it (issue 38, docs/push.md): a Live Activity or an
/// Android notification of one ride, or a rider's push-to-start token (no ride). Kept as text
/// so the store does not depend on RideProtocol, which checks the values before they get here.
public struct StoredPushTarget: Sendable, Equatable {
    /// "apns" or "fcm".
    public let platform: String
    /// "liveactivity", "notification" or "push_to_start".
    public let kind: String
    /// The ride; nil for a push-to-start token, which is the rider's.
    public let ride: String?
    /// Token `sub` of whoever registered it ("" when auth is off).
    public let rider: String
    public let token: String
    /// When it was registered (Unix ms); registering it again makes it the newest.
    public let at: UnixMillis

    public init(platform: String, kind: String, ride: String?, rider: String, token: String, at: UnixMillis) {
        self.platform = platform
        self.kind = kind
        self.ride = ride
        self.rider = rider
        self.token = token
        self.at = at
    }
}

/// How many targets a store keeps: past these the oldest registration goes, so a rider who
/// reinstalls the app (a new token each time) never fills the store nor fans one push out wide.
public enum PushTargetLimits {
    /// Targets of one ride (its rider's devices, an operator's).
    public static let perRide = 4
    /// Push-to-start tokens of one rider.
    public static let pushToStartPerRider = 4
}

/// The push targets' part of a store (memory, SQLite, PostgreSQL), a protocol of its own so
/// stores that never push (test doubles) need not implement it. Called on the store worker's
/// thread like every `RideStore` call; each call is its own transaction, durable on return.
///
/// A target is named by its ride (or, for push-to-start, its rider) and its token: registering
/// the same one again replaces it (platform and kind included) and makes it the newest.
public protocol PushTargetStore: AnyObject {
    /// Adds or refreshes `target`; then the ride (or the rider's push-to-start set) keeps only
    /// its newest `PushTargetLimits`. Does not check the ride: the caller decided that.
    func registerPush(_ target: StoredPushTarget) throws(StoreError)
    /// Removes the target of `ride` (or of `rider`'s push-to-start tokens when `ride` is nil)
    /// with `token`; false when there was none.
    @discardableResult
    func unregisterPush(ride: String?, rider: String, token: String) throws(StoreError) -> Bool
    /// The ride's targets, oldest first.
    func pushTargets(ride: String) throws(StoreError) -> [StoredPushTarget]
    /// The rider's push-to-start tokens, oldest first.
    func pushToStartTokens(rider: String) throws(StoreError) -> [StoredPushTarget]
}
