import COpenSSL

/// The Sec-WebSocket-Accept value a server must answer for `key` (RFC 6455 §4.1), by
/// libcrypto's SHA-1 and base64: a bench that counts a half-broken handshake as "connected"
/// would measure the wrong thing.
func websocketAccept(key: String) -> String {
    let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
    var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
    SHA1(input, input.count, &digest)
    return Base64.encode(digest)
}

enum Base64 {
    /// Standard base64 with padding (EVP_EncodeBlock writes 4 bytes per 3 and a NUL).
    static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let n = EVP_EncodeBlock(&out, bytes, Int32(bytes.count))
        return String(decoding: out.prefix(Int(n)), as: UTF8.self)
    }
}
