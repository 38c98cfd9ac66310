import Foundation
import Observation
import RidePushClient

@MainActor @Observable
final class RentalModel {
    private(set) var ride: RideSnapshot?          // what the modal shows, ticks folded in
    private(set) var connection: ConnectionState = .idle
    private(set) var warning: Int64?              // seconds left before the time limit
    private(set) var problem: String?
    private let client: RidePushClient
    private var feed: Task<Void, Never>?

    init(server: URL, token: @escaping @Sendable () async throws -> String?) {
        client = RidePushClient(url: server, tokenProvider: token)
        Task { [weak self, client] in for await s in client.connectionStates { self?.connection = s } }
    }

    var state: RideState? { ride?.state }
    var 이용시간: String { ride.map { "\($0.elapsed / 60)분 \($0.elapsed % 60)초" } ?? "0분 0초" }
    var 결제금액: String { ride.map { "\($0.fare.formatted())원" } ?? "" }
    /// Numbers are live only while connected; grey them out otherwise.
    var isLive: Bool { connection == .connected }

    func rent(plan: String? = nil) async {
        await act { try await self.client.start(plan: plan) }
        if let id = ride?.ride { watch(id) }
    }
    func pause() async { if let id = ride?.ride { await act { try await self.client.pause(id) } } }
    func resume() async { if let id = ride?.ride { await act { try await self.client.resume(id) } } }
    func giveBack() async { if let id = ride?.ride { await act { try await self.client.end(id) } } }

    /// Also after a relaunch: the server kept the ride, the first event is its snapshot.
    func watch(_ id: String) {
        feed?.cancel()
        feed = Task {
            let events = client.ride(id)
            do {
                for try await event in events {
                    if case .warning(let left) = event { warning = left }
                    ride = events.latest                  // state, tick or ended (with receipt)
                }
            } catch { problem = "\(error)" }            // ride_not_found, forbidden, unauthorized
        }
    }

    func background() { client.suspend() }
    func foreground() { client.resume() }

    private func act(_ request: @escaping () async throws -> RideSnapshot) async {
        do { ride = try await request(); problem = nil } catch { problem = "\(error)" }
    }
}
