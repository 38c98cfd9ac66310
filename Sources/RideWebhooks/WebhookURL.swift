/// A `--webhook` URL: `http[s]://host[:port][/path][?query]`.
public struct WebhookURL: Sendable, Equatable, CustomStringConvertible {
    /// https: TLS, the peer verified (`TLSClient`).
    public let secure: Bool
    public let host: String
    public let port: UInt16
    /// Path and query as sent in the request line, "/" at least.
    public let target: String

    public struct ParseError: Error, Equatable, CustomStringConvertible, Sendable {
        public let message: String
        public var description: String { message }
    }

    public init(_ text: String) throws(ParseError) {
        func fail(_ why: String) -> ParseError { ParseError(message: "webhook URL \(text): \(why)") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw fail("spaces, control or non-ASCII characters") }
        let lower = text.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else { throw fail("must start with http:// or https://") }
        secure = lower.hasPrefix("https://")
        let rest = text.dropFirst(secure ? 8 : 7)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = String(rest[authorityEnd...])
        if let fragment = target.firstIndex(of: "#") { target = String(target[..<fragment]) }
        if target.isEmpty { target = "/" } else if target.hasPrefix("?") { target = "/" + target }
        guard !authority.contains("@") else { throw fail("credentials in the URL are not supported (sign with --webhook-secret-file)") }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("unclosed [ in the host") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected text after ]") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw fail("no host") }
        var port: UInt16 = secure ? 443 : 80
        if let portText {
            guard let p = UInt16(portText), p > 0 else { throw fail("port must be 1-65535") }
            port = p
        }
        self.host = String(host)
        self.port = port
        self.target = target
    }

    /// The Host header's value.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? name : "\(name):\(port)"
    }

    public var description: String { (secure ? "https://" : "http://") + hostHeader + target }
}
