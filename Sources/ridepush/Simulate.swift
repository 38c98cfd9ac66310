import Foundation
import RideCore
import RideProtocol
import RidePushClient
import Synchronization

/// A GPX track read and paced for `ridepush ride simulate`, before anything connects.
struct Track: Sendable {
    let path: String
    let points: [GPXPoint]
    /// Milliseconds after the first point at which each point is reported.
    let offsets: [Int64]

    static let maxSpeed = 1000.0

    static func load(path: String?, speed speedText: String?) -> Result<Track, TrackError> {
        guard let path else { return .failure(TrackError("give the track with --gpx PATH (a GPX file with <trkpt lat lon><time>)")) }
        var speed = 1.0
        if let speedText {
            guard let x = Double(speedText), x.isFinite, x >= 0.01, x <= maxSpeed else {
                return .failure(TrackError("--speed \(speedText): expected a number from 0.01 to \(Int(maxSpeed)) (10 plays the track 10 times faster)"))
            }
            speed = x
        }
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(TrackError("--gpx \(path): cannot read the file")) }
        do {
            let points = try GPX.trackPoints(Array(data))
            guard !points.isEmpty else { return .failure(TrackError("\(path): no <trkpt> in the file (simulate rides a track, not waypoints or a route)")) }
            return .success(Track(path: path, points: points, offsets: try GPX.schedule(points, speed: speed)))
        } catch {
            return .failure(TrackError("\(path): \(error)"))
        }
    }
}

struct TrackError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// The position refusals seen, written by the printer task and read once all tasks are done.
final class Refusals: Sendable {
    let list = Mutex<[ProtocolError]>([])
}

/// The errors after which reporting more positions is pointless: the server does not take
/// positions at all, or not for this ride or token.
let fatalPositionErrors: Set<ErrorCode> = [.unknownType, .rideNotFound, .forbidden, .unauthorized]

/// Reports the track's points as the ride's positions at their pace (each stamped with the
/// time it is sent: the server keeps only positions newer than the last), printing what
/// `watch` prints meanwhile. Ends after the last point once the server has read them all (a
/// `get` answered after them on the same connection), when the ride ends, or at the first
/// refusal that means no position will be taken.
func simulate(_ client: RidePushClient, _ ride: String, _ track: Track, _ words: Words, _ outcome: Outcome,
              wait: Duration) async throws {
    let refused = Refusals()
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await watch(client.ride(ride), words)
            return true  // the ride ended
        }
        group.addTask {
            for await e in client.unansweredErrors {
                printErr(words.positionRefused(e, ride: ride))
                refused.list.withLock { $0.append(e) }
                if fatalPositionErrors.contains(e.code) { return true }
            }
            return false
        }
        group.addTask {
            // The pace starts once connected: a point due while still connecting would wait,
            // and only the newest waiting point per ride is kept.
            for await s in client.connectionStates {
                if case .connected = s { break }
            }
            let clock = ContinuousClock()
            let start = clock.now
            for (p, offset) in zip(track.points, track.offsets) {
                try await clock.sleep(until: start + .milliseconds(offset))
                let fix = Position(lat: p.lat, lon: p.lon, at: Int64((Date().timeIntervalSince1970 * 1000).rounded()), accuracy: 5)
                try client.report(position: fix, ride: ride)
            }
            // Answered after every position before it: any refusal of them has arrived too.
            _ = try await client.get(ride, timeout: wait)
            try await Task.sleep(for: .milliseconds(100))  // let the refusal printer catch up
            printErr(words.trackDone(track.points.count, track.path, Double(track.offsets.last ?? 0) / 1000))
            return true
        }
        // Whichever finishes first decides; the others stop.
        _ = try await group.next()
        group.cancelAll()
    }
    if !refused.list.withLock({ $0.isEmpty }) { outcome.status.withLock { $0 = 1 } }
}

extension Words {
    /// `1.24 km` / `850 m`.
    func metres(_ m: Int64) -> String {
        m >= 1000 ? String(format: "%.2f km", Double(m) / 1000) : "\(m) m"
    }

    /// `r-42 zone "Trocadéro + Jardins": no ending here · no riding through · max 2 km/h`
    func zone(_ ride: String, _ name: String?, _ r: ZoneRules) -> String {
        var rules: [String] = []
        if !r.rideStartAllowed { rules.append(korean ? "대여 시작 불가" : "no starting here") }
        if !r.rideEndAllowed { rules.append(korean ? "반납 불가" : "no ending here") }
        if !r.rideThroughAllowed { rules.append(korean ? "통행 금지" : "no riding through") }
        if let k = r.maximumSpeedKph { rules.append(korean ? "최고 \(k) km/h" : "max \(k) km/h") }
        if rules.isEmpty { rules.append(korean ? "제한 없음" : "no restrictions") }
        let place = name.map { korean ? "구역 \"\($0)\"" : "zone \"\($0)\"" } ?? (korean ? "구역 밖" : "outside the zones")
        return "\(ride) \(place): " + rules.joined(separator: " · ")
    }

    func positionRefused(_ e: ProtocolError, ride: String) -> String {
        if e.code == .unknownType {
            return korean
                ? "이 서버는 위치를 받지 않습니다 (\(e.code.rawValue): \(e.message))"
                : "the server does not take positions: \(e.code.rawValue): \(e.message)"
        }
        return korean ? "위치를 받지 않았습니다: " + error(e, ride: ride) : "position refused: \(e.code.rawValue): \(e.message)"
    }

    func trackDone(_ n: Int, _ path: String, _ seconds: Double) -> String {
        let secs = String(format: "%.1f", seconds)
        return korean ? "\(path) 의 위치 \(n)개를 \(secs)초 동안 보냈습니다" : "sent \(n) positions from \(path) over \(secs) s"
    }
}
