/// Parses a token lifetime for `ridepush token --ttl`: a whole number of seconds ("90"), or
/// one or more number+unit pairs with units s, m, h, d ("90s", "30m", "2h", "1d", "1h30m").
/// Returns seconds, or nil for anything else (empty, signs, spaces, unknown units, a bare
/// number followed by more parts, overflow).
public func parseDuration(_ s: String) -> Int? {
    let chars = Array(s.utf8)
    guard !chars.isEmpty else { return nil }
    if chars.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
        return Int(s)
    }
    var total = 0
    var i = 0
    while i < chars.count {
        var number = 0
        let start = i
        while i < chars.count, chars[i] >= UInt8(ascii: "0"), chars[i] <= UInt8(ascii: "9") {
            let (times10, o1) = number.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.addingReportingOverflow(Int(chars[i] - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            number = next
            i += 1
        }
        guard i > start, i < chars.count else { return nil }
        let unit: Int
        switch chars[i] {
        case UInt8(ascii: "s"): unit = 1
        case UInt8(ascii: "m"): unit = 60
        case UInt8(ascii: "h"): unit = 3600
        case UInt8(ascii: "d"): unit = 86400
        default: return nil
        }
        i += 1
        let (part, o1) = number.multipliedReportingOverflow(by: unit)
        let (sum, o2) = total.addingReportingOverflow(part)
        if o1 || o2 { return nil }
        total = sum
    }
    return total
}
