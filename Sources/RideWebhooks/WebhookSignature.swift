import COpenSSL

/// Stripe's webhook signature scheme, so receivers can reuse code they already have:
/// `RidePush-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
/// `t` is the time of the attempt, not of the event, so a receiver can refuse replays of an old
/// request by age alone; a new attempt is signed anew.
public enum WebhookSignature {
    public static let headerName = "RidePush-Signature"
    public static let eventIDHeaderName = "RidePush-Event-Id"
    /// Default age a receiver accepts (Stripe's libraries use the same five minutes).
    public static let defaultTolerance: Int64 = 300

    public static func header(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        header(secrets: [secret], timestamp: timestamp, body: body)
    }

    /// While a secret is rolled every key signs, in order (`t=…,v1=…,v1=…`, as Stripe does):
    /// a receiver holding either the old or the new key verifies.
    public static func header(secrets: [[UInt8]], timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp)" + secrets.map { ",v1=" + hex(mac(secret: $0, timestamp: timestamp, body: body)) }.joined()
    }

    public enum Failure: Error, Equatable, Sendable {
        /// No `t=` with a whole number, or no `v1=`.
        case malformedHeader
        /// `t` further than the tolerance from now (either way).
        case outsideTolerance
        /// No `v1` matches.
        case noMatchingSignature
    }

    /// Checks a received header as a receiver would: parses `t` and every `v1` (a sender
    /// rotating secrets may send several; other schemes are ignored), compares in constant time,
    /// then the age. Returns the timestamp.
    @discardableResult
    public static func verify(header: String, body: [UInt8], secret: [UInt8], now: Int64,
                              tolerance: Int64 = defaultTolerance) throws(Failure) -> Int64 {
        var timestamp: Int64?
        var candidates = [[UInt8]]()
        for item in header.split(separator: ",", omittingEmptySubsequences: true) {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2 else { continue }
            switch pair[0].trimmingSpaces {
            case "t":
                guard timestamp == nil, let t = Int64(pair[1].trimmingSpaces) else { throw .malformedHeader }
                timestamp = t
            case "v1":
                guard let bytes = unhex(pair[1].trimmingSpaces) else { throw .malformedHeader }
                candidates.append(bytes)
            default:
                continue
            }
        }
        guard let timestamp, !candidates.isEmpty else { throw .malformedHeader }
        let expected = mac(secret: secret, timestamp: timestamp, body: body)
        let matched = candidates.contains { $0.count == expected.count && CRYPTO_memcmp($0, expected, expected.count) == 0 }
        guard matched else { throw .noMatchingSignature }
        // Compared after the MAC so an attacker learns nothing from which check failed first;
        // written without subtraction overflow for any t.
        // The distance without overflow: a header may carry any 64-bit time.
        let (gap, overflow) = timestamp.subtractingReportingOverflow(now)
        guard !overflow, gap.magnitude <= tolerance.magnitude else { throw .outsideTolerance }
        return timestamp
    }

    static func mac(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> [UInt8] {
        let signed = Array("\(timestamp).".utf8) + body
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let result = HMAC(EVP_sha256(), secret, Int32(secret.count), signed, signed.count, &out, &length)
        guard result != nil, length == 32 else { fatalError("HMAC-SHA256 failed in libcrypto") }
        return Array(out.prefix(32))
    }

    private static func unhex<S: StringProtocol>(_ text: S) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard !chars.isEmpty, chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}
