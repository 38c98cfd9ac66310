import RideAuth
import RideCore
import RideProtocol
import RideWebhooks

/// The fuzzed parsers, one function per target. Each checks properties that hold for any
/// input (a crash, a trap or a broken property is a bug; so is a slow input, which
/// libFuzzer's -timeout reports).
enum FuzzTarget: String, CaseIterable {
    case json, codec, plans, token, quote, zones, gpx, ops, jwks, webhooksig, http

    func run(_ bytes: [UInt8]) {
        switch self {
        case .json: Self.json(bytes)
        case .codec: _ = ClientCodec.decode(bytes)
        case .plans: Self.plans(bytes)
        case .token: Self.token(bytes)
        case .quote: Self.quote(bytes)
        case .zones: Self.zones(bytes)
        case .gpx: Self.gpx(bytes)
        case .ops: Self.ops(bytes)
        case .jwks: Self.jwks(bytes)
        case .webhooksig: Self.webhookSignature(bytes)
        case .http: HTTPFuzz.run(bytes)
        }
    }

    /// Whatever parses re-encodes (JSONWriter) to text that parses to the same value.
    static func json(_ bytes: [UInt8]) {
        guard let v = try? JSON.parse(bytes) else { return }
        var w = JSONWriter()
        write(v, &w)
        guard let again = try? JSON.parse(w.bytes), again == v else {
            fatalError("JSON round trip changed \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    static func write(_ v: JSON, _ w: inout JSONWriter) {
        switch v {
        case .null: w.null()
        case .bool(let b): w.bool(b)
        case .number(let n): w.raw(Array(n.utf8))
        case .string(let s): w.string(s)
        case .array(let a):
            w.beginArray()
            for x in a { write(x, &w) }
            w.endArray()
        case .object(let o):
            w.beginObject()
            for (k, x) in o.sorted(by: { $0.key < $1.key }) { w.key(k); write(x, &w) }
            w.endObject()
        }
    }

    /// Loaded plans export to a document that loads back to the same plans.
    static func plans(_ bytes: [UInt8]) {
        guard let plans = try? GBFSPlans.parse(bytes) else { return }
        let doc = GBFSPlans.document(plans, lastUpdated: 0)
        guard let again = try? GBFSPlans.parse(doc) else {
            fatalError("exported plans do not parse: \(String(decoding: doc, as: UTF8.self))")
        }
        for (a, b) in zip(plans, again) where a.id != b.id || a.perMinute != b.perMinute || a.cap != b.cap || a.price != b.price {
            fatalError("plan \(a.id) changed through export")
        }
    }

    static let signer = TokenSigner(secret: Array("fuzz-secret-0123456789-abcdefghij".utf8))

    /// Any string: refused or verified, never a crash; a verified token re-signs to one that
    /// verifies to the same claims.
    static func token(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let claims = try? signer.verify(text, now: 1_764_430_000) else { return }
        guard let again = try? signer.verify(signer.sign(claims), now: 1_764_430_000), again == claims else {
            fatalError("claims changed through sign: \(text)")
        }
    }

    /// 24 bytes of riding / paused / metres, the rest a plans document: for every plan the
    /// tick fare equals the quote, the quote's lines add up to it (short of saturation), it is
    /// never negative, and under a cap it equals the window-by-window definition.
    static func quote(_ bytes: [UInt8]) {
        guard bytes.count >= 24 else { return }
        func int(_ at: Int) -> Int64 {
            var v: UInt64 = 0
            for i in 0..<8 { v = v << 8 | UInt64(bytes[at + i]) }
            return Int64(bitPattern: v)
        }
        // Any Int64 at all: the engine must be fast and sane beyond the input bounds too.
        let riding = int(0), paused = int(8), metres = int(16)
        guard riding >= 0, paused >= 0, metres >= 0 else { return }
        guard let plans = try? GBFSPlans.parse(Array(bytes[24...])) else { return }
        for plan in plans {
            let fare = FareEngine.fare(plan, riding: riding, paused: paused, metres: metres)
            let q = FareEngine.quote(plan, riding: riding, paused: paused, metres: metres)
            guard fare == q.total, fare >= 0 else { fatalError("fare \(fare) != quote \(q.total) for \(plan.id)") }
            let (sum, overflow) = q.lines.reduce((Int64(0), false)) { acc, l in
                let (s, o) = acc.0.addingReportingOverflow(l.amount)
                return (s, acc.1 || o)
            }
            if !overflow, fare != .max, sum != fare { fatalError("lines add up to \(sum), fare \(fare) for \(plan.id)") }
            if let cap = plan.cap, riding / (cap.duration * 60) < 2_000, fare < Int64.max / 4 {
                let walked = walk(plan, riding: riding)
                let want = FareEngine.finish(plan, riding: riding, subtotal: FareEngine.add(FareEngine.add(walked,
                    FareEngine.pauseCharge(plan, paused).amount), FareEngine.distanceCharge(plan, metres)))
                guard want == fare else { fatalError("capped fare \(fare), window by window \(want) for \(plan.id) at \(riding)") }
            }
        }
    }


    /// Any bytes: a zones value or an error with a line and column inside the text; a loaded
    /// value answers lookups anywhere (inside, at and beyond its zones' boxes) without a trap.
    static func zones(_ bytes: [UInt8]) {
        let g: Geofencing
        do {
            g = try GBFSZones.parse(bytes)
        } catch {
            let lines = bytes.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
            guard error.line >= 1, error.line <= lines, error.column >= 1, error.column <= bytes.count + 1 else {
                fatalError("zone error outside the text: \(error)")
            }
            return
        }
        var points = [GeoPoint(lat: 0, lon: 0), GeoPoint(lat: 90, lon: 180), GeoPoint(lat: -90, lon: -180),
                      GeoPoint(lat: .nan, lon: .nan), GeoPoint(lat: .infinity, lon: -.infinity)]
        for z in g.zones.prefix(4) {
            let b = z.box
            points.append(GeoPoint(lat: b.minLat, lon: b.minLon))
            points.append(GeoPoint(lat: (b.minLat + b.maxLat) / 2, lon: (b.minLon + b.maxLon) / 2))
        }
        for p in points {
            for t in [Int64.min, 0, 1_764_430_000_000, Int64.max] {
                let d = g.decide(at: p, vehicleType: nil, time: t)
                _ = g.decide(at: p, vehicleType: "scooter", time: t)
                let inside = g.zonesContaining(p, time: t)
                if let zone = d.zone, !inside.contains(zone) {
                    fatalError("decide picked zone \(zone), not among those containing the point \(inside)")
                }
            }
        }
    }

    /// Track points are in range, each error is located, and a read track always schedules
    /// (or names the point whose time goes back) with offsets that never decrease.
    static func gpx(_ bytes: [UInt8]) {
        let points: [GPXPoint]
        do {
            points = try GPX.trackPoints(bytes)
        } catch {
            guard error.line >= 1, error.column >= 1 else { fatalError("gpx error without a place: \(error)") }
            return
        }
        for p in points where !(abs(p.lat) <= 90 && abs(p.lon) <= 180) || p.line < 1 {
            fatalError("gpx point out of range: \(p)")
        }
        for speed in [1.0, 60.0, 0.001] {
            guard let offsets = try? GPX.schedule(points, speed: speed) else { continue }
            guard offsets.count == points.count, zip(offsets, offsets.dropFirst()).allSatisfy({ $0 <= $1 }) else {
                fatalError("gpx schedule goes back at speed \(speed)")
            }
        }
    }

    /// Every operator message, request, listing page and ride document that decodes encodes to
    /// bytes that decode to the same value.
    static func ops(_ bytes: [UInt8]) {
        let text = String(decoding: bytes.prefix(200), as: UTF8.self)
        if case .success(let m) = OpsCodec.decode(bytes) {
            guard case .success(let again) = OpsCodec.decode(OpsCodec.encode(m)), again == m else {
                fatalError("ops message changed through encode: \(text)")
            }
        }
        if let r = OpsRequest.decode(bytes), OpsRequest.decode(OpsCodec.encode(r)) != r {
            fatalError("ops request changed through encode: \(text)")
        }
        if case .success(let p) = OpsCodec.decodePage(bytes) {
            guard case .success(let again) = OpsCodec.decodePage(OpsCodec.page(p)), again == p else {
                fatalError("ride listing changed through encode: \(text)")
            }
        }
        if case .success(let d) = OpsCodec.decodeDocument(bytes) {
            guard case .success(let again) = OpsCodec.decodeDocument(OpsCodec.document(d)), again == d else {
                fatalError("ride document changed through encode: \(text)")
            }
        }
    }

    /// Signed by the Ed25519 key in Fuzz/corpus/jwks/ed25519 (kid ed-2026), valid at `now`.
    static let jwksToken = "eyJhbGciOiAiRWREU0EiLCAidHlwIjogIkpXVCIsICJraWQiOiAiZWQtMjAyNiJ9.eyJzdWIiOiAicmlkZXItNyIsICJzY29wZSI6ICJjb250cm9sIiwgImlhdCI6IDE3NjQ0MzAwMDAsICJleHAiOiAxNzY0NDMwNjAwfQ.2Uc50NBHeU6satr6ZHn4Vm5umIAno-7eWGaXQrH5yl9Nxy5z4rGxL656DLw_cXHckmkE_DXJyJ7Ea49BVaapBw"

    /// Any bytes: keys or a KeyError; whatever set loads verifies (or refuses) a fixed token
    /// without a trap, and accepts it only if it holds the key that signed it.
    static func jwks(_ bytes: [UInt8]) {
        guard let keys = try? KeySet.jwks(bytes, name: "fuzz.jwks"), let set = try? KeySet(keys) else { return }
        // Any issuer: the fixed token pins none, and the target is the keys, not the policy.
        let verifier = TokenVerifier(secret: nil, keys: set, policy: .anyIssuerAllowed)
        guard let claims = try? verifier.verify(jwksToken, now: 1_764_430_000) else { return }
        guard claims.sub == "rider-7", set.key(kid: "ed-2026")?.algorithm == .edDSA else {
            fatalError("fixed token accepted by a set without its key: \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    static let webhookSecret = Array("whsec-fuzz-0123456789".utf8)

    /// The first line is a signature header, the rest the body: any header is refused or
    /// verified without a trap, and a header signed for the body always verifies.
    static func webhookSignature(_ bytes: [UInt8]) {
        let cut = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
        let header = String(decoding: bytes[..<cut], as: UTF8.self)
        let body = Array(bytes[min(cut + 1, bytes.count)...])
        let now: Int64 = 1_764_430_000
        _ = try? WebhookSignature.verify(header: header, body: body, secret: webhookSecret, now: now)
        _ = try? WebhookSignature.verify(header: header, body: body, secret: webhookSecret, now: 0)
        let signed = WebhookSignature.header(secret: webhookSecret, timestamp: now, body: body)
        guard (try? WebhookSignature.verify(header: signed, body: body, secret: webhookSecret, now: now)) == now else {
            fatalError("own signature refused for a \(body.count)-byte body")
        }
    }

    /// fare_capping by its definition, one window at a time (only for short rides).
    static func walk(_ plan: FarePlan, riding: Int64) -> Int64 {
        let window = plan.cap!.duration * 60
        var capped: Int64 = 0, start: Int64 = 0, before: Int64 = 0
        repeat {
            let upTo = FareEngine.timeFare(plan, riding: min(riding, start + window))
            capped = FareEngine.add(capped, min(plan.cap!.price, FareEngine.sub(upTo, before)))
            before = upTo
            start += window
        } while start < riding
        return capped
    }
}
