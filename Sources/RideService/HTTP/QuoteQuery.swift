import RideCore
import RideProtocol

/// What is wrong with a `/quote?…` query, in words a person can act on: which parameter,
/// what it said and what it should say. Checked before the quote is computed.
package enum QuoteQuery {
    package static let known = ["plan", "seconds", "paused"]

    /// nil when the query is well-formed (the plan's existence is checked after).
    package static func problem(_ args: [(name: String, value: String)]) -> String? {
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
    package static func wholeSeconds(_ name: String, _ text: String) -> String? {
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

/// `GET /quote` once its query is well-formed and the address within its rate: the quote, or
/// why there is none. Request in, response out; the adapter reads the query and writes.
package enum QuoteRoute {
    package static func answer(plan planID: String?, seconds: String?, paused: String?,
                               plans: (String?) -> FarePlan?) -> HTTPAnswer {
        guard let seconds = seconds.flatMap(InputBounds.quantity) else {
            return .error(400, "bad_request", "seconds= is required: whole seconds of riding, 0 to \(InputBounds.maxQuantity)")
        }
        guard let paused = paused.map(InputBounds.quantity) ?? 0 else {
            return .error(400, "bad_request", "paused= must be whole seconds, 0 to \(InputBounds.maxQuantity)")
        }
        guard let plan = plans(planID) else {
            return .error(404, "plan_not_found", "no plan \"\(planID ?? "")\"")
        }
        let q = FareEngine.quote(plan, riding: seconds, paused: paused)
        return HTTPAnswer(status: 200, body: ServerMessages.quote(id: nil, plan: plan, quote: q, seconds: seconds, paused: paused))
    }
}
