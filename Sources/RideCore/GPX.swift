/// The track points of a GPX 1.0/1.1 file (`<trkpt lat lon><time>…</time></trkpt>`), for
/// `ridepush ride simulate`. A small XML scanner of its own rather than FoundationXML, so the
/// `ridepush` binary does not grow a libxml2 dependency for one command: it checks what a
/// track needs (tags nest and close, attributes are quoted, comments/CDATA/declarations are
/// skipped) and names the line and column of anything it cannot read.
public struct GPXPoint: Sendable, Equatable {
    public var lat: Double
    public var lon: Double
    /// Unix milliseconds of `<time>`, nil when the point has none.
    public var time: Int64?
    /// Where the `<trkpt>` starts (1-based), for messages.
    public var line: Int

    public init(lat: Double, lon: Double, time: Int64?, line: Int) {
        self.lat = lat
        self.lon = lon
        self.time = time
        self.line = line
    }
}

public struct GPXError: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var message: String

    public init(line: Int, column: Int, _ message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String { "line \(line), column \(column): \(message)" }
}

public enum GPX {
    /// Every `trkpt` of every `trkseg` of every `trk`, in file order.
    public static func trackPoints(_ bytes: [UInt8]) throws(GPXError) -> [GPXPoint] {
        var s = GPXScanner(bytes)
        var stack: [(name: String, line: Int, column: Int)] = []
        var points: [GPXPoint] = []
        var timeText: [UInt8]?
        var sawRoot = false
        while true {
            let (line, column) = (s.line, s.column)
            guard let item = try s.next() else { break }
            switch item {
            case .open(let name, let attributes, let selfClosing):
                if stack.isEmpty {
                    guard !sawRoot else { throw GPXError(line: line, column: column, "a second root element <\(name)>: a GPX file has one <gpx>") }
                    guard local(name) == "gpx" else { throw GPXError(line: line, column: column, "the root element is <\(name)>, not <gpx>: not a GPX file") }
                    sawRoot = true
                }
                if local(name) == "trkpt" {
                    points.append(try point(attributes, line: line, column: column))
                } else if local(name) == "time", let parent = stack.last, local(parent.name) == "trkpt" {
                    timeText = []
                }
                if !selfClosing { stack.append((name, line, column)) }
            case .close(let name):
                guard let top = stack.popLast() else { throw GPXError(line: line, column: column, "</\(name)> closes nothing") }
                guard top.name == name else {
                    throw GPXError(line: line, column: column, "</\(name)> where </\(top.name)> was expected (opened at line \(top.line), column \(top.column))")
                }
                if local(name) == "time", let text = timeText {
                    timeText = nil
                    guard let ms = parseTime(text) else {
                        let shown = String(decoding: text, as: UTF8.self).trimmed.prefix(40)
                        throw GPXError(line: top.line, column: top.column, "<time> \"\(shown)\" is not an ISO 8601 UTC time such as 2026-12-04T09:00:00Z")
                    }
                    points[points.count - 1].time = ms
                }
            case .text(let t):
                if timeText != nil { timeText! += t }
            }
        }
        if let open = stack.last {
            throw GPXError(line: s.line, column: s.column, "the file ends inside <\(open.name)> (opened at line \(open.line), column \(open.column))")
        }
        guard sawRoot else { throw GPXError(line: s.line, column: s.column, "no <gpx> element: not a GPX file") }
        return points
    }

    /// When to send each point, in milliseconds after the first: the recorded gaps divided
    /// by `speed`; a point without a time (or after one without) comes 1 s (÷ speed) after
    /// the previous. A time that goes back is an error naming the point's line.
    public static func schedule(_ points: [GPXPoint], speed: Double) throws(GPXError) -> [Int64] {
        var out: [Int64] = []
        var offset = 0.0
        for (i, p) in points.enumerated() {
            if i > 0 {
                var gap = 1000.0
                if let t = p.time, let prev = points[i - 1].time {
                    guard t >= prev else {
                        throw GPXError(line: p.line, column: 1, "<time> goes back \(prev - t) ms from the previous point's (line \(points[i - 1].line))")
                    }
                    gap = Double(t - prev)
                }
                offset += gap / speed
            }
            out.append(Int64(offset.rounded()))
        }
        return out
    }

    static func point(_ attributes: [String: String], line: Int, column: Int) throws(GPXError) -> GPXPoint {
        guard let latText = attributes["lat"], let lonText = attributes["lon"] else {
            throw GPXError(line: line, column: column, "<trkpt> needs both lat and lon attributes")
        }
        guard let lat = Double(latText.trimmed), lat.isFinite, abs(lat) <= 90 else {
            throw GPXError(line: line, column: column, "<trkpt> lat \"\(latText.prefix(40))\" is not a latitude from -90 to 90")
        }
        guard let lon = Double(lonText.trimmed), lon.isFinite, abs(lon) <= 180 else {
            throw GPXError(line: line, column: column, "<trkpt> lon \"\(lonText.prefix(40))\" is not a longitude from -180 to 180")
        }
        return GPXPoint(lat: lat, lon: lon, time: nil, line: line)
    }

    static func local(_ name: String) -> Substring {
        name.split(separator: ":", maxSplits: 1).last ?? Substring(name)
    }

    /// `YYYY-MM-DDThh:mm:ss[.fff…](Z|±hh:mm)` as Unix milliseconds (GPX's xsd:dateTime; a time
    /// without a zone is read as UTC, as GPX 1.1 says times are).
    public static func parseTime(_ raw: [UInt8]) -> Int64? {
        let b = Array(String(decoding: raw, as: UTF8.self).trimmed.utf8)
        func digits(_ at: Int, _ n: Int) -> Int64? {
            guard at + n <= b.count else { return nil }
            var v: Int64 = 0
            for c in b[at..<at + n] {
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int64(c - 0x30)
            }
            return v
        }
        guard b.count >= 19, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x74, b[13] == 0x3A, b[16] == 0x3A,
              let y = digits(0, 4), let mo = digits(5, 2), let d = digits(8, 2),
              let h = digits(11, 2), let mi = digits(14, 2), let sec = digits(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61 else { return nil }
        var i = 19
        var ms: Int64 = 0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var scale: Int64 = 100
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                ms += Int64(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offset: Int64 = 0
        if i < b.count {
            if b[i] == 0x5A || b[i] == 0x7A {
                i += 1
            } else if b[i] == 0x2B || b[i] == 0x2D, let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3A,
                      let om = digits(i + 4, 2), oh < 24, om < 60 {
                offset = (oh * 60 + om) * 60_000 * (b[i] == 0x2D ? -1 : 1)
                i += 6
            } else {
                return nil
            }
        }
        guard i == b.count else { return nil }
        return (daysFromCivil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec) * 1000 + ms - offset
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension String {
    fileprivate var trimmed: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}

/// Start tags, end tags and text, with the position of each; markup GPX does not need
/// (declarations, comments, CDATA, DOCTYPE) is skipped whole.
struct GPXScanner {
    enum Item {
        case open(String, [String: String], selfClosing: Bool)
        case close(String)
        case text([UInt8])
    }

    let b: [UInt8]
    var i = 0
    private(set) var line = 1
    private(set) var column = 1

    init(_ bytes: [UInt8]) {
        b = bytes
        if b.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }  // a UTF-8 byte order mark
    }

    private mutating func advance() {
        if b[i] == 0x0A {
            line += 1
            column = 1
        } else if b[i] & 0xC0 != 0x80 {
            column += 1  // count characters, not UTF-8 continuation bytes
        }
        i += 1
    }

    private func error(_ m: String) -> GPXError { GPXError(line: line, column: column, m) }

    private func at(_ s: String) -> Bool { b[i...].starts(with: s.utf8) }

    private mutating func skip(past end: String, what: String) throws(GPXError) {
        let (l, c) = (line, column)
        while i < b.count {
            if at(end) {
                for _ in 0..<end.utf8.count { advance() }
                return
            }
            advance()
        }
        throw GPXError(line: l, column: c, "\(what) is not closed with \(end)")
    }

    mutating func next() throws(GPXError) -> Item? {
        while i < b.count {
            guard b[i] == 0x3C else {
                var text: [UInt8] = []
                while i < b.count, b[i] != 0x3C {
                    text.append(b[i])
                    advance()
                }
                return .text(text)
            }
            if at("<?") { try skip(past: "?>", what: "<?…"); continue }
            if at("<!--") { try skip(past: "-->", what: "a comment"); continue }
            if at("<![CDATA[") {
                let start = i + 9
                try skip(past: "]]>", what: "CDATA")
                return .text(Array(b[start..<(i - 3)]))
            }
            if at("<!") { try skip(past: ">", what: "<!…"); continue }
            return try tag()
        }
        return nil
    }

    private static func isNameByte(_ c: UInt8) -> Bool {
        !(c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == 0x3E || c == 0x2F || c == 0x3D || c == 0x3C
            || c == 0x22 || c == 0x27)
    }

    private mutating func name() throws(GPXError) -> String {
        let start = i
        while i < b.count, Self.isNameByte(b[i]) { advance() }
        guard i > start else { throw error(i < b.count ? "expected a name, found \"\(Character(Unicode.Scalar(b[i])))\"" : "the file ends inside a tag") }
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    private mutating func spaces() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x09 || b[i] == 0x0A || b[i] == 0x0D { advance() }
    }

    private mutating func tag() throws(GPXError) -> Item {
        advance()  // <
        if i < b.count, b[i] == 0x2F {
            advance()
            let n = try name()
            spaces()
            guard i < b.count, b[i] == 0x3E else { throw error("</\(n) is not closed with >") }
            advance()
            return .close(n)
        }
        let n = try name()
        var attributes: [String: String] = [:]
        while true {
            spaces()
            guard i < b.count else { throw error("the file ends inside <\(n)>") }
            if b[i] == 0x3E {
                advance()
                return .open(n, attributes, selfClosing: false)
            }
            if b[i] == 0x2F {
                advance()
                guard i < b.count, b[i] == 0x3E else { throw error("expected > after / in <\(n)>") }
                advance()
                return .open(n, attributes, selfClosing: true)
            }
            let key = try name()
            spaces()
            guard i < b.count, b[i] == 0x3D else { throw error("attribute \(key) of <\(n)> has no =\"value\"") }
            advance()
            spaces()
            guard i < b.count, b[i] == 0x22 || b[i] == 0x27 else { throw error("the value of \(key) in <\(n)> must be quoted") }
            let quote = b[i]
            advance()
            let start = i
            while i < b.count, b[i] != quote {
                guard b[i] != 0x3C else { throw error("< inside the value of \(key) in <\(n)>") }
                advance()
            }
            guard i < b.count else { throw error("the value of \(key) in <\(n)> is not closed") }
            attributes[key] = String(decoding: b[start..<i], as: UTF8.self)
            advance()
        }
    }
}
