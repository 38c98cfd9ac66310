import RideCore
import RideProtocol
import RideService
import CLibWebSockets
import Synchronization

/// Refusals logged in the current second, process-wide: a client hammering a wrong path or
/// over its address limit gets every answer, the log at most ten lines a second.
private let refusalLog = Locked<(second: Int64, logged: Int, skipped: Int)>((0, 0, 0))

extension Shard {
    /// Answers a WebSocket upgrade we refuse with a real HTTP status and one line of JSON
    /// (`{"error":{"code":…,"message":…}}`), so curl, browsers and a proxy in front (which
    /// would say 502) see why, and logs it at warn. Returns what the filter callback returns.
    func refuseUpgrade(_ wsi: OpaquePointer, _ r: UpgradeRoute.Refusal) -> Int32 {
        refuseUpgrade(wsi, r.status, r.code, r.message)
    }

    func refuseUpgrade(_ wsi: OpaquePointer, _ status: UInt32, _ code: String, _ message: String) -> Int32 {
        let peer = peerName(wsi)
        let second = service.clock.now() / 1000
        let (log, skipped) = refusalLog.withLock { r -> (Bool, Int) in
            if r.second != second { r = (second, 0, r.skipped) }
            guard r.logged < 10 else { r.skipped += 1; return (false, 0) }
            r.logged += 1
            defer { r.skipped = 0 }
            return (true, r.skipped)
        }
        if log {
            Log.warn("refused WebSocket upgrade from \(peer) (\(status)): \(message)"
                     + (skipped > 0 ? " (\(skipped) earlier refusals not logged)" : ""),
                     ["peer": .string(peer), "status": .int(Int64(status)), "code": .string(code)])
        }
        answerAndClose(wsi, status, errorJSON(code, message))
        // Nonzero: lws does not upgrade and closes the connection after what was written.
        return 1
    }

    /// Writes a whole JSON answer at once and has the connection closed after it: for
    /// requests lws will not carry on with (a refused upgrade; a POST, whose body lws would
    /// wait for before any HTTP_WRITEABLE). The caller returns nonzero so lws hangs up.
    func answerAndClose(_ wsi: OpaquePointer, _ status: UInt32, _ json: [UInt8], allow: String? = nil) {
        var body = json
        body.append(UInt8(ascii: "\n"))
        var buf = [UInt8](repeating: 0, count: pre + 512)
        let written = buf.withUnsafeMutableBufferPointer { b -> Bool in
            let start = b.baseAddress! + pre
            var p: UnsafeMutablePointer<UInt8>? = start
            let end = b.baseAddress! + b.count - 1
            guard lws_add_http_common_headers(wsi, status, "application/json", lws_filepos_t(body.count), &p, end) == 0,
                  lws_add_http_header_by_name(wsi, "cache-control:", "no-store", 8, &p, end) == 0,
                  lws_add_http_header_by_name(wsi, "connection:", "close", 5, &p, end) == 0 else { return false }
            if let allow, lws_add_http_header_by_name(wsi, "allow:", allow, Int32(allow.utf8.count), &p, end) != 0 { return false }
            return lws_finalize_write_http_header(wsi, start, &p, end) == 0
        }
        guard written else { return }
        var framed = [UInt8](repeating: 0, count: pre) + body
        let n = framed.count - pre
        _ = framed.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, n, LWS_WRITE_HTTP_FINAL) }
    }

    /// One line per connection we close with a code, at a printed level for the ones an
    /// operator acts on (flooding, slow consumers), with the rider when a token named one.
    func logClose(_ s: Session, code: UInt16, reason: String) {
        var rider = ""
        if let a = s.conn.access { rider = a.rider }
        let message = "closing connection from \(s.peer) with \(code): \(reason)"
        let fields: Log.Fields = ["peer": .string(s.peer), "rider": .string(rider), "close_code": .int(Int64(code))]
        if code == 1008 || code == 4008 { Log.warn(message, fields) } else { Log.info(message, fields) }
    }
}
