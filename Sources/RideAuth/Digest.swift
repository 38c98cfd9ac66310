import COpenSSL
import RideCore

/// SHA-256 from libcrypto (already linked for tokens), for values that must be short and
/// fixed in size whatever was hashed: the server API's idempotency keys and request fingerprints.
public enum Digest {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        // SHA256 returns its output pointer; it fails only on a broken libcrypto.
        guard SHA256(bytes, bytes.count, &out) != nil else { fatalError("SHA-256 failed in libcrypto") }
        return out
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String { Hex.lower(sha256(bytes)) }
}
