/// An ISO 4217 currency and its minor-unit exponent. Money in RidePush is always an integer
/// count of minor units (KRW 500 is 500; USD 2.00 is 200).
public struct Currency: Sendable, Equatable, Hashable {
    public let code: String
    public let exponent: Int

    /// ISO 4217 minor-unit exponents for the currencies a plan may use.
    static let exponents: [String: Int] = [
        "KRW": 0, "JPY": 0, "VND": 0, "CLP": 0, "ISK": 0, "HUF": 2, "TWD": 2, "XOF": 0, "XAF": 0,
        "UGX": 0, "PYG": 0, "RWF": 0, "KMF": 0, "GNF": 0, "DJF": 0, "VUV": 0, "XPF": 0, "BIF": 0,
        "USD": 2, "EUR": 2, "GBP": 2, "CAD": 2, "AUD": 2, "NZD": 2, "CHF": 2, "SEK": 2, "NOK": 2,
        "DKK": 2, "PLN": 2, "CZK": 2, "RON": 2, "BGN": 2, "TRY": 2, "ILS": 2, "SGD": 2, "HKD": 2,
        "CNY": 2, "INR": 2, "IDR": 2, "MYR": 2, "THB": 2, "PHP": 2, "MXN": 2, "BRL": 2, "ARS": 2,
        "COP": 2, "PEN": 2, "ZAR": 2, "AED": 2, "SAR": 2, "QAR": 2, "EGP": 2, "NGN": 2, "KES": 2,
        "MAD": 2, "UAH": 2, "RSD": 2, "GEL": 2, "KZT": 2,
        "BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3, "LYD": 3, "IQD": 3,
    ]

    public init?(code: String) {
        guard let e = Currency.exponents[code] else { return nil }
        self.code = code
        self.exponent = e
    }

    public static let krw = Currency(code: "KRW")!

    /// Converts a decimal amount written in major units ("2.00", "0.1", "-1.5") to minor units,
    /// exactly, without floating point. Nil when it has more decimals than the currency allows.
    public func minorUnits(fromDecimal text: String) -> Int64? {
        var s = Substring(text)
        var negative = false
        if s.hasPrefix("-") { negative = true; s = s.dropFirst() } else if s.hasPrefix("+") { s = s.dropFirst() }
        let parts = s.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit) else { return nil }
        var frac = parts.count > 1 ? parts[1] : ""
        guard frac.allSatisfy(\.isASCIIDigit), parts.count == 1 || !frac.isEmpty else { return nil }
        while frac.count > exponent, frac.last == "0" { frac = frac.dropLast() }
        guard frac.count <= exponent, whole.count <= 15 else { return nil }
        let padded = String(frac) + String(repeating: "0", count: exponent - frac.count)
        guard let w = Int64(whole), let f = Int64(padded.isEmpty ? "0" : padded) else { return nil }
        var scale: Int64 = 1
        for _ in 0..<exponent { scale *= 10 }
        let v = w * scale + f
        return negative ? -v : v
    }

    /// The decimal text of a minor-unit amount, for GBFS output ("2.00", "500").
    public func decimal(_ minor: Int64) -> String {
        guard exponent > 0 else { return String(minor) }
        var scale: Int64 = 1
        for _ in 0..<exponent { scale *= 10 }
        let sign = minor < 0 ? "-" : ""
        let a = minor.magnitude
        let frac = String(a % UInt64(scale))
        return sign + String(a / UInt64(scale)) + "." + String(repeating: "0", count: exponent - frac.count) + frac
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
