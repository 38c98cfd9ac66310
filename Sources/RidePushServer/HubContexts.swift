import RideService
import CLibWebSockets
import Foundation

extension Hub {
    /// Creates a shard's context (on the calling thread; the shard's `run` services it), before
    /// the shard: lws calls back with the mailboxes, which know the shards.
    func makeContext() throws(ServerError) -> (OpaquePointer, vhost: OpaquePointer) {
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN_SERVER
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(mailboxes).toOpaque()
        info.options = UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
        // lws reads every peer address as the vhost's family: IPv6 only when we listen on it.
        if !listener.isIPv6 { info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        info.timeout_secs = UInt32(config.handshakeTimeout)
        // A socket that sends no complete request headers (slowloris) is closed this soon too.
        info.timeout_secs_ah_idle = UInt32(config.handshakeTimeout)
        info.retry_and_idle_policy = UnsafePointer(noValidityTimers)
        info.headers = UnsafePointer(securityHeaders)
        info.vhost_name = UnsafePointer(vhostName)
        if let (cert, key) = tlsPathsC {
            info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            info.ssl_cert_filepath = UnsafePointer(cert)
            info.ssl_private_key_filepath = UnsafePointer(key)
        }
        guard let ctx = lws_create_context(&info) else {
            if config.tlsCert != nil {
                throw ServerError("could not start TLS with --tls-cert \(config.tlsCert!) and --tls-key \(config.tlsKey!): check that both are readable PEM files and that the key matches the certificate")
            }
            throw ServerError("could not create the libwebsockets context")
        }
        guard let vhost = lws_get_vhost_by_name(ctx, vhostName) else {
            lws_context_destroy(ctx)
            throw ServerError("the libwebsockets context has no vhost")
        }
        return (ctx, vhost)
    }

    /// The C structures lws kept pointers to, freed once every context is destroyed (run's
    /// end), so a clean stop leaves nothing behind for LeakSanitizer (make asan) to report.
    func freeContextStructures() {
        for i in 0..<2 { free(UnsafeMutableRawPointer(mutating: protocols[i].name)) }
        protocols.deallocate()
        var option: UnsafePointer<lws_protocol_vhost_options>? = UnsafePointer(securityHeaders)
        while let o = option {
            free(UnsafeMutableRawPointer(mutating: o.pointee.name))
            free(UnsafeMutableRawPointer(mutating: o.pointee.value))
            option = o.pointee.next
        }
        securityHeaders.deallocate()
        noValidityTimers.deallocate()
        if let (cert, key) = tlsPathsC { free(cert); free(key) }
    }
}
