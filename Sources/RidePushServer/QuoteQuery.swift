import CLibWebSockets
import RideCore
import RideProtocol

/// What is wrong with a `/quote?…` query, in words a person can act on: which parameter,
/// what it said and what it should say. Checked before the quote is computed.
enum QuoteQuery {
    static let known = ["plan", "seconds", "paused"]

    /// nil when the query is well-formed (the plan's existence is checked after).
    static func problem(_ args: [(name: String, value: String)]) -> String? {
        var seen: Set<String> = []
        for (name, _) in args {
            guard known.contains(name) else {
                return "unknown parameter \"\(name.prefix(40))\" (known: plan, seconds, paused)"
            }
            guard seen.insert(name).inserted else { return "\(name)= is given more than once" }
        }
        guard let seconds = args.first(where: { $0.name == "seconds" })?.value else {
            return "seconds= is required: whole seconds of riding, e.g. /quote?seconds=192"
        }
        if let why = wholeSeconds("seconds", seconds) { return why }
        if let paused = args.first(where: { $0.name == "paused" })?.value, let why = wholeSeconds("paused", paused) { return why }
        if let plan = args.first(where: { $0.name == "plan" })?.value, plan.isEmpty { return "plan= is empty: give a plan id (GET /plans lists them)" }
        return nil
    }

    /// Why `text` is not a whole number of seconds in 0...max, or nil.
    static func wholeSeconds(_ name: String, _ text: String) -> String? {
        let max = ClientCodec.maxIntValue
        let shown = "\(name)=\(text.prefix(24))\(text.count > 24 ? "…" : "")"
        let range = "whole seconds from 0 to \(max)"
        if text.isEmpty { return "\(name)= is empty: \(range)" }
        let digits = text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        if digits {
            // Counted before converting: 20 digits would overflow Int64. The same ten-digit
            // bound as every whole-number input, so the wording and the refusal agree.
            let trimmed = text.drop { $0 == "0" }
            if trimmed.count > String(max).count || (Int64(trimmed) ?? 0) > max {
                return "\(shown) is too large: at most \(max) (about 31 years)"
            }
            if text.count > String(max).count { return "\(shown) has more than \(String(max).count) digits: \(range)" }
            return nil
        }
        if text.hasPrefix("-"), text.dropFirst().utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 || $0 == UInt8(ascii: ".") }) {
            return "\(shown) is negative: \(range)"
        }
        if Double(text) != nil, text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }) {
            return "\(shown) has a fraction: \(range)"
        }
        return "\(shown) is not a number: \(range)"
    }
}

extension Shard {
    /// The reason a `/quote` query is refused, or nil.
    func quoteProblem(_ wsi: OpaquePointer) -> String? {
        QuoteQuery.problem(queryArguments(wsi))
    }

    /// Every `name=value` of the query string (lws has already %-decoded them), at most 16.
    func queryArguments(_ wsi: OpaquePointer) -> [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        guard lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) > 0 else { return out }
        var buf = [CChar](repeating: 0, count: 1024)
        for i in 0..<16 {
            let n = lws_hdr_copy_fragment(wsi, &buf, Int32(buf.count), WSI_TOKEN_HTTP_URI_ARGS, Int32(i))
            guard n > 0 else { break }
            let frag = String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let eq = frag.firstIndex(of: "=") {
                out.append((String(frag[..<eq]), String(frag[frag.index(after: eq)...])))
            } else {
                out.append((frag, ""))
            }
        }
        return out
    }
}
