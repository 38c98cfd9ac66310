import Foundation
import Glibc
import XCTest

/// A real HTTP/1.1 server with keep-alive: Python's http.server in a child process on a free
/// port (printed on its first line). Every method answers "METHOD PATH BODY" with an
/// `X-Test: yes` header; /hang answers after 30 s; /big answers 100,000 bytes. With a
/// certificate and key it speaks HTTPS.
final class PythonServer {
    static let script = #"""
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path == "/hang":
            time.sleep(30)
        out = b"x" * 100000 if self.path == "/big" else b"%s %s %s" % (self.command.encode(), self.path.encode(), body)
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("X-Test", "yes")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = do_DELETE = answer
ThreadingHTTPServer.daemon_threads = True
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
if len(sys.argv) > 1:
    import ssl
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[1], sys.argv[2])
    s.socket = tls.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"""#

    let process = Process()
    let port: UInt16

    init(certificate: String? = nil, key: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script] + [certificate, key].compactMap { $0 }
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        // The first line, or end of file if Python died first: either comes without a timer.
        var line = Data()
        while let byte = try out.fileHandleForReading.read(upToCount: 1), let b = byte.first, b != 0x0A { line.append(b) }
        guard let p = UInt16(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw XCTSkip("python3 http.server did not start")
        }
        port = p
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// A CA and a server certificate it signed (for 127.0.0.1 and localhost unless `names` says
/// otherwise), made by `openssl` in a temporary folder.
struct TestPKI {
    let directory: String
    var ca: String { "\(directory)/ca.pem" }
    var certificate: String { "\(directory)/server.pem" }
    var key: String { "\(directory)/server.key" }

    init(names: String = "IP:127.0.0.1,DNS:localhost") throws {
        directory = NSTemporaryDirectory() + "ridepush-http-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try Self.openssl(["req", "-x509"] + ec + ["-subj", "/CN=ridepush-test-ca", "-days", "1",
                                                  "-keyout", "\(directory)/ca.key", "-out", ca])
        try Self.openssl(["req"] + ec + ["-subj", "/CN=ridepush-test", "-keyout", key, "-out", "\(directory)/server.csr"])
        try "subjectAltName=\(names)\n".write(toFile: "\(directory)/ext", atomically: true, encoding: .utf8)
        try Self.openssl(["x509", "-req", "-in", "\(directory)/server.csr", "-CA", ca, "-CAkey", "\(directory)/ca.key",
                          "-CAcreateserial", "-days", "1", "-extfile", "\(directory)/ext", "-out", certificate])
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    private static func openssl(_ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl"] + arguments
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "openssl \(arguments.first ?? "")")
    }
}

/// A port nothing listens on: bound, read, closed.
func closedPort() -> UInt16 {
    let (fd, port) = boundLoopbackSocket()
    close(fd)
    return port
}

/// A TCP socket bound to a free port of 127.0.0.1, not listening yet, and that port.
func boundLoopbackSocket() -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
        _ = bind(fd, p, length)
        _ = getsockname(fd, p, &length)
    } }
    return (fd, UInt16(bigEndian: address.sin_port))
}

/// True once something accepts TCP connections on 127.0.0.1:`port`, false after `seconds`.
func waitForListener(port: UInt16, seconds: Double) -> Bool {
    waitUntil(timeout: seconds, "a listener on port \(port)") {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        } }
        close(fd)
        return connected
    }
}
