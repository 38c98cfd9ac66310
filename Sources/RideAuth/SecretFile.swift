import Foundation

/// The secret `serve` generates when none is configured, kept beside the SQLite store so tokens
/// (the printed links, `ride watch`, the console) outlive a restart, and so `ridepush token`
/// can sign for that server. The file holds 64 hex digits (32 random bytes) and a newline;
/// those 64 characters are the HS256 key, so `--jwt-secret-file` reads the same file the same way.
public enum SecretFile {
    public static let name = "ridepush.secret"

    /// `ridepush.secret` in the folder of the store file `store`.
    public static func path(besideStore store: String) -> String {
        URL(fileURLWithPath: store).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// The secret in `path`, or nil when there is no such file.
    public static func read(_ path: String) throws(SecretError) -> [UInt8]? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return try loadSecret(file: path, environment: [:])
    }

    /// The secret in `path`, made first if the file does not exist: written to a private
    /// temporary file (mode 0600, fsynced) and linked into place, so a reader never sees a
    /// partial file and two servers starting at once end up with the same secret.
    /// `created` tells whether this call made it.
    public static func readOrCreate(_ path: String) throws(SecretError) -> (secret: [UInt8], created: Bool) {
        if let s = try read(path) { return (s, false) }
        let text = Array((TokenSigner.randomSecret().map { String(format: "%02x", $0) }.joined() + "\n").utf8)
        let tmp = path + ".\(getpid()).tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SecretError("cannot create \(tmp): \(String(cString: strerror(errno)))") }
        defer { unlink(tmp) }
        let wrote = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard wrote == text.count, synced else { throw SecretError("cannot write \(tmp): \(String(cString: strerror(errno)))") }
        // link(2) fails if the name exists: whoever linked first wins, and the loser reads it.
        if link(tmp, path) != 0 {
            guard errno == EEXIST, let s = try read(path) else {
                throw SecretError("cannot create \(path): \(String(cString: strerror(errno)))")
            }
            return (s, false)
        }
        let dir = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { _ = fsync(dir); close(dir) }
        return (Array(text.dropLast()), true)
    }

    /// A secret file others may read is a warning: anyone who reads it can sign tokens.
    public static func looseMode(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & 0o077 != 0 else { return nil }
        return String(st.st_mode & 0o777, radix: 8)
    }
}
