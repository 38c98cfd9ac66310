import CLibWebSockets
import RideService

/// Where the service's log lines meet libwebsockets' logger: in text format both print through
/// lws (its `[time] W: message` look); in JSON format lws's own lines are re-framed as ours.
/// Levels printed either way: error, warn and info (lws' ERR, WARN, USER); notice is not.
public enum LogSink {
    static let printedLevels = LLL_ERR | LLL_WARN | LLL_USER

    /// Called once at start, before any thread logs.
    public static func install(_ format: Log.Format) {
        Log.use(format) { level, message in
            switch level {
            case .error: clws_log_err(message)
            case .warn: clws_log_warn(message)
            case .info: clws_log_user(message)
            case .notice: clws_log_notice(message)
            }
        }
        lws_set_log_level(printedLevels, format == .json ? lwsLine : nil)
    }

    /// libwebsockets' own lines (it formats them; we only frame them).
    private static let lwsLine: @convention(c) (Int32, UnsafePointer<CChar>?) -> Void = { level, text in
        guard let text else { return }
        var message = String(cString: text)
        while message.last == "\n" { message.removeLast() }
        let l: Log.Level = level & LLL_ERR != 0 ? .error
            : level & LLL_WARN != 0 ? .warn
            : level & LLL_USER != 0 ? .info : .notice
        guard l != .notice else { return }
        Log.emit(Log.line(l, message, [:], at: Log.nowMillis()))
    }
}
