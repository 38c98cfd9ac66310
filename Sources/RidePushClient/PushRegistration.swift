import RideProtocol

extension RidePushClient {
    /// Tells the server where a ride's lock-screen pushes go (docs/push.md): a Live Activity's
    /// push token (`.apns`, `.liveActivity`, the ride), the rider's push-to-start token (`.apns`,
    /// `.pushToStart`, `ride: nil`, iOS 17.2+) or an Android device's FCM token (`.fcm`,
    /// `.notification`, the ride). APNs tokens are hex (`Data` from ActivityKit printed byte by
    /// byte, any case). Returns once the server has stored the target durably.
    ///
    /// Throws `RidePushError.server` with `.badRequest` for a malformed token or field (or a
    /// ride that has ended), `.forbidden` for another rider's ride or a watch-only token,
    /// `.rideNotFound`; waits and retries like every request (same id: registering twice
    /// is harmless, the server keeps one target per token).
    @discardableResult
    public func registerPush(platform: PushPlatform, kind: PushKind, ride: String?, token: String,
                             timeout: Duration? = nil) async throws -> PushAck {
        try await push(.register, PushTarget(platform: platform, kind: kind, ride: ride, token: token), timeout)
    }

    /// Removes a target `registerPush` stored (the same fields). Answered also when the server
    /// had no such target: removing is idempotent.
    @discardableResult
    public func unregisterPush(platform: PushPlatform, kind: PushKind, ride: String?, token: String,
                               timeout: Duration? = nil) async throws -> PushAck {
        try await push(.unregister, PushTarget(platform: platform, kind: kind, ride: ride, token: token), timeout)
    }

    private func push(_ action: PushRequest.Action, _ target: PushTarget, _ timeout: Duration?) async throws -> PushAck {
        let m = try await engine.request(.push(PushRequest(action, target)), timeout: timeout)
        // The acknowledgement of the other action would mean the id was mixed up: not ours.
        guard case .push(let ack, _) = m, ack.action == action else { throw RidePushError.unexpectedReply(m.type) }
        return ack
    }
}
