#if canImport(ActivityKit)
import ActivityKit
import Foundation
import RidePushClient

/// The app's side of a ride's Live Activity: starts it with `pushType: .token`, and hands every
/// push token ActivityKit gives to the server with `registerPush`, so the server's pushes keep
/// the lock screen right while the app and its WebSocket are suspended (docs/sdk.md,
/// "Live Activities"). Built only where ActivityKit exists; the shared types it uses
/// (RideAttributes, the content-state) are built and run everywhere.
@MainActor
public final class RideActivityController {
    private let client: RidePushClient
    private var watching: Set<String> = []
    private var tasks: [Task<Void, Never>] = []

    public init(client: RidePushClient) {
        self.client = client
    }

    /// At launch. The rider's push-to-start token lets the server start the activity itself for
    /// a ride begun elsewhere (by the backend, `POST /v1/rides`): iOS 17.2+, so every iOS
    /// this SDK runs on (18+). Activities alive after a relaunch, or started by such a push,
    /// arrive on `activityUpdates` and have their tokens registered like the app's own.
    public func launch() {
        tasks.append(Task { [client] in
            for await token in Activity<RideAttributes>.pushToStartTokenUpdates {
                // The server keeps four per rider; a token registered again replaces itself.
                _ = try? await client.registerPush(platform: .apns, kind: .pushToStart, ride: nil, token: APNsToken.hex(token))
            }
        })
        tasks.append(Task { [weak self] in
            for await activity in Activity<RideAttributes>.activityUpdates { self?.follow(activity) }
        })
        for activity in Activity<RideAttributes>.activities { follow(activity) }
    }

    /// After `client.start(…)`: the ride on the lock screen. The server's first push arrives
    /// once the token is registered.
    public func start(_ ride: RideSnapshot) throws {
        let activity = try Activity.request(attributes: RideAttributes(ride: ride.ride, plan: ride.plan.name),
                                            content: ActivityContent(state: RideActivityContent(ride), staleDate: nil),
                                            pushType: .token)
        follow(activity)
    }

    /// The app saw the ride end (its feed's `.ended`): show the receipt's total now. The
    /// server's `end` push does the same when the app is not running, and sets when it leaves.
    public func end(_ ride: RideSnapshot) async {
        for activity in Activity<RideAttributes>.activities where activity.attributes.ride == ride.ride {
            await activity.end(ActivityContent(state: RideActivityContent(ride), staleDate: nil), dismissalPolicy: .default)
        }
    }

    /// Every token the activity is given (iOS may rotate it) goes to the server for its ride.
    private func follow(_ activity: Activity<RideAttributes>) {
        guard watching.insert(activity.id).inserted else { return }
        let ride = activity.attributes.ride
        tasks.append(Task { [client] in
            for await token in activity.pushTokenUpdates {
                do {
                    try await client.registerPush(platform: .apns, kind: .liveActivity, ride: ride, token: APNsToken.hex(token))
                } catch RidePushError.server(let e) where e.code == .badRequest {
                    // The ride has ended (or the token is malformed): this activity gets no pushes.
                    return
                } catch {
                    // Timed out or closed: the next token update, or the next launch, registers again.
                }
            }
        })
    }
}
#endif
