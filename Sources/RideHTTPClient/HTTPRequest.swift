/// One outbound request, as `HTTPClient.submit` takes it.
public struct HTTPRequest: Sendable {
    public var method: String
    /// `http://` or `https://` only; no other scheme is ever fetched.
    public var url: String
    /// Sent as given, after libcurl's own (Host, Content-Length). A name or value that would
    /// split the request (CR, LF, a colon in the name) fails the request instead.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// Milliseconds for the whole transfer: resolving, connecting, TLS, sending, the full response.
    public var timeout: Int64
    /// Response body bytes kept; the rest is read and dropped (`HTTPResponse.bodyTruncated`).
    public var bodyLimit: Int

    public init(method: String = "GET", url: String, headers: [(name: String, value: String)] = [],
                body: [UInt8] = [], timeout: Int64 = 10_000, bodyLimit: Int = 1 << 20) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.bodyLimit = bodyLimit
    }

    /// Why the request cannot be sent as it is, or nil.
    var invalidReason: String? {
        guard !method.isEmpty, method.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return "invalid method \(method)" }
        for (name, value) in headers {
            guard !name.isEmpty, !name.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F || $0 == UInt8(ascii: ":") }),
                  !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                return "invalid header \(name)"
            }
        }
        return nil
    }
}

/// What the server answered: the final response (1xx interim responses are not kept).
public struct HTTPResponse: Sendable {
    public let status: Int
    /// In the order received; names as the server spelled them (HTTP/2 sends them lower-case).
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    public let bodyTruncated: Bool
    /// "1.1", "2", …: what the connection spoke.
    public let httpVersion: String
    /// Connections this transfer opened: 0 when it went over one already open (keep-alive, or
    /// another stream on an HTTP/2 connection).
    public let newConnections: Int

    /// The first header with this name, compared without case.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }
}

/// Why a request got no response.
public struct HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case resolve
        case connect
        case timeout
        /// The TLS handshake or connection failed (a plain-HTTP peer, no common cipher, …).
        case tls
        /// The peer's certificate did not verify: its chain (`verifyResult` is OpenSSL's X509_V_ERR_…)
        /// or, with `verifyResult` 0, its name against the URL's host (`message` is libcurl's).
        case peerNotVerified
        /// The request was refused before sending (`message` says why).
        case invalidRequest
        /// The client was shut down before the request finished.
        case cancelled
        case other
    }

    public let kind: Kind
    /// libcurl's message for the failure (or ours for `invalidRequest` and `cancelled`).
    public let message: String
    /// The CURLcode, 0 when libcurl was not involved.
    public let curlCode: Int32
    /// The system error of a failed connect (ECONNREFUSED, …), 0 when none.
    public let osErrno: Int32
    public let verifyResult: Int

    public init(kind: Kind, message: String, curlCode: Int32 = 0, osErrno: Int32 = 0, verifyResult: Int = 0) {
        self.kind = kind
        self.message = message
        self.curlCode = curlCode
        self.osErrno = osErrno
        self.verifyResult = verifyResult
    }

    public var description: String { message }
}
