import RideService

/// `--jwks-url`, checked with the other options: https only, and the one source of the
/// identity provider's keys (a file reloaded on SIGHUP would replace the fetched set).
func jwksURL(_ url: String?, besideFiles: Bool) throws(ServerError) -> String? {
    guard let url else { return nil }
    if besideFiles {
        throw ServerError("--jwks-url goes without --jwks-file and --jwt-public-key: the keys come from one place")
    }
    if let why = JWKSFetcher.refusal(url) { throw ServerError(why) }
    return url
}

/// The first fetch, before the server starts (at most the fetch's 10 s timeout): with the
/// provider up the server starts with its keys; with it down it starts without, refusing the
/// provider's tokens and /healthz degraded until the fetch thread gets a set (docs/jwks.md).
func firstKeyFetch(_ url: String, config c: inout ServerConfig) throws(ServerError) -> JWKSFetcher {
    let fetcher: JWKSFetcher
    do { fetcher = try JWKSFetcher(url: url, caFile: c.outboundCAFile) } catch {
        throw ServerError("--outbound-ca-file: \(error.message)")
    }
    c.keySource = fetcher.status
    c.identityKeys = fetcher.fetchFirst() ?? .empty
    return fetcher
}
