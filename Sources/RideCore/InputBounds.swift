/// The one range every whole-number input has, over WebSocket (`ClientCodec`) and HTTP
/// (`/quote?seconds=`) alike: durations, pauses, limits and distances.
public enum InputBounds {
    /// ~31 years of seconds or a million km: far beyond any ride, and small enough that no
    /// instant computed from it overflows. Fares no longer need it (FareEngine is bounded in
    /// time and saturating for any Int64), but one bound everywhere keeps the answers alike.
    public static let maxQuantity: Int64 = 1_000_000_000

    /// A whole number in 0...maxQuantity written as plain ASCII digits ("+1", " 1", "1e3" and
    /// 20-digit strings are refused before any arithmetic), or nil.
    public static func quantity(_ text: some StringProtocol) -> Int64? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        var n: Int64 = 0
        for d in digits { n = n * 10 + Int64(d - 0x30) }
        return n <= maxQuantity ? n : nil
    }
}
