/// Cheap byte scanning of server messages: the bench reads tens of thousands of ticks a
/// second on the same cores as the server, so no Foundation JSON per message — only
/// "type", "seq", "at" (and "code" on errors) are located by their quoted keys.
public enum ScannedMessage: Equatable {
    case tick(seq: Int64, at: Int64)
    case error(code: String)
    /// Any other type ("state", "unsubscribed", …), or a tick missing seq/at (`malformed`).
    case other
    case malformed
}

@inline(__always)
private func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }

/// Offset just after `"key"` followed by optional whitespace and ':' (and whitespace),
/// i.e. where the value starts. Keys are matched with their quotes, so "at" never
/// matches inside "started_at".
func valueOffset(_ p: UnsafeRawBufferPointer, key: StaticString) -> Int? {
    let k = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    let kn = k.count
    let n = p.count
    guard kn > 0, n >= kn + 3 else { return nil }
    var i = 0
    while i + kn + 2 <= n {
        if p[i] == 0x22, p[i + kn + 1] == 0x22 {  // '"' key '"'
            var same = true
            for j in 0..<kn where p[i + 1 + j] != k[j] { same = false; break }
            if same {
                var q = i + kn + 2
                while q < n, isSpace(p[q]) { q += 1 }
                if q < n, p[q] == 0x3A {  // ':'
                    q += 1
                    while q < n, isSpace(p[q]) { q += 1 }
                    return q
                }
            }
        }
        i += 1
    }
    return nil
}

func intValue(_ p: UnsafeRawBufferPointer, key: StaticString) -> Int64? {
    guard var q = valueOffset(p, key: key) else { return nil }
    let n = p.count
    var neg = false
    if q < n, p[q] == 0x2D { neg = true; q += 1 }
    guard q < n, p[q] >= 0x30, p[q] <= 0x39 else { return nil }
    var v: Int64 = 0
    while q < n, p[q] >= 0x30, p[q] <= 0x39 {
        v = v &* 10 &+ Int64(p[q] - 0x30)
        q += 1
    }
    return neg ? -v : v
}

/// The string value's byte range (no escape handling: the values we look at are plain).
func stringRange(_ p: UnsafeRawBufferPointer, key: StaticString) -> Range<Int>? {
    guard let q = valueOffset(p, key: key), q < p.count, p[q] == 0x22 else { return nil }
    var e = q + 1
    while e < p.count, p[e] != 0x22 { e += 1 }
    guard e < p.count else { return nil }
    return (q + 1)..<e
}

private func equals(_ p: UnsafeRawBufferPointer, _ r: Range<Int>, _ s: StaticString) -> Bool {
    guard r.count == s.utf8CodeUnitCount else { return false }
    let sp = UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)
    for (j, i) in r.enumerated() where p[i] != sp[j] { return false }
    return true
}

public func scanMessage(_ p: UnsafeRawBufferPointer) -> ScannedMessage {
    guard let t = stringRange(p, key: "type") else { return .malformed }
    if equals(p, t, "tick") {
        guard let seq = intValue(p, key: "seq"), let at = intValue(p, key: "at") else { return .malformed }
        return .tick(seq: seq, at: at)
    }
    if equals(p, t, "error") {
        let code = stringRange(p, key: "code").map { String(decoding: p[$0], as: UTF8.self) } ?? ""
        return .error(code: code)
    }
    return .other
}

/// Per-connection tick sequence: a jump from seq s to s+k (k > 1) means k−1 ticks never
/// arrived. The first tick only sets the baseline (a subscriber gets ticks from when it
/// subscribed on). Repeated or older seqs are counted as duplicates, not gaps.
public struct SeqTracker: Equatable, Sendable {
    public private(set) var last: Int64 = -1
    public private(set) var gaps: Int64 = 0
    public private(set) var duplicates: Int64 = 0

    public init() {}

    /// Returns the ticks missed just before this one.
    @discardableResult
    public mutating func observe(_ seq: Int64) -> Int64 {
        var missed: Int64 = 0
        if last >= 0 {
            if seq > last + 1 { missed = seq - last - 1; gaps += missed }
            else if seq <= last { duplicates += 1 }
        }
        if seq > last { last = seq }
        return missed
    }
}
