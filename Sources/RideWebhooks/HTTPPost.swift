import COpenSSL
import Glibc
import RideHTTPClient

/// The HTTP client https webhook endpoints are verified with: its CA file is trusted besides
/// the system's store (`TLSClient(caFile:)`, the probe's `--ca-file`, `serve --outbound-ca-file`).
public typealias TLSClient = HTTPClient

/// One webhook POST through the outbound HTTP client, with a hard deadline over its whole life
/// (resolve, connect, TLS, the full answer). The answer's body is not kept: only its status
/// counts.
public enum HTTPPost {
    public static let defaultTimeout: Int64 = 5_000

    /// The client for callers that give none: the system's trust store only.
    static let system = HTTPClient()

    /// The request for one attempt.
    static func request(to url: WebhookURL, headers: [(String, String)], body: [UInt8], timeout: Int64) -> HTTPRequest {
        HTTPRequest(method: "POST", url: url.description,
                    headers: [("User-Agent", "RidePush-Webhooks/1"), ("Content-Type", "application/json")] + headers,
                    body: body, timeout: timeout, bodyLimit: 0)
    }

    /// Sends and waits: for tests and callers on threads that may block. `tls`: the client for
    /// the URL (nil: `system`).
    public static func send(to url: WebhookURL, headers: [(String, String)], body: [UInt8],
                            timeout: Int64 = defaultTimeout, tls: HTTPClient? = nil) -> DeliveryResult {
        result(url: url, (tls ?? system).send(request(to: url, headers: headers, body: body, timeout: timeout)))
    }

    /// How an attempt ended, in the words the outbox and `/metrics` have always used.
    static func result(url: WebhookURL, _ outcome: Result<HTTPResponse, HTTPClientError>) -> DeliveryResult {
        switch outcome {
        case .success(let response):
            return .status(response.status)
        case .failure(let error):
            switch error.kind {
            case .timeout:
                return .timeout
            case .connect where error.osErrno != 0:
                return .failed("connect: \(String(cString: strerror(error.osErrno)))")
            case .peerNotVerified:
                // libcurl checks the name itself after OpenSSL verified the chain: a verify
                // result of 0 means the name did not match, said as OpenSSL says it.
                let reason = error.verifyResult != 0 ? error.verifyResult
                    : Int(isIPAddress(url.host) ? X509_V_ERR_IP_ADDRESS_MISMATCH : X509_V_ERR_HOSTNAME_MISMATCH)
                return .failed("TLS: certificate not trusted: \(String(cString: X509_verify_cert_error_string(reason)))")
            case .tls:
                return .failed("TLS: \(error.message)")
            case .resolve, .connect, .invalidRequest, .cancelled, .other:
                return .failed(error.message)
            }
        }
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
