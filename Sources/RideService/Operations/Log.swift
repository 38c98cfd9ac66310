import RideCore
import Glibc
import Synchronization

/// The one way RidePush logs, and the one place that decides how a line looks.
/// - text (the default): libwebsockets' own format on stderr, as always:
///   `[2026/12/01 09:41:02:1234] W: message`; fields are already in the message.
/// - json (`--log-format json`): one object per line on stderr, `time` (RFC 3339, UTC, ms),
///   `level`, `message`, then the fields (`ride`, `rider`, `request_id`, `close_code`, …).
///   libwebsockets' own lines are re-emitted the same way, without fields.
/// Levels printed either way: error, warn and info (lws' ERR, WARN, USER); notice is not.
public enum Log {
    public enum Level: String, Sendable {
        case error, warn, info, notice
    }

    public enum Format: String, Sendable {
        case text, json
    }

    /// A field's value: JSON strings and integers are all the logs need.
    public enum Value: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
        case string(String)
        case int(Int64)
        public init(stringLiteral s: String) { self = .string(s) }
        public init(integerLiteral n: Int64) { self = .int(n) }
        public init(_ n: some BinaryInteger) { self = .int(Int64(n)) }
        public init(_ s: String) { self = .string(s) }
    }

    public typealias Fields = KeyValuePairs<String, Value>

    private static let json = Atomic<Bool>(false)
    /// One line is one write(2); the lock keeps two threads' lines from interleaving.
    private static let out = Locked<Void>(())
    /// Where text lines go: the socket layer's own logger, handed in by the adapter at start
    /// (LogSink.swift), so lws's lines and ours look alike; stderr until then.
    /// Boxed: a closure kept directly in the generic Mutex is re-abstracted at every
    /// `withLock` (an inout access writes it back wrapped in two more thunks), so each line
    /// logged made the next one slower (60 % of the server's CPU after 10,000 rides' pushes).
    private static let textSink = Mutex<TextSink?>(nil)

    private final class TextSink: Sendable {
        let write: @Sendable (Level, String) -> Void
        init(_ write: @escaping @Sendable (Level, String) -> Void) { self.write = write }
    }

    /// Called once at start, before any thread logs.
    package static func use(_ format: Format, text: (@Sendable (Level, String) -> Void)?) {
        json.store(format == .json, ordering: .relaxed)
        textSink.withLock { $0 = text.map(TextSink.init) }
    }

    public static func error(_ message: String, _ fields: Fields = [:]) { write(.error, message, fields) }
    public static func warn(_ message: String, _ fields: Fields = [:]) { write(.warn, message, fields) }
    public static func info(_ message: String, _ fields: Fields = [:]) { write(.info, message, fields) }
    public static func notice(_ message: String, _ fields: Fields = [:]) { write(.notice, message, fields) }

    static func write(_ level: Level, _ message: String, _ fields: Fields) {
        guard json.load(ordering: .relaxed) else {
            if let sink = textSink.withLock({ $0 }) { sink.write(level, message) } else if level != .notice {
                emit("\(level.rawValue): \(message)")
            }
            return
        }
        guard level != .notice else { return }
        emit(line(level, message, fields, at: nowMillis()))
    }

    package static func emit(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        out.withLock { _ in
            var off = 0
            while off < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress! + off, $0.count - off) }
                if n > 0 { off += n } else if n < 0, errno == EINTR { continue } else { break }
            }
        }
    }

    /// One JSON log line (without the newline), for `at` Unix milliseconds.
    public static func line(_ level: Level, _ message: String, _ fields: Fields, at: Int64) -> String {
        var s = "{\"time\":\"" + rfc3339(at) + "\",\"level\":\"" + level.rawValue + "\",\"message\":" + quoted(message)
        for (k, v) in fields {
            s += "," + quoted(k) + ":"
            switch v {
            case .string(let t): s += quoted(t)
            case .int(let n): s += String(n)
            }
        }
        return s + "}"
    }

    static func quoted(_ t: String) -> String {
        var s = "\""
        for u in t.unicodeScalars {
            switch u {
            case "\"": s += "\\\""
            case "\\": s += "\\\\"
            case "\n": s += "\\n"
            case "\r": s += "\\r"
            case "\t": s += "\\t"
            case _ where u.value < 0x20:
                let h = String(u.value, radix: 16)
                s += "\\u" + String(repeating: "0", count: 4 - h.count) + h
            default: s.unicodeScalars.append(u)
            }
        }
        return s + "\""
    }

    /// `2026-12-01T09:41:02.123Z`.
    static func rfc3339(_ ms: Int64) -> String {
        var t = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        var tm = Glibc.tm()
        gmtime_r(&t, &tm)
        func pad(_ n: Int32, _ w: Int) -> String {
            let d = String(n)
            return String(repeating: "0", count: max(0, w - d.count)) + d
        }
        let frac = Int32(((ms % 1000) + 1000) % 1000)
        return "\(pad(tm.tm_year + 1900, 4))-\(pad(tm.tm_mon + 1, 2))-\(pad(tm.tm_mday, 2))T"
            + "\(pad(tm.tm_hour, 2)):\(pad(tm.tm_min, 2)):\(pad(tm.tm_sec, 2)).\(pad(frac, 3))Z"
    }

    package static func nowMillis() -> Int64 { WallClock.millis() }
}
