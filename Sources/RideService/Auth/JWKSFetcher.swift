import Foundation
import RideAuth
import RideCore
import RideHTTPClient
import Synchronization

/// `--jwks-url`: the identity provider's key set fetched over HTTPS (RideHTTPClient, TLS always
/// verified, `--outbound-ca-file` trusted besides the system's store) on a thread of its own,
/// never a service thread or the tick. A usable set is swapped into the verifier whole, as
/// SIGHUP swaps a `--jwks-file` (`TokenVerifier.reload`); a failed fetch or a body that is not
/// a usable JWKS leaves the last good set in force. When it fetches is `KeyRefresh`'s decision.
public final class JWKSFetcher: Sendable {
    public let url: String
    public let status: KeySourceStatus
    private let client: HTTPClient
    private let clock: @Sendable () -> Int64
    private struct State {
        var schedule: KeyRefresh
        var stopping = false
        var started = false
        /// The last answer taken, so only a changed set is logged.
        var lastBody: [UInt8]?
        var lastSkipped: [String] = []
    }
    private let state: Mutex<State>
    /// Wakes the fetch thread to look at the schedule again (an unknown kid, SIGHUP, stop);
    /// a spare signal only costs one more look.
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// The largest key set taken: providers publish a few keys, kilobytes.
    static let bodyLimit = 512 << 10
    /// One fetch, connect to last byte.
    static let timeout: Int64 = 10_000

    /// Why a URL is not one keys may come from, or nil: https only, so the keys that decide
    /// who may act here cannot be changed on the way.
    public static func refusal(_ url: String) -> String? {
        guard let parsed = URL(string: url), parsed.scheme?.lowercased() == "https", let host = parsed.host, !host.isEmpty else {
            return "--jwks-url must be an https:// URL (got \(url)); keys fetched over plain http could be replaced on the way"
        }
        return nil
    }

    /// `caFile`: `--outbound-ca-file`, checked by the caller.
    public init(url: String, caFile: String?, clock: @escaping @Sendable () -> Int64 = { monotonicMillis() }) throws(HTTPClient.SetupError) {
        self.url = url
        self.clock = clock
        client = try HTTPClient(caFile: caFile)
        status = KeySourceStatus(url: url, clock: clock)
        state = Mutex(State(schedule: KeyRefresh(now: clock())))
    }

    /// The first fetch, on the caller's thread before the server starts (bounded by the
    /// request's timeout): the set, or nil when the provider could not give one (logged; the
    /// server then starts without keys and the thread keeps trying).
    public func fetchFirst() -> KeySet? {
        let outcome = fetchOnce()
        let now = clock()
        state.withLock { $0.schedule.fetchStarted(now: now) }
        finishSchedule(outcome)
        return try? outcome.get().keys
    }

    /// Starts the fetch thread, swapping each new set into `verifier`, which from now on
    /// tells it of tokens naming an unknown kid.
    public func start(verifier: TokenVerifier) {
        verifier.onUnknownKid { [weak self] in self?.unknownKid() }
        let thread = Thread { [self] in run(verifier) }
        thread.name = "jwks-fetch"
        state.withLock { $0.started = true }
        thread.start()
    }

    /// A token named a kid the set lacks: called on a service thread, so it only notes it
    /// and wakes the fetch thread (which decides whether the rate allows a fetch now).
    public func unknownKid() {
        state.withLock { $0.schedule.unknownKid() }
        wake.signal()
    }

    /// SIGHUP: fetch now, whatever the schedule.
    public func refreshNow() {
        Log.info("SIGHUP: fetching --jwks-url \(url) now", ["url": .string(url)])
        let now = clock()
        state.withLock { $0.schedule.refreshNow(now: now) }
        wake.signal()
    }

    /// Ends the thread (a fetch in progress is cancelled) and waits for it.
    public func stop() {
        let started = state.withLock { s in
            defer { s.stopping = true }
            return s.started && !s.stopping
        }
        wake.signal()
        client.shutdown()
        if started { finished.wait() }
    }

    private func run(_ verifier: TokenVerifier) {
        defer { finished.signal() }
        while true {
            let now = clock()
            // nil: stop; 0: fetch now; otherwise how long to wait (ms).
            let wait: Int64? = state.withLock { s in
                if s.stopping { return nil }
                guard s.schedule.isDue(now: now) else { return max(1, min(s.schedule.nextFetch - now, 60_000)) }
                s.schedule.fetchStarted(now: now)
                return 0
            }
            guard let wait else { return }
            if wait > 0 {
                // Rechecked on the monotonic clock at every wake; the cap bounds the wait.
                _ = self.wake.wait(timeout: .now() + .milliseconds(Int(wait)))
                continue
            }
            let outcome = fetchOnce()
            if case .success(let fetched) = outcome { verifier.reload(fetched.keys) }
            if state.withLock({ $0.stopping }) { return }  // a fetch cancelled by `stop` is no failure to log
            finishSchedule(outcome)
        }
    }

    private typealias Fetched = (keys: KeySet, cacheControl: String?)
    private struct Failure: Error {
        let result: KeySourceStatus.Result
        let why: String
    }

    /// The next fetch after this one; a failure logged with what stays in force and when the
    /// next try is.
    private func finishSchedule(_ outcome: Result<Fetched, Failure>) {
        let now = clock()
        switch outcome {
        case .success(let fetched):
            state.withLock { $0.schedule.succeeded(now: now, cacheControl: fetched.cacheControl) }
        case .failure(let failure):
            let (nextFetch, failures) = state.withLock { s in
                s.schedule.failed(now: now)
                return (s.schedule.nextFetch, s.schedule.failures)
            }
            let next = "next try in \((nextFetch - now + 999) / 1000) s"
            let fields: Log.Fields = ["url": .string(url), "result": .string(failure.result.rawValue),
                                      "failures": .int(Int64(failures))]
            if status.age == nil {
                Log.error("--jwks-url \(url): \(failure.why); no key set yet, so the identity provider's tokens are refused; \(next)", fields)
            } else {
                Log.warn("--jwks-url \(url): \(failure.why); the last good key set stays in force; \(next)", fields)
            }
        }
    }

    /// One GET of the URL on this thread: the set and its Cache-Control, or why not (counted).
    private func fetchOnce() -> Result<Fetched, Failure> {
        let request = HTTPRequest(method: "GET", url: url, headers: [("Accept", "application/json")],
                                  timeout: Self.timeout, bodyLimit: Self.bodyLimit)
        let response: HTTPResponse
        switch client.send(request) {
        case .failure(let error):
            return failed(.unreachable, "no answer: \(error.message)")
        case .success(let r):
            response = r
        }
        guard response.status == 200 else {
            return failed(.status, "HTTP \(response.status) (redirects are not followed)")
        }
        guard !response.bodyTruncated else {
            return failed(.invalid, "the answer is larger than \(Self.bodyLimit >> 10) KiB")
        }
        let set: KeySet
        do { set = try KeySet.jwksSet(response.body, name: "JWKS") } catch {
            return failed(.invalid, error.message)
        }
        status.record(.ok, keys: set.keys.count)
        let cacheControl = response.header("Cache-Control")
        // Logged when the keys change (first fetch, a rotation), not at every refresh.
        let (lastBody, lastSkipped) = state.withLock { s in
            defer { (s.lastBody, s.lastSkipped) = (response.body, set.skipped) }
            return (s.lastBody, s.lastSkipped)
        }
        if response.body != lastBody {
            if set.skipped != lastSkipped { for note in set.skipped { Log.info("--jwks-url \(url): \(note)") } }
            let kids = set.keys.map { "\($0.kid ?? "(no kid)") \($0.algorithm.rawValue)" }
            Log.info("--jwks-url \(url): identity provider keys \(kids.joined(separator: ", ")); refreshed every \(KeyRefresh.interval(cacheControl: cacheControl) / 1000) s",
                     ["url": .string(url), "keys": .int(Int64(set.keys.count)),
                      "kids": .string(set.keys.map { $0.kid ?? "" }.joined(separator: ","))])
        }
        return .success((set, cacheControl))
    }

    private func failed(_ result: KeySourceStatus.Result, _ why: String) -> Result<Fetched, Failure> {
        status.record(result)
        return .failure(Failure(result: result, why: why))
    }
}
