import Foundation
import Testing
@testable import RideCore

// Distances and the trace filter. Reference distances come from a different method than the
// code under test: Vincenty's inverse formula on the WGS 84 ellipsoid, written out below and
// itself pinned to a value computed separately in Python (the same formula, double precision).

/// Vincenty (1975) inverse on WGS 84, metres. Independent of `Geo` on purpose: ellipsoid, not
/// sphere; iterative, not closed-form.
fileprivate func vincenty(_ p: GeoPoint, _ q: GeoPoint) -> Double {
    let a = 6_378_137.0, f = 1 / 298.257223563, b = (1 - f) * a
    let rad = Double.pi / 180
    let L = (q.lon - p.lon) * rad
    let u1 = atan((1 - f) * tan(p.lat * rad)), u2 = atan((1 - f) * tan(q.lat * rad))
    let (sU1, cU1, sU2, cU2) = (sin(u1), cos(u1), sin(u2), cos(u2))
    var lambda = L
    var (sinSigma, cosSigma, sigma, cos2Alpha, cos2SigmaM) = (0.0, 0.0, 0.0, 0.0, 0.0)
    for _ in 0..<200 {
        let (sl, cl) = (sin(lambda), cos(lambda))
        sinSigma = ((cU2 * sl) * (cU2 * sl) + (cU1 * sU2 - sU1 * cU2 * cl) * (cU1 * sU2 - sU1 * cU2 * cl)).squareRoot()
        if sinSigma == 0 { return 0 }
        cosSigma = sU1 * sU2 + cU1 * cU2 * cl
        sigma = atan2(sinSigma, cosSigma)
        let sinAlpha = cU1 * cU2 * sl / sinSigma
        cos2Alpha = 1 - sinAlpha * sinAlpha
        cos2SigmaM = cos2Alpha != 0 ? cosSigma - 2 * sU1 * sU2 / cos2Alpha : 0
        let C = f / 16 * cos2Alpha * (4 + f * (4 - 3 * cos2Alpha))
        let previous = lambda
        lambda = L + (1 - C) * f * sinAlpha * (sigma + C * sinSigma * (cos2SigmaM + C * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
        if abs(lambda - previous) < 1e-12 { break }
    }
    let uSq = cos2Alpha * (a * a - b * b) / (b * b)
    let A = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
    let B = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
    let dSigma = B * sinSigma * (cos2SigmaM + B / 4 * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)
        - B / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
    return b * A * (sigma - dSigma)
}

fileprivate let cityHall = GeoPoint(lat: 37.566535, lon: 126.9779692)     // 서울특별시청
fileprivate let gwanghwamun = GeoPoint(lat: 37.575929, lon: 126.976849)   // 광화문
fileprivate let busan = GeoPoint(lat: 35.1796, lon: 129.0756)             // 부산광역시청 area

@Suite struct GeoDistanceTests {
    @Test func theReferenceFormulaMatchesTheValuesComputedInPython() {
        // Python, the same Vincenty formula: 1047.3106617580459 and 324920.03952472867.
        #expect(abs(vincenty(cityHall, gwanghwamun) - 1047.3106617580459) < 0.001)
        #expect(abs(vincenty(cityHall, busan) - 324_920.03952472867) < 0.01)
    }

    @Test func seoulCityHallToGwanghwamunIsAboutOneKilometre() {
        let h = Geo.haversineMetres(cityHall, gwanghwamun)
        let v = vincenty(cityHall, gwanghwamun)
        // A sphere is within 0.5 % of the ellipsoid; here 0.18 %.
        #expect(abs(h - v) / v < 0.005)
        #expect(Geo.distanceMetres(cityHall, gwanghwamun) == 1049)
        #expect(Geo.distanceMetres(gwanghwamun, cityHall) == 1049)
    }

    @Test func seoulToBusanAgreesWithTheEllipsoidWithinHalfAPercent() {
        let h = Geo.haversineMetres(cityHall, busan), v = vincenty(cityHall, busan)
        #expect(abs(h - v) / v < 0.005)
    }

    @Test func oneDegreeOfLatitudeIsTheArcOfTheMeanRadius() {
        let d = Geo.haversineMetres(GeoPoint(lat: 0, lon: 0), GeoPoint(lat: 1, lon: 0))
        #expect(abs(d - Geo.earthRadiusMetres * Double.pi / 180) < 1e-6)
        #expect(Geo.haversineMetres(cityHall, cityHall) == 0)
        // Antipodes: half the circumference, no NaN from rounding. (Haversine is ill-conditioned
        // there, a rounding of 1e-16 in h becomes ~0.2 m; steps of a trace are nowhere near.)
        let half = Geo.haversineMetres(GeoPoint(lat: 10, lon: 20), GeoPoint(lat: -10, lon: -160))
        #expect(abs(half - Geo.earthRadiusMetres * Double.pi) < 1)
    }

    @Test func validityOfPoints() {
        #expect(GeoPoint(lat: 37.5, lon: 127).isValid)
        #expect(!GeoPoint(lat: 91, lon: 0).isValid)
        #expect(!GeoPoint(lat: 0, lon: -180.5).isValid)
        #expect(!GeoPoint(lat: .nan, lon: 0).isValid)
    }
}

/// `metres` north of `p` (on the sphere), for building tracks.
fileprivate func north(_ p: GeoPoint, _ metres: Double) -> GeoPoint {
    GeoPoint(lat: p.lat + metres / Geo.earthRadiusMetres * 180 / Double.pi, lon: p.lon)
}

fileprivate func east(_ p: GeoPoint, _ metres: Double) -> GeoPoint {
    GeoPoint(lat: p.lat, lon: p.lon + metres / (Geo.earthRadiusMetres * cos(p.lat * Double.pi / 180)) * 180 / Double.pi)
}

fileprivate func point(_ g: GeoPoint, _ at: UnixMillis, accuracy: Double = 5) -> TracePoint {
    TracePoint(lat: g.lat, lon: g.lon, at: at, accuracy: accuracy)
}

extension TraceFilter {
    /// A fix received the instant it was made (device and server clocks agree): the filter's
    /// own rules, with the server's clock out of the way.
    @discardableResult
    fileprivate mutating func offer(_ p: TracePoint) -> Verdict { offer(p, receivedAt: p.at) }
    fileprivate func judge(_ p: TracePoint) -> Verdict { judge(p, receivedAt: p.at) }
}

@Suite struct TraceFilterTests {
    let t0: UnixMillis = 1_764_430_000_000

    /// The server's clock bounds the device's: a fix more than 5 s ahead of its receipt is from
    /// the future, and fixes that arrive faster than real time are too fast however their
    /// stamps are spaced, whether stamped ahead or back-dated and sent in a burst.
    @Test func fixesCannotArriveFasterThanRealTime() {
        var ahead = TraceFilter()
        ahead.offer(point(cityHall, t0), receivedAt: t0)
        var aheadVerdicts: [TraceFilter.Verdict] = []
        for i in Int64(1)...19 {  // 15 m and 1 s of device time apart, 50 ms of server time apart
            aheadVerdicts.append(ahead.offer(point(north(cityHall, 15 * Double(i)), t0 + i * 1000), receivedAt: t0 + i * 50))
        }
        // Five seconds of grace (a fast phone clock), then nothing: 75 m, not 285.
        #expect(aheadVerdicts.prefix(5).allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(aheadVerdicts.dropFirst(5).allSatisfy { $0 == .dropped(.future) })
        #expect(ahead.metres == 75)

        var backdated = TraceFilter()
        let now = t0 + 100_000
        backdated.offer(point(cityHall, t0), receivedAt: now)
        for i in Int64(1)...19 {
            #expect(backdated.offer(point(north(cityHall, 15 * Double(i)), t0 + i * 1000), receivedAt: now + i * 50) == .dropped(.tooFast))
        }
        #expect(backdated.metres == 0)
        // Real time passing is what lets the ride move: 285 m after 19 more seconds is 54 km/h.
        #expect(backdated.offer(point(north(cityHall, 285), t0 + 20_000), receivedAt: now + 19_000) == .accepted(metres: Geo.haversineMetres(cityHall, north(cityHall, 285))))
        #expect(backdated.drops[.tooFast] == 19)
    }

    @Test func aResumedFilterForgetsAFutureItAcceptedBefore() {
        // A checkpoint from before the future was checked: its fix is dated 2100, received at t0.
        var f = TraceFilter(metres: 40, last: point(cityHall, 4_102_444_800_000), receivedAt: t0)
        #expect(f.last?.at == t0)
        #expect(f.offer(point(north(cityHall, 10), t0 + 2000), receivedAt: t0 + 2000) == .accepted(metres: Geo.haversineMetres(cityHall, north(cityHall, 10))))
        #expect(f.metres == 50)
    }

    @Test func theFirstPointCountsAndAddsNothing() {
        var f = TraceFilter()
        #expect(f.offer(point(cityHall, t0)) == .accepted(metres: 0))
        #expect(f.metres == 0)
        #expect(f.last == point(cityHall, t0))
        #expect(f.accepted == 1)
    }

    @Test func aFiveKilometreJumpIsDroppedAndTheNextGoodPointIsMeasuredFromBeforeIt() {
        var f = TraceFilter()
        f.offer(point(cityHall, t0))
        let a = north(cityHall, 5)
        #expect(f.offer(point(a, t0 + 1000)) != .dropped(.tooFast))
        // 5 km in one second: 18,000 km/h.
        #expect(f.offer(point(north(a, 5000), t0 + 2000)) == .dropped(.tooFast))
        #expect(f.drops[.tooFast] == 1)
        #expect(f.last?.point == a)
        let b = north(a, 5)
        f.offer(point(b, t0 + 3000))
        // 10 m in all, not 10 km: the jump left no trace.
        #expect(f.metres == 10)
        #expect(f.accepted == 3)
    }

    @Test func speedIsJudgedAgainstTheTimeSinceTheLastAcceptedPoint() {
        var f = TraceFilter(limits: .init(maxSpeedKph: 60))
        f.offer(point(cityHall, t0))
        // 60 km/h = 16.67 m/s: 16 m in 1 s passes, 17 m does not; 33 m in 2 s passes.
        #expect(f.judge(point(north(cityHall, 16), t0 + 1000)) == .accepted(metres: Geo.haversineMetres(cityHall, north(cityHall, 16))))
        #expect(f.judge(point(north(cityHall, 17), t0 + 1000)) == .dropped(.tooFast))
        #expect(f.judge(point(north(cityHall, 33), t0 + 2000)) != .dropped(.tooFast))
        var slow = TraceFilter(limits: .init(maxSpeedKph: 25))
        slow.offer(point(cityHall, t0))
        #expect(slow.judge(point(north(cityHall, 8), t0 + 1000)) == .dropped(.tooFast))  // 28.8 km/h
        #expect(slow.judge(point(north(cityHall, 6), t0 + 1000)) != .dropped(.tooFast))  // 21.6 km/h
    }

    @Test func oldAndReplayedPointsAreStaleAndCountNothing() {
        var f = TraceFilter()
        f.offer(point(cityHall, t0 + 5000))
        #expect(f.offer(point(north(cityHall, 3), t0 + 4000)) == .dropped(.stale))
        #expect(f.offer(point(cityHall, t0 + 5000)) == .dropped(.stale))
        #expect(f.drops[.stale] == 2)
        #expect(f.metres == 0)
        #expect(f.last?.at == t0 + 5000)
    }

    @Test func atMostOnePointASecondCounts() {
        var f = TraceFilter()
        var p = cityHall
        // 4 Hz for 10 s, 1 m per report: only one report a second counts, each 4 m on.
        var verdicts: [TraceFilter.Verdict] = []
        for i in 0..<40 {
            p = north(p, 1)
            verdicts.append(f.offer(point(p, t0 + Int64(i) * 250)))
        }
        #expect(f.accepted == 10)
        #expect(f.drops[.tooSoon] == 30)
        #expect(verdicts.enumerated().allSatisfy { i, v in (i % 4 == 0) == (v != .dropped(.tooSoon)) })
        #expect(f.metres == 36)
    }

    @Test func inaccuratePointsAreDroppedEvenFirst() {
        var f = TraceFilter()
        #expect(f.offer(point(cityHall, t0, accuracy: 51)) == .dropped(.inaccurate))
        #expect(f.offer(point(cityHall, t0 + 1000, accuracy: .nan)) == .dropped(.inaccurate))
        #expect(f.last == nil)
        #expect(f.offer(point(cityHall, t0 + 2000, accuracy: 50)) == .accepted(metres: 0))
        #expect(f.drops[.inaccurate] == 2)
        #expect(f.drops[.tooFast] == 0 && f.drops[.stale] == 0 && f.drops[.tooSoon] == 0)
    }

    /// A 10-minute scooter ride at about 4.5 m/s, reported at 2 Hz, turning every 30 s, with
    /// some bad fixes and a 5 km jump mixed in: the distance is the sum over the accepted
    /// points, checked against the ellipsoid within 1 %.
    @Test func distanceIsTheSumOverAcceptedPointsWithinOnePercentOfTheEllipsoid() {
        var f = TraceFilter()
        var p = cityHall
        var accepted: [GeoPoint] = []
        var rng = SplitMix(seed: 42)
        var jumped = false
        for i in 0..<1200 {
            let step = 2.0 + Double(rng.next() % 50) / 100  // 2.0-2.49 m per half second
            p = (i / 60) % 2 == 0 ? north(p, step) : east(p, step)
            var report = point(p, t0 + Int64(i) * 500, accuracy: Double(rng.next() % 30))
            if i % 97 == 0 { report.accuracy = 80 }
            // One wild fix, on a report that would otherwise count (not one dropped as too soon).
            if !jumped, i >= 600, f.judge(report) != .dropped(.tooSoon) {
                report.point = north(p, 5000)
                jumped = true
            }
            if case .accepted = f.offer(report) { accepted.append(report.point) }
        }
        #expect(f.drops[.tooFast] == 1)
        #expect(f.drops[.inaccurate]! > 0)
        let haversineSum = zip(accepted, accepted.dropFirst()).reduce(0.0) { $0 + Geo.haversineMetres($1.0, $1.1) }
        let ellipsoidSum = zip(accepted, accepted.dropFirst()).reduce(0.0) { $0 + vincenty($1.0, $1.1) }
        #expect(abs(Double(f.metres) - haversineSum) <= 1)
        #expect(abs(Double(f.metres) - ellipsoidSum) / ellipsoidSum < 0.01)
        // About 600 s × 4.5 m/s, a little less where dropped points cut corners.
        #expect((2500...2800).contains(f.metres))
    }

    @Test func aResumedFilterGoesOnFromTheCheckpoint() {
        var f = TraceFilter()
        f.offer(point(cityHall, t0))
        f.offer(point(north(cityHall, 10), t0 + 1000))
        var resumed = TraceFilter(metres: f.metres, last: f.last)
        #expect(resumed.offer(point(north(cityHall, 5), t0 + 500)) == .dropped(.stale))
        #expect(resumed.offer(point(north(cityHall, 5000), t0 + 2000)) == .dropped(.tooFast))
        resumed.offer(point(north(cityHall, 20), t0 + 2000))
        #expect(resumed.metres == 20)
    }
}

/// A small deterministic generator, so the test track is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
