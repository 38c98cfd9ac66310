/// Reads and writes GBFS `system_pricing_plans.json` (v2.2 to v3.1-RC3) as `FarePlan`s.
///
/// Decimal prices are converted once, exactly, to integer minor units with the plan's currency
/// (`Currency.minorUnits(fromDecimal:)` on the number's source text: no floating point ever).
/// Anything the engine cannot bill exactly is refused with a `PlanError` naming the plan and
/// the field, so a bad file stops the server at start instead of mis-billing later.
/// docs/fares.md describes the accepted forms and the `_ridepush_*` extension fields.
public enum GBFSPlans {
    /// The version `document` declares. `fare_capping` only exists from v3.1-RC2 on, and the
    /// spec has no plain "3.1" release yet (its README lists v3.1-RC3 as the newest).
    public static let version = "3.1-RC3"

    /// Plan fields RidePush adds; GBFS asks extension field names to start with "_".
    public static let billingField = "_ridepush_billing"
    public static let pauseRateField = "_ridepush_pause_rate"
    public static let maxPauseField = "_ridepush_max_pause"
    public static let maxRideField = "_ridepush_max_ride"
    public static let defaultField = "_ridepush_default"
    static let extensionPrefix = "_ridepush_"
    static let extensionFields: Set<String> = [billingField, pauseRateField, maxPauseField, maxRideField, defaultField]

    /// Largest amount (minor units) a price, rate or cap may have: keeps `intervals × rate`
    /// far from Int64 overflow for any ride shorter than a century.
    static let maxAmount: Int64 = 100_000_000_000
    /// Largest minute / kilometre count a segment bound, interval, cap duration or limit may have
    /// (about 1,900 years): keeps `× 60` and `× 1000` in range.
    static let maxCount: Int64 = 1_000_000_000
    /// Most segments one `per_min_pricing` or `per_km_pricing` list may have.
    public static let maxSegments = 32

    // MARK: - Parsing

    /// The plans of a `system_pricing_plans.json` document, in file order.
    public static func parse(_ bytes: [UInt8]) throws(PlanError) -> [FarePlan] {
        let root: JSON
        do {
            root = try JSON.parse(bytes)
        } catch {
            throw PlanError(plan: nil, index: nil, field: "", reason: error.located(in: bytes))
        }
        guard case .object(let top) = root else {
            throw PlanError(plan: nil, index: nil, field: "", reason: "must be a JSON object (got \(describe(root)))")
        }
        // The header is not needed to bill, but a wrong type means the file is not what it claims.
        if let v = top["version"], v.string == nil {
            throw PlanError(plan: nil, index: nil, field: "version", reason: "must be a string (got \(describe(v)))")
        }
        if let v = top["last_updated"], v.string == nil, v.int == nil {
            // v2.x: integer POSIX seconds; v3.x: RFC 3339 string.
            throw PlanError(plan: nil, index: nil, field: "last_updated",
                            reason: "must be a POSIX integer or an RFC 3339 string (got \(describe(v)))")
        }
        guard let data = top["data"] else {
            throw PlanError(plan: nil, index: nil, field: "data", reason: "is required")
        }
        guard case .object = data else {
            throw PlanError(plan: nil, index: nil, field: "data", reason: "must be an object (got \(describe(data)))")
        }
        guard let plansValue = data["plans"] else {
            throw PlanError(plan: nil, index: nil, field: "data.plans", reason: "is required")
        }
        guard case .array(let items) = plansValue else {
            throw PlanError(plan: nil, index: nil, field: "data.plans", reason: "must be an array (got \(describe(plansValue)))")
        }
        var plans: [FarePlan] = []
        var seen: [String: Int] = [:]
        var marked: Int?
        for (i, item) in items.enumerated() {
            let plan = try parsePlan(item, index: i)
            if let first = seen[plan.id] {
                throw PlanError(plan: plan.id, index: i, field: "plan_id",
                                reason: "duplicate of the plan at data.plans[\(first)]")
            }
            if plan.isDefault, let m = marked {
                throw PlanError(plan: plan.id, index: i, field: defaultField,
                                reason: "only one plan may be the default; \"\(plans[m].id)\" at data.plans[\(m)] already is")
            }
            if plan.isDefault { marked = i }
            seen[plan.id] = i
            plans.append(plan)
        }
        return plans
    }

    /// What `serve --plans` runs with: the file's plans exactly as given (GET /plans lists
    /// them, nothing added); the default is `FarePlan.defaultPlan(of:)`. A file without a plan
    /// is refused: a server with nothing to bill by is a mistake, not the built-in plan.
    public static func load(_ bytes: [UInt8]) throws(PlanError) -> [FarePlan] {
        let plans = try parse(bytes)
        guard !plans.isEmpty else {
            throw PlanError(plan: nil, index: nil, field: "data.plans",
                            reason: "has no plans; give at least one (without --plans the built-in plan is used)")
        }
        return plans
    }

    /// Field reader for one plan object: every error it throws names the plan.
    struct PlanReader {
        let object: [String: JSON]
        let index: Int
        var id: String?

        func fail(_ field: String, _ reason: String) -> PlanError {
            PlanError(plan: id, index: index, field: field, reason: reason)
        }

        func string(_ key: String) throws(PlanError) -> String? {
            guard let v = object[key] else { return nil }
            guard let s = v.string else { throw fail(key, "must be a string (got \(describe(v)))") }
            return s
        }

        func bool(_ key: String) throws(PlanError) -> Bool? {
            guard let v = object[key] else { return nil }
            guard let b = v.bool else { throw fail(key, "must be true or false (got \(describe(v)))") }
            return b
        }

        /// A whole number (GBFS "Non-Negative Integer"); `30.0` is accepted as 30, `1e2` is not.
        func count(_ v: JSON, _ field: String, min: Int64) throws(PlanError) -> Int64 {
            guard let text = v.numberText else { throw fail(field, "must be an integer (got \(describe(v)))") }
            guard let n = wholeNumber(text) else { throw fail(field, "must be an integer (got \(text))") }
            if n < min {
                throw fail(field, min == 0 ? "must not be negative (got \(text))" : "must be at least \(min) (got \(text))")
            }
            guard n <= GBFSPlans.maxCount else { throw fail(field, "\(text) is too large (at most \(GBFSPlans.maxCount))") }
            return n
        }

        /// A decimal amount in major units → minor units of `currency`, exactly.
        /// `allowString`: GBFS 2.x let `price` be a "decimal monetary value" string.
        func money(_ v: JSON, _ field: String, _ currency: Currency, negative: Bool,
                   allowString: Bool = false) throws(PlanError) -> Int64 {
            let text: String
            switch v {
            case .number(let n): text = n
            case .string(let s) where allowString: text = s
            default:
                throw fail(field, "must be a decimal number\(allowString ? " or a decimal string" : "") (got \(describe(v)))")
            }
            let shown = v.string != nil ? "\"\(text)\"" : text
            guard isPlainDecimal(text) else {
                throw fail(field, "\(shown) is not a plain decimal number (write it like 1.50)")
            }
            if !negative, text.hasPrefix("-"), text.contains(where: { $0 != "-" && $0 != "0" && $0 != "." }) {
                throw fail(field, "must not be negative (got \(shown))")
            }
            guard let minor = currency.minorUnits(fromDecimal: text) else {
                if decimals(text) > currency.exponent {
                    throw fail(field, "\(shown) has more decimals than \(currency.code) allows (\(currency.exponent))")
                }
                throw fail(field, "\(shown) is too large")
            }
            guard minor.magnitude <= GBFSPlans.maxAmount.magnitude else {
                throw fail(field, "\(shown) is too large (at most \(currency.decimal(GBFSPlans.maxAmount)) \(currency.code))")
            }
            return minor
        }

        /// GBFS 2.x String or GBFS 3.x Array<Localized String> → language → text.
        /// A plain string, and the BCP 47 "undetermined" tag `und`, are stored under "".
        func localized(_ key: String) throws(PlanError) -> [String: String]? {
            guard let v = object[key] else { return nil }
            switch v {
            case .string(let s):
                return ["": s]
            case .array(let entries):
                var out: [String: String] = [:]
                for (i, e) in entries.enumerated() {
                    let path = "\(key)[\(i)]"
                    guard case .object(let o) = e else { throw fail(path, "must be an object {text, language} (got \(describe(e)))") }
                    guard let t = o["text"] else { throw fail(path + ".text", "is required") }
                    guard let text = t.string else { throw fail(path + ".text", "must be a string (got \(describe(t)))") }
                    guard let l = o["language"] else { throw fail(path + ".language", "is required") }
                    guard let lang = l.string, !lang.isEmpty else {
                        throw fail(path + ".language", "must be a language tag such as \"en\" (got \(describe(l)))")
                    }
                    let k = lang == "und" ? "" : lang
                    guard out[k] == nil else { throw fail(path + ".language", "\"\(lang)\" appears twice") }
                    out[k] = text
                }
                return out
            default:
                throw fail(key, "must be a string or an array of {text, language} (got \(describe(v)))")
            }
        }

        func segments(_ key: String, _ currency: Currency) throws(PlanError) -> [FareSegment] {
            guard let v = object[key] else { return [] }
            guard case .array(let items) = v else { throw fail(key, "must be an array (got \(describe(v)))") }
            // Every tick bills every ride over its segments: a bounded number keeps it cheap.
            guard items.count <= GBFSPlans.maxSegments else {
                throw fail(key, "has \(items.count) segments (at most \(GBFSPlans.maxSegments))")
            }
            var out: [FareSegment] = []
            for (i, item) in items.enumerated() {
                let path = "\(key)[\(i)]"
                guard case .object(let o) = item else { throw fail(path, "must be an object (got \(describe(item)))") }
                guard let s = o["start"] else { throw fail(path + ".start", "is required") }
                guard let r = o["rate"] else { throw fail(path + ".rate", "is required") }
                guard let n = o["interval"] else { throw fail(path + ".interval", "is required") }
                let start = try count(s, path + ".start", min: 0)
                let rate = try money(r, path + ".rate", currency, negative: true)  // negative = discount
                let interval = try count(n, path + ".interval", min: 0)
                var end: Int64?
                if let e = o["end"] {
                    let value = try count(e, path + ".end", min: 0)
                    guard value > start else {
                        throw fail(path + ".end", "\(value) must be greater than start \(start) (end is exclusive)")
                    }
                    end = value
                }
                out.append(FareSegment(start: start, rate: rate, interval: interval, end: end))
            }
            return out
        }
    }

    static func parsePlan(_ value: JSON, index: Int) throws(PlanError) -> FarePlan {
        guard case .object(let o) = value else {
            throw PlanError(plan: nil, index: index, field: "", reason: "must be an object (got \(describe(value)))")
        }
        var r = PlanReader(object: o, index: index, id: nil)
        guard let idValue = o["plan_id"] else { throw r.fail("plan_id", "is required") }
        guard let id = idValue.string else { throw r.fail("plan_id", "must be a string (got \(describe(idValue)))") }
        // GBFS 3 IDs: printable ASCII without space. Plan ids also travel in URLs (`/quote?plan=`).
        guard !id.isEmpty, id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw r.fail("plan_id", "\"\(id)\" must be printable ASCII without spaces")
        }
        r.id = id

        guard let codeValue = o["currency"] else { throw r.fail("currency", "is required") }
        guard let code = codeValue.string else { throw r.fail("currency", "must be a string (got \(describe(codeValue)))") }
        guard let currency = Currency(code: code) else {
            throw r.fail("currency", "\"\(code)\" is not a known ISO 4217 currency code")
        }
        guard let priceValue = o["price"] else { throw r.fail("price", "is required") }
        let price = try r.money(priceValue, "price", currency, negative: false, allowString: true)

        var cap: FareCap?
        if let c = o["fare_capping"] {
            guard case .object(let co) = c else { throw r.fail("fare_capping", "must be an object {duration, price} (got \(describe(c)))") }
            guard let d = co["duration"] else { throw r.fail("fare_capping.duration", "is required") }
            guard let p = co["price"] else { throw r.fail("fare_capping.price", "is required") }
            // A 0-minute timeframe caps nothing: refuse it rather than guess.
            cap = FareCap(duration: try r.count(d, "fare_capping.duration", min: 1),
                          price: try r.money(p, "fare_capping.price", currency, negative: false))
        }

        // Extension fields: ours are checked by name so a typo is refused, not ignored;
        // other publishers' `_` fields (and GBFS fields we do not bill, like `url` or the
        // reservation prices) are ignored.
        for key in o.keys.sorted() where key.hasPrefix(extensionPrefix) && !extensionFields.contains(key) {
            throw r.fail(key, "unknown RidePush extension field (known: \(extensionFields.sorted().joined(separator: ", ")))")
        }
        var billing = BillingRule.started  // GBFS's own reading when the plan does not say
        if let b = try r.string(billingField) {
            guard let rule = BillingRule(rawValue: b) else {
                throw r.fail(billingField, "must be \"started\" or \"completed\" (got \"\(b)\")")
            }
            billing = rule
        }
        var pauseRate: Int64 = 0
        if let p = o[pauseRateField] { pauseRate = try r.money(p, pauseRateField, currency, negative: false) }
        var maxPause: Int64?
        if let m = o[maxPauseField] { maxPause = try r.count(m, maxPauseField, min: 1) * 60 }
        var maxRide: Int64?
        if let m = o[maxRideField] { maxRide = try r.count(m, maxRideField, min: 1) * 60 }
        let isDefault = try r.bool(defaultField) ?? false

        let plan = FarePlan(
            id: id,
            names: try r.localized("name") ?? [:],
            descriptions: try r.localized("description") ?? [:],
            currency: currency,
            price: price,
            isTaxable: try r.bool("is_taxable") ?? false,
            perMinute: try r.segments("per_min_pricing", currency),
            perKm: try r.segments("per_km_pricing", currency),
            surgePricing: try r.bool("surge_pricing") ?? false,
            cap: cap,
            billing: billing,
            pauseRate: pauseRate,
            maxPauseSeconds: maxPause,
            maxRideSeconds: maxRide,
            isDefault: isDefault)
        if let why = FareEngine.checkCap(plan) { throw r.fail("fare_capping", why) }
        return plan
    }

    // MARK: - Export

    /// A GBFS v3.1 `system_pricing_plans.json` of `plans`, `parse`-able back to the same plans.
    /// `lastUpdated` is Unix time in seconds, written as RFC 3339 UTC as v3 requires.
    /// Amounts are JSON numbers with exactly the currency's decimals (`Currency.decimal`:
    /// USD 200 → `2.00`, KRW 500 → `500`), as the spec's own examples write them.
    public static func document(_ plans: [FarePlan], lastUpdated: Int64, ttl: Int64 = 0) -> [UInt8] {
        var w = JSONWriter(reserving: 512 * max(1, plans.count))
        w.beginObject()
        w.field("last_updated", rfc3339(lastUpdated))
        w.field("ttl", ttl)
        w.field("version", version)
        w.key("data")
        w.beginObject()
        w.key("plans")
        w.beginArray()
        for p in plans { plan(&w, p) }
        w.endArray()
        w.endObject()
        w.endObject()
        return w.bytes
    }

    static func plan(_ w: inout JSONWriter, _ p: FarePlan) {
        let c = p.currency
        w.beginObject()
        w.field("plan_id", p.id)
        w.key("name")
        localized(&w, p.names)
        w.field("currency", c.code)
        w.key("price")
        decimal(&w, c, p.price)
        w.key("is_taxable")
        w.bool(p.isTaxable)
        w.key("description")
        localized(&w, p.descriptions)
        if !p.perKm.isEmpty {
            w.key("per_km_pricing")
            segments(&w, c, p.perKm)
        }
        if !p.perMinute.isEmpty {
            w.key("per_min_pricing")
            segments(&w, c, p.perMinute)
        }
        if p.surgePricing {
            w.key("surge_pricing")
            w.bool(true)
        }
        if let cap = p.cap {
            w.key("fare_capping")
            w.beginObject()
            w.field("duration", cap.duration)
            w.key("price")
            decimal(&w, c, cap.price)
            w.endObject()
        }
        // Always written, so a reader of GET /plans sees which rule bills without knowing defaults.
        w.key(billingField)
        w.string(p.billing.rawValue)
        if p.pauseRate != 0 {
            w.key(pauseRateField)
            decimal(&w, c, p.pauseRate)
        }
        // The file format counts minutes; a limit set in code that is not whole minutes is
        // rounded up (only the built-in plans could have one, and they have none).
        if let s = p.maxPauseSeconds {
            w.key(maxPauseField)
            w.int((s + 59) / 60)
        }
        if let s = p.maxRideSeconds {
            w.key(maxRideField)
            w.int((s + 59) / 60)
        }
        if p.isDefault {
            w.key(defaultField)
            w.bool(true)
        }
        w.endObject()
    }

    static func segments(_ w: inout JSONWriter, _ c: Currency, _ segs: [FareSegment]) {
        w.beginArray()
        for s in segs {
            w.beginObject()
            w.field("start", s.start)
            w.key("rate")
            decimal(&w, c, s.rate)
            w.field("interval", s.interval)
            if let e = s.end { w.field("end", e) }
            w.endObject()
        }
        w.endArray()
    }

    /// v3 Array<Localized String>, languages sorted so the output is stable; "" (a v2 plain
    /// string, language unknown) is written as BCP 47 `und`, which `parse` maps back to "".
    static func localized(_ w: inout JSONWriter, _ texts: [String: String]) {
        w.beginArray()
        for (lang, text) in texts.sorted(by: { $0.key < $1.key }) {
            w.beginObject()
            w.field("text", text)
            w.field("language", lang.isEmpty ? "und" : lang)
            w.endObject()
        }
        w.endArray()
    }

    static func decimal(_ w: inout JSONWriter, _ c: Currency, _ minor: Int64) {
        w.raw(Array(c.decimal(minor).utf8))
    }

    /// Unix seconds → `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC), without Foundation.
    static func rfc3339(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secs = seconds - days * 86400
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secs / 3600, 2)):\(pad(secs % 3600 / 60, 2)):\(pad(secs % 60, 2))Z"
    }
}

/// Why a plans file was refused: which plan (its `plan_id`, or its index in `data.plans` when
/// the id itself is missing or bad), which field (a path inside the plan), and why.
public struct PlanError: Error, Equatable, Sendable, CustomStringConvertible {
    public var plan: String?
    public var index: Int?
    public var field: String
    public var reason: String

    public init(plan: String?, index: Int?, field: String, reason: String) {
        self.plan = plan
        self.index = index
        self.field = field
        self.reason = reason
    }

    /// `plan "bad-usd": per_min_pricing[1].rate: 0.005 has more decimals than USD allows (2)`
    public var description: String {
        let who: String
        if let plan { who = "plan \"\(plan)\"" }
        else if let index { who = "data.plans[\(index)]" }
        else { who = "system_pricing_plans" }
        return field.isEmpty ? "\(who): \(reason)" : "\(who): \(field): \(reason)"
    }
}

/// A short description of a JSON value for error messages.
fileprivate func describe(_ v: JSON) -> String {
    switch v {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .number(let n): return n
    case .string(let s): return "\"\(s.count > 40 ? String(s.prefix(40)) + "…" : s)\""
    case .array: return "an array"
    case .object: return "an object"
    }
}

/// `30` or `30.0` → 30; nil for fractions, exponents and anything else.
fileprivate func wholeNumber(_ text: String) -> Int64? {
    let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
    guard let whole = parts.first, !whole.contains(where: { $0 == "e" || $0 == "E" }) else { return nil }
    if parts.count == 2 { guard parts[1].allSatisfy({ $0 == "0" }) else { return nil } }
    return Int64(whole)
}

/// `-?digits(.digits)?`, as `Currency.minorUnits` reads it (JSON exponents are refused).
fileprivate func isPlainDecimal(_ text: String) -> Bool {
    var s = Substring(text)
    if s.hasPrefix("-") { s = s.dropFirst() }
    let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
    guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit) else { return false }
    return parts.count == 1 || (!parts[1].isEmpty && parts[1].allSatisfy(\.isASCIIDigit))
}

/// Significant decimals of a plain decimal (trailing zeros do not count: 2.500 has 1).
fileprivate func decimals(_ text: String) -> Int {
    guard let dot = text.firstIndex(of: ".") else { return 0 }
    var frac = text[text.index(after: dot)...]
    while frac.last == "0" { frac = frac.dropLast() }
    return frac.count
}
