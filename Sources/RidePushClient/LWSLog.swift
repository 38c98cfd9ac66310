#if !canImport(Darwin)
import CLibWebSockets
import RideCore

/// libwebsockets has one log level and one line sink per process. The SDK is silent unless
/// asked: with no client holding a log handler lws logs nothing (its default prints a banner
/// and notices to stderr, "N: LWS: 4.1.6-, loglevel 7"); otherwise its errors and warnings go
/// to every live client's handler.
enum LWSLog {
    typealias Handler = @Sendable (RidePushClient.LogLevel, String) -> Void

    // The handlers and lws's setting change together under this lock, so two clients coming
    // and going on two threads cannot leave lws set for the wrong one.
    // `silent` is what lws was last set to: it is set again only when that changes, since lws
    // reads its level unlocked on its own thread.
    private static let handlers = Locked<(next: UInt64, all: [UInt64: Handler], silent: Bool?)>((0, [:], nil))

    static func add(_ handler: @escaping Handler) -> UInt64 {
        handlers.withLock { h in
            h.next += 1
            h.all[h.next] = handler
            apply(&h)
            return h.next
        }
    }

    static func remove(_ key: UInt64) {
        handlers.withLock { h in
            h.all[key] = nil
            apply(&h)
        }
    }

    /// Before the client context exists: its creation logs too.
    static func applyCurrent() {
        handlers.withLock { h in apply(&h) }
    }

    static func emit(_ level: RidePushClient.LogLevel, _ line: String) {
        let all = handlers.withLock { Array($0.all.values) }
        for h in all { h(level, line) }
    }

    private static func apply(_ h: inout (next: UInt64, all: [UInt64: Handler], silent: Bool?)) {
        let silent = h.all.isEmpty
        guard silent != h.silent else { return }
        h.silent = silent
        lws_set_log_level(silent ? 0 : LLL_ERR | LLL_WARN, silent ? nil : lwsLogLine)
    }
}

/// lws's sink: its line ends with a newline, and starts with lws's own time and level tag.
private func lwsLogLine(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line else { return }
    var text = String(cString: line)
    while text.last == "\n" { text.removeLast() }
    LWSLog.emit(level & LLL_ERR != 0 ? .error : level & LLL_WARN != 0 ? .warning : .debug, "libwebsockets: " + text)
}
#endif
