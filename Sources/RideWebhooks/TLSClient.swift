import COpenSSL
import Glibc
import RideCore

/// TLS for `https://` webhook URLs, through libssl on the sender's non-blocking socket and the
/// same deadline as the rest of the request. The peer is always verified: the chain against the
/// system's trust store (or `caFile`, for a private CA) and the name against the URL's host
/// (DNS name or IP address). TLS 1.2 at least.
public final class TLSClient: Sendable {
    public struct SetupError: Error, Equatable, CustomStringConvertible, Sendable {
        public let message: String
        public var description: String { message }
    }

    /// The configured SSL_CTX; libssl allows many SSL objects made from one context on several
    /// threads, the lock only keeps that true while a session is being created from it.
    private let context: Locked<OpaquePointer>

    /// `caFile`: PEM certificates to trust instead of the system store.
    public init(caFile: String? = nil) throws(SetupError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw SetupError(message: "TLS: cannot create a context") }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(ctx, $0, nil) } ?? SSL_CTX_set_default_verify_paths(ctx)
        guard loaded == 1, ridepush_SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 else {
            SSL_CTX_free(ctx)
            ERR_clear_error()
            throw SetupError(message: caFile.map { "TLS: cannot read CA certificates from \($0)" } ?? "TLS: cannot load the system's CA certificates")
        }
        context = Locked(ctx)
    }

    deinit {
        context.withLock { SSL_CTX_free($0) }
    }

    /// The default for https URLs: the system trust store, made on first use.
    static let system: Result<TLSClient, SetupError> = Result { () throws(SetupError) in try TLSClient() }

    /// A handshaken session over the connected `fd`, or why not.
    func connect(fd: Int32, host: String, deadline: Int64) -> Result<TLSSession, HTTPPost.Failure> {
        let made: OpaquePointer? = context.withLock { SSL_new($0) }
        guard let ssl = made else { return .failure(.init(result: .failed("TLS: cannot create a session"))) }
        let session = TLSSession(ssl: ssl)
        SSL_set_fd(ssl, fd)
        if isIPAddress(host) {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            ridepush_SSL_set_tlsext_host_name(ssl, host)
            SSL_set1_host(ssl, host)
        }
        if let failure = session.drive(fd: fd, deadline: deadline, { SSL_connect(ssl) }).failure {
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK) {
                return .failure(.init(result: .failed("TLS: certificate not trusted: \(String(cString: X509_verify_cert_error_string(verify)))")))
            }
            return .failure(failure)
        }
        return .success(session)
    }

    private func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

/// One TLS connection; owns its SSL object (freed by `close`), used by one sender worker.
final class TLSSession {
    private let ssl: OpaquePointer

    init(ssl: OpaquePointer) { self.ssl = ssl }

    func close() {
        SSL_free(ssl)
    }

    func write(fd: Int32, _ bytes: [UInt8], deadline: Int64) -> HTTPPost.Failure? {
        var offset = 0
        while offset < bytes.count {
            let step = drive(fd: fd, deadline: deadline) {
                bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32(min($0.count - offset, Int(Int32.max)))) }
            }
            switch step {
            case .success(let n) where n > 0: offset += Int(n)
            case .success: return .init(result: .failed("TLS: connection closed while sending"))
            case .failure(let failure): return failure
            }
        }
        return nil
    }

    /// Bytes read into `chunk`: > 0, or 0 when the peer closed.
    func read(fd: Int32, into chunk: inout [UInt8], deadline: Int64) -> Result<Int, HTTPPost.Failure> {
        let count = chunk.count
        return chunk.withUnsafeMutableBytes { raw in
            drive(fd: fd, deadline: deadline) { SSL_read(ssl, raw.baseAddress, Int32(count)) }.map(Int.init)
        }
    }

    /// Runs a non-blocking libssl call until it makes progress, waiting on the socket for what
    /// it wants, within the deadline. A clean close reads as 0.
    func drive(fd: Int32, deadline: Int64, _ call: () -> Int32) -> Result<Int32, HTTPPost.Failure> {
        while true {
            ERR_clear_error()
            let r = call()
            if r > 0 { return .success(r) }
            let error = SSL_get_error(ssl, r)
            switch error {
            case SSL_ERROR_WANT_READ:
                guard HTTPPost.wait(fd, Int16(POLLIN), deadline: deadline) else { return .failure(.init(result: .timeout)) }
            case SSL_ERROR_WANT_WRITE:
                guard HTTPPost.wait(fd, Int16(POLLOUT), deadline: deadline) else { return .failure(.init(result: .timeout)) }
            case SSL_ERROR_ZERO_RETURN:
                return .success(0)
            case SSL_ERROR_SYSCALL where r == 0:
                // EOF without close_notify: many servers close that way after Connection: close.
                return .success(0)
            default:
                var text = [CChar](repeating: 0, count: 256)
                let code = ERR_get_error()
                ERR_error_string_n(code, &text, text.count)
                ERR_clear_error()
                let reason = code == 0 ? "TLS error \(error)" : String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                return .failure(.init(result: .failed("TLS: \(reason)")))
            }
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
