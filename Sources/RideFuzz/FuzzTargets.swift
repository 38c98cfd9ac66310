import RideAuth
@testable import RideCore
import RideProtocol

/// The fuzzed parsers, one function per target. Each checks properties that hold for any
/// input (a crash, a trap or a broken property is a bug; so is a slow input, which
/// libFuzzer's -timeout reports).
enum FuzzTarget: String, CaseIterable {
    case json, codec, plans, token, quote

    func run(_ bytes: [UInt8]) {
        switch self {
        case .json: Self.json(bytes)
        case .codec: _ = ClientCodec.decode(bytes)
        case .plans: Self.plans(bytes)
        case .token: Self.token(bytes)
        case .quote: Self.quote(bytes)
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
