import Foundation
import RideCore
import XCTest

/// A real HTTP receiver: Python's http.server in a child process, checking every signature with
/// Python's own hmac (not ours). Paths: /ok answers 200 to a valid signature (400 otherwise),
/// /status/N answers N, /hang answers after 30 s. Each request is one JSON line on stdout.
/// With a certificate and key it speaks HTTPS.
struct ReceiverDidNotStart: Error {}

/// The secret the webhook POST tests sign with, and a ride body they send.
let secret = Array("whsec_0123456789abcdef".utf8)
let rideJSON = Array(#"{"id":"r-1"}"#.utf8)

final class PythonReceiver {
    static let script = #"""
import hashlib, hmac, json, sys, threading, time
out = threading.Lock()
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
secret = sys.argv[1].encode()
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        sig = self.headers.get("RidePush-Signature", "")
        items = dict(p.split("=", 1) for p in sig.split(",") if "=" in p)
        expected = hmac.new(secret, items.get("t", "").encode() + b"." + body, hashlib.sha256).hexdigest()
        ok = hmac.compare_digest(expected, items.get("v1", ""))
        line = json.dumps({"path": self.path, "verified": ok, "event": self.headers.get("RidePush-Event-Id"),
                           "type": self.headers.get("Content-Type"), "host": self.headers.get("Host"),
                           "body": body.decode()}) + "\n"
        # One write under a lock: print() from concurrent handler threads interleaves lines.
        with out:
            sys.stdout.write(line)
            sys.stdout.flush()
        if self.path == "/hang":
            time.sleep(30)
        status = int(self.path.split("/")[2]) if self.path.startswith("/status/") else (200 if ok else 400)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
ThreadingHTTPServer.daemon_threads = True
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
if len(sys.argv) > 2:
    import ssl
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[2], sys.argv[3])
    s.socket = tls.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"""#

    let process = Process()
    private let lines = Locked([String]())
    private(set) var port: UInt16 = 0

    init(secret: String, certificate: String? = nil, key: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, secret] + [certificate, key].compactMap { $0 }
        let out = Pipe()
        process.standardOutput = out
        let buffer = Locked(Data())
        out.fileHandleForReading.readabilityHandler = { [lines] handle in
            let chunk = handle.availableData
            buffer.withLock { data in
                data.append(chunk)
                while let newline = data.firstIndex(of: 0x0A) {
                    let line = String(decoding: data[data.startIndex..<newline], as: UTF8.self)
                    data.removeSubrange(data.startIndex...newline)
                    lines.withLock { $0.append(line) }
                }
            }
        }
        try process.run()
        guard let first = waitForLines(1, seconds: 10).first, let p = UInt16(first) else {
            process.terminate()
            throw ReceiverDidNotStart()
        }
        port = p
    }

    /// The request lines so far (the port line excluded), after waiting up to `seconds` for `count`.
    func requests(atLeast count: Int, seconds: Double = 5) -> [[String: Any]] {
        waitForLines(count + 1, seconds: seconds).dropFirst().compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The lines printed so far, once there are `count` (or `seconds` passed: a test failure).
    private func waitForLines(_ count: Int, seconds: Double) -> [String] {
        waitUntil(timeout: seconds, "\(count - 1) requests at the receiver") { lines.withLock { $0.count } >= count }
        return lines.withLock { $0 }
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
