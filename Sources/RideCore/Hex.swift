/// Lower-case hex, two digits a byte: webhook ids and signatures, SHA-256 digests, and the
/// PostgreSQL store's bytea parameters (what `decode(…, 'hex')` reads). Built as bytes: a
/// `String(format: "%02x")` per byte was most of a PostgreSQL node's CPU per transition.
public enum Hex {
    public static func lower<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
