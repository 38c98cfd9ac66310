import CCurl
import Glibc

/// One request on its easy handle, from `configure` to `finish`. Owned by the loop thread once
/// queued: its buffers are written by libcurl's callbacks there, and read there when done.
final class Transfer {
    let request: HTTPRequest
    let completion: @Sendable (Result<HTTPResponse, HTTPClientError>) -> Void
    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private var headers: [(name: String, value: String)] = []
    private var body: [UInt8] = []
    private var truncated = false

    init?(request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPClientError>) -> Void) {
        guard let easy = curl_easy_init() else { return nil }
        self.request = request
        self.completion = completion
        self.easy = easy
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Sets every option; a CURLcode other than CURLE_OK means this libcurl cannot do what we need.
    func configure(caFile: String?) -> CURLcode {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var steps: [CURLcode] = [
            ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer),
            ccurl_easy_setopt_string(easy, CURLOPT_URL, request.url),
            ccurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"),
            // HTTP/2 when the TLS peer offers it in ALPN, HTTP/1.1 otherwise and over plain http.
            ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)),
            // Wait for a connection being set up to the same host rather than open a second one:
            // if it turns out to speak HTTP/2 this transfer becomes one more stream on it.
            ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1),
            ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(clamping: max(1, request.timeout))),
            // Signals are no way to time out a resolve in a threaded server (and libcurl's
            // threaded resolver does not need them).
            ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1),
            // The defaults, spelled out: the chain and the name are always verified.
            ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1),
            ccurl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2),
            ccurl_easy_setopt_long(easy, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2),
            ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, transferWrite),
            ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me),
            ccurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, transferHeader),
            ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me),
        ]
        // A private CA, trusted besides the system's store (libcurl keeps its CA directory).
        if let caFile { steps.append(ccurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
        switch request.method {
        case "GET" where request.body.isEmpty:
            break
        case "HEAD":
            steps.append(ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1))
        default:
            steps.append(ccurl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)))
            steps.append(request.body.withUnsafeBytes { raw in
                ccurl_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(errorBuffer)))
            })
            if request.method != "POST" { steps.append(ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)) }
        }
        // libcurl adds "Expect: 100-continue" to larger HTTP/1.1 bodies and waits up to a second
        // for an answer many servers never send; an empty value removes the header.
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + ["Expect:"] {
            headerList = curl_slist_append(headerList, line)
        }
        steps.append(ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList))
        return steps.first { $0 != CURLE_OK } ?? CURLE_OK
    }

    fileprivate func received(body chunk: UnsafeBufferPointer<UInt8>) {
        let room = max(0, request.bodyLimit - body.count)
        body += chunk.prefix(room)
        if chunk.count > room { truncated = true }
    }

    fileprivate func received(headerLine line: UnsafeBufferPointer<UInt8>) {
        var end = line.count
        while end > 0, line[end - 1] == 0x0D || line[end - 1] == 0x0A { end -= 1 }
        let text = Substring(String(decoding: line.prefix(end), as: UTF8.self))
        // A status line starts each response (interim 1xx ones too): keep only the last's headers.
        if text.hasPrefix("HTTP/") { headers.removeAll(); return }
        guard let colon = text.firstIndex(of: ":") else { return }
        let value = text[text.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
        headers.append((String(text[..<colon]), String(value)))
    }

    /// Called once, on the loop thread, when libcurl is done with the transfer.
    func finish(_ code: CURLcode) {
        guard code == CURLE_OK else { return completion(.failure(error(code))) }
        var status = 0
        var version = 0
        var connects = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        let versionName = switch version {
        case Int(CURL_HTTP_VERSION_1_0): "1.0"
        case Int(CURL_HTTP_VERSION_1_1): "1.1"
        case Int(CURL_HTTP_VERSION_2_0): "2"
        case Int(CURL_HTTP_VERSION_3): "3"
        default: "unknown"
        }
        completion(.success(HTTPResponse(status: status, headers: headers, body: body, bodyTruncated: truncated,
                                         httpVersion: versionName, newConnections: connects)))
    }

    func fail(_ error: HTTPClientError) { completion(.failure(error)) }

    private func error(_ code: CURLcode) -> HTTPClientError {
        let buffered = String(cString: errorBuffer)
        let message = buffered.isEmpty ? String(cString: curl_easy_strerror(code)) : buffered
        var osErrno = 0
        _ = ccurl_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &osErrno)
        var verify = 0
        let kind: HTTPClientError.Kind
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: kind = .resolve
        case CURLE_COULDNT_CONNECT: kind = .connect
        case CURLE_OPERATION_TIMEDOUT: kind = .timeout
        case CURLE_PEER_FAILED_VERIFICATION:
            kind = .peerNotVerified
            _ = ccurl_easy_getinfo_long(easy, CURLINFO_SSL_VERIFYRESULT, &verify)
            // libcurl checks the name itself once OpenSSL has verified the chain, before it
            // records OpenSSL's result: a name mismatch leaves its placeholder !X509_V_OK (1).
            if verify == 1 { verify = 0 }
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
             CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
             CURLE_SSL_CRL_BADFILE, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_ENGINE_INITFAILED,
             CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_USE_SSL_FAILED:
            kind = .tls
        default: kind = .other
        }
        return HTTPClientError(kind: kind, message: message, curlCode: Int32(code.rawValue),
                               osErrno: Int32(clamping: osErrno), verifyResult: verify)
    }
}

// libcurl's callbacks: C function pointers, so no captures; the transfer comes back as `user`.

private func transferWrite(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let data, let user else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
    transfer.received(body: UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: size * count))
    return size * count
}

private func transferHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let data, let user else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(user).takeUnretainedValue()
    transfer.received(headerLine: UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: size * count))
    return size * count
}
