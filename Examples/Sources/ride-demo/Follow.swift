import RidePushClient

/// Follows a ride until it ends: one line per event, and how many ticks came.
func follow(_ feed: RideFeed) async throws -> Int {
    var ticks = 0
    for try await event in feed {
        switch event {
        case .state(let s): print("event state \(s.ride) \(s.state.rawValue) elapsed=\(s.elapsed) fare=\(s.fare)")
        case .tick(let t):
            ticks += 1
            if ticks == 1 { print("event tick \(t.ride) elapsed=\(t.elapsed) fare=\(t.fare)") }
        case .warning(let left): print("event warning \(left)")
        case .zone(let name, _): print("event zone \(name ?? "none")")
        case .ended(let s): print("event ended \(s.ride) \(s.state.rawValue) fare=\(s.fare) \(s.currency)")
        // A later minor version of the SDK may add an event: this app still compiles and runs.
        @unknown default: print("event \(event)")
        }
    }
    return ticks
}
