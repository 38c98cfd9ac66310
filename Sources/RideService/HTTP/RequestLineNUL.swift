/// Why this exists: libwebsockets 4.1 %-decodes the request line inside its parser and, on a
/// decoded NUL, drops the connection with nothing written, before any callback of ours runs
/// (`lws_parse_urldecode` returns -1, `lws_handshake_server` nukes the connection; lws 4.2 made
/// that deliberate). `GET /%00` is worse: lws keeps that NUL without counting it and routes the
/// request as `/`. So the adapter looks at a plain-HTTP connection's waiting bytes with
/// `MSG_PEEK` while it awaits a request (poll_epoll.c's hook, before lws reads them): when they
/// start with a request line whose target holds a NUL, it writes `answer` itself and lws's own
/// drop then closes the connection behind it. This type decides and makes the answer; it does
/// no I/O.
package enum RequestLineNUL {
    /// How much the adapter peeks: a request line longer than this is not checked (lws refuses
    /// a target over its 4,096-byte header buffer by itself).
    package static let peekLimit = 4096

    /// True when `bytes` start with a complete HTTP/1 request line, `METHOD SP target SP
    /// HTTP/1.x` up to its LF, whose target holds `%00` or a raw NUL. Anything else (a line not
    /// complete in these bytes, a body, a TLS record, HTTP/2's preface) is false: lws reads it
    /// as before, and never sees an answer it did not make.
    package static func found(in bytes: UnsafeRawBufferPointer) -> Bool {
        let b = bytes.bindMemory(to: UInt8.self)
        var i = 0
        // The method: a token of capital letters (every method lws knows is one).
        while i < b.count, i < 16, b[i] >= UInt8(ascii: "A"), b[i] <= UInt8(ascii: "Z") { i += 1 }
        guard i > 0, i < b.count, b[i] == UInt8(ascii: " ") else { return false }
        i += 1
        let targetStart = i
        var nul = false
        while i < b.count, b[i] != UInt8(ascii: " ") {
            switch b[i] {
            case 0: nul = true
            case UInt8(ascii: "\r"), UInt8(ascii: "\n"): return false  // no version: not a line this checks
            case UInt8(ascii: "%"):
                if i + 2 < b.count, b[i + 1] == UInt8(ascii: "0"), b[i + 2] == UInt8(ascii: "0") { nul = true }
            default: break
            }
            i += 1
        }
        guard i > targetStart, i < b.count else { return false }
        i += 1
        // `HTTP/1.` and a digit, then the line's end: the whole line is in these bytes.
        let version = Array("HTTP/1.".utf8)
        guard b.count - i >= version.count + 2 else { return false }
        for k in 0..<version.count where b[i + k] != version[k] { return false }
        i += version.count
        guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return false }
        i += 1
        if b[i] == UInt8(ascii: "\r") { i += 1 }
        guard i < b.count, b[i] == UInt8(ascii: "\n") else { return false }
        return nul
    }

    package static func found(in bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { found(in: $0) }
    }

    /// The bytes the adapter writes: a whole HTTP/1.1 `400` with the JSON error every refusal
    /// has, `connection: close`, and the headers every response carries (`headers`, as lws
    /// takes them: lower-case names ending in a colon).
    package static func answer(headers: [(name: String, value: String)]) -> [UInt8] {
        let body = HTTPAnswer.errorJSON("bad_request",
            "a NUL (%00) in the request's path or query: no path or parameter may contain one")
        var head = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: \(body.count)\r\n"
        head += "cache-control: no-store\r\nconnection: close\r\n"
        for h in headers { head += "\(h.name) \(h.value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }
}
