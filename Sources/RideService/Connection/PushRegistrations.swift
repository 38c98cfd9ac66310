import RideAuth
import RideCore
import RideProtocol
import RideStore

/// `register_push` / `unregister_push` (issue 38, item 1; docs/push.md). RideProtocol has
/// checked the fields (platform, kind, token, `ride` present unless push-to-start); what is
/// left is who may, decided in two places: the token's scope on the service thread, the ride's
/// owner on the store worker, which reads the ride from the store (a ride not in this node's
/// memory, another node's, an ended one) and writes the target in the same turn.
enum PushRegistrations {
    /// What the token alone refuses. Auth off: nothing. A watch-only token (a share link, a
    /// `watch` scope) registers nothing: it must not steer pushes to a ride it only watches.
    static func refusal(_ r: PushRequest, access: Access?, id: String?) -> ProtocolError? {
        guard let a = access, !a.mayStart() else { return nil }
        return ProtocolError(.forbidden, "this token may only watch rides; push targets need a rider's or an operator's token", id: id)
    }

    /// The store worker's part: the ride's owner, then the write, answered with the
    /// acknowledgement (or the error) of request `id`.
    static func work(_ r: PushRequest, access: Access?, id: String?, pre: Int) -> @Sendable (RideStore, RideRegistry) -> OpsAnswer {
        { store, registry in
            func refuse(_ code: ErrorCode, _ message: String) -> OpsAnswer {
                OpsAnswer(status: 200, body: ServerMessages.error(ProtocolError(code, message, id: id), prefix: pre))
            }
            guard let targets = store as? PushTargetStore else {
                return refuse(.unavailable, "this server's store keeps no push targets")
            }
            let t = r.target
            let rider = access?.rider ?? ""
            var current: Ride?
            do throws(StoreError) {
                if let ride = t.ride {
                    registry.metrics.add(registry.metrics.storeRideReads)
                    if let stored = try store.ride(ride) {
                        current = stored.ride
                        if let a = access, !a.mayControl(rideOwner: stored.owner) {
                            return refuse(.forbidden, "only the ride's rider (or an operator) may register pushes for ride \"\(ride)\"")
                        }
                        // An ended ride's activity has nothing more to show; removing is still fine.
                        if r.action == .register, stored.ride.state == .ended {
                            return refuse(.badRequest, "ride \"\(ride)\" has ended")
                        }
                    } else if r.action == .register {
                        return refuse(.rideNotFound, "no ride \"\(ride)\"")
                    }
                }
                switch r.action {
                case .register:
                    let now = registry.clock.now()
                    try targets.registerPush(StoredPushTarget(platform: t.platform.rawValue, kind: t.kind.rawValue, ride: t.ride,
                                                              rider: rider, token: t.token, at: now))
                    // The ride as it is now, to the new target at once (stored: durable before the push).
                    if let push = registry.devicePush, let ride = current, let plan = registry.plan(ride.planID) {
                        push.registered(t, RideActivityContent(ride, plan, at: now))
                    }
                case .unregister:
                    // Idempotent: removing a target that is not there is acknowledged too.
                    try targets.unregisterPush(ride: t.ride, rider: rider, token: t.token)
                }
            } catch {
                // Nothing acknowledged. A failed log sync (`.commitFailed`) is not this job's to
                // act on: the SQLite store keeps failing every later sync, so the worker's next
                // group stops the process as any failed sync does (SQLiteLogSync).
                return refuse(.unavailable, "push targets cannot be stored now: \(error.message)")
            }
            return OpsAnswer(status: 200, body: ServerMessages.pushAck(PushAck(r), id: id, prefix: pre))
        }
    }
}
