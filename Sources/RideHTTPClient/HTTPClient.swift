import CCurl
import Foundation
import RideCore

/// Outbound HTTP for the whole server (webhooks, and every other call out) on libcurl's multi
/// interface: one thread per client drives every request, HTTP/2 over TLS when the peer offers
/// it (requests to one host then share a connection as streams), HTTP/1.1 with keep-alive
/// otherwise. TLS is always verified, against the system's store and `caFile` when given.
/// Proxies come from the environment as for every libcurl program: `HTTPS_PROXY`/`https_proxy`,
/// `http_proxy`, `ALL_PROXY`, `NO_PROXY`.
public final class HTTPClient: Sendable {
    public struct SetupError: Error, Equatable, CustomStringConvertible, Sendable {
        public let message: String
        public var description: String { message }
    }

    /// PEM certificates trusted besides the system's store, for a private CA.
    public let caFile: String?
    private let loop: TransferLoop

    /// A client trusting the system's store only.
    public init() {
        caFile = nil
        loop = TransferLoop(caFile: nil)
    }

    /// `caFile`: a readable PEM file with at least one certificate, checked now so a wrong path
    /// is a start-up error rather than every request's. `maxHostConnections` (0: no cap) bounds
    /// the connections to one host; requests beyond them wait for a stream on those.
    public init(caFile: String?, maxHostConnections: Int = 0) throws(SetupError) {
        if let caFile { try Self.check(caFile: caFile) }
        self.caFile = caFile
        loop = TransferLoop(caFile: caFile, maxHostConnections: maxHostConnections)
    }

    /// What `init(caFile:)` checks, for a command line to refuse a wrong path before starting.
    public static func check(caFile: String) throws(SetupError) {
        let text = (try? String(contentsOfFile: caFile, encoding: .utf8)) ?? ""
        guard text.contains("-----BEGIN CERTIFICATE-----") else {
            throw SetupError(message: "TLS: cannot read CA certificates from \(caFile)")
        }
    }

    deinit {
        loop.stop()
    }

    /// Sends `request`; `completion` runs once, on the client's thread, so it must not block
    /// (hand the result to another thread for anything slow).
    public func submit(_ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPClientError>) -> Void) {
        if let reason = request.invalidReason {
            return completion(.failure(HTTPClientError(kind: .invalidRequest, message: reason)))
        }
        guard let transfer = Transfer(request: request, completion: completion) else {
            return completion(.failure(HTTPClientError(kind: .other, message: "libcurl: curl_easy_init failed")))
        }
        if !loop.enqueue(transfer) {
            completion(.failure(HTTPClientError(kind: .cancelled, message: "the HTTP client was shut down")))
        }
    }

    /// `submit`, waiting for the answer: for threads that may block (never the client's own
    /// completions). The request's timeout bounds the wait.
    public func send(_ request: HTTPRequest) -> Result<HTTPResponse, HTTPClientError> {
        let outcome = Locked<Result<HTTPResponse, HTTPClientError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        submit(request) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0! }
    }

    /// Transfers in progress end with `cancelled`; later submissions too.
    public func shutdown() {
        loop.stop()
    }

    /// curl_global_init before the first handle, once per process (Swift runs a static's
    /// initializer exactly once, whichever thread gets there first).
    static func globalInit() { _ = initialized }
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}
