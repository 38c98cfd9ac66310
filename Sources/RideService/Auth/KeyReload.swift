import RideAuth

extension RideServer {
    /// SIGHUP: re-reads `--jwks-file` / `--jwt-public-key` on the caller's thread (the signal
    /// thread, never a service thread) and swaps the set in whole. A file that fails to load
    /// leaves the old keys in force. Open connections are untouched: a session keeps the claims
    /// it authenticated with, and the new keys judge the next token it sends.
    package func reloadKeys() {
        guard let verifier, config.jwksFile != nil || config.jwtPublicKeyFile != nil else {
            Log.info("SIGHUP: no --jwks-file or --jwt-public-key to reload")
            return
        }
        do {
            try verifier.reload(jwksFile: config.jwksFile, publicKeyFile: config.jwtPublicKeyFile)
        } catch {
            Log.error("SIGHUP: keys not reloaded, the previous \(verifier.keys.keys.count) stay in force: \(error.message)",
                      ["keys": .int(Int64(verifier.keys.keys.count))])
            return
        }
        for note in verifier.keys.skipped { Log.info("SIGHUP: \(note)") }
        let kids = verifier.keys.keys.map { $0.kid ?? "(no kid)" }
        Log.info("SIGHUP: keys reloaded: \(kids.joined(separator: ", "))",
                 ["keys": .int(Int64(kids.count)), "kids": .string(kids.joined(separator: ","))])
    }
}
