#if !canImport(Darwin)
import CLibWebSockets
import Foundation
import RideCore

/// libwebsockets' client as a transport. Every connection of the process shares one lws
/// context on one thread of its own (`LWSClientLoop`), so a thousand feeds cost one thread.
public final class LWSTransport: RidePushTransport, @unchecked Sendable {  // the loop thread owns every var after `open`; others go through LWSClientLoop's Locked mailbox
    // Owned by the loop thread after `open` (lws is single-threaded per context); other
    // threads reach it only through the loop's locked mailbox.
    var wsi: OpaquePointer?
    var outbox: [[UInt8]] = []
    var closeCode: UInt16?
    var peerCloseCode: UInt16 = 1006
    var peerCloseReason = ""
    var rx: [UInt8] = []
    var events: (@Sendable (TransportEvent) -> Void)?
    var finished = false
    var strings: [UnsafeMutablePointer<CChar>?] = []
    let allowSelfSigned: Bool

    public init(allowSelfSigned: Bool = false) { self.allowSelfSigned = allowSelfSigned }

    deinit { for p in strings { free(p) } }

    public func open(_ url: URL, subprotocol: String, events: @escaping @Sendable (TransportEvent) -> Void) {
        LWSClientLoop.shared.post(.open(self, url, subprotocol, events))
    }

    public func send(_ text: [UInt8]) { LWSClientLoop.shared.post(.send(self, text)) }

    public func close(code: UInt16) { LWSClientLoop.shared.post(.close(self, code)) }

    /// Reports once: `.closed` or `.failed` is the transport's last word.
    func finish(_ ev: TransportEvent) {
        guard !finished else { return }
        finished = true
        events?(ev)
        events = nil
    }
}

/// The process's lws client context and its service thread.
final class LWSClientLoop: @unchecked Sendable {  // `mailbox` is Locked; `context` is set once in init, then the loop thread's
    enum Command {
        case open(LWSTransport, URL, String, @Sendable (TransportEvent) -> Void)
        case send(LWSTransport, [UInt8])
        case close(LWSTransport, UInt16)
    }

    static let shared = LWSClientLoop()

    private let mailbox = Locked<[Command]>([])  // not Mutex: ThreadSanitizer sees pthread locks only
    // Set once in init, then used only by the loop thread and lws_cancel_service.
    private var context: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolName = strdup("ride.v1")!

    private init() {
        protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protocols[0] = lws_protocols()
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = lwsClientCallback
        protocols[0].rx_buffer_size = 65536
        protocols[1] = lws_protocols()
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        LWSLog.applyCurrent()
        context = lws_create_context(&info)
        let thread = Thread { [self] in
            guard let ctx = context else { return }
            while true { if lws_service(ctx, 0) < 0 { break } }
        }
        thread.name = "RidePushClient lws"
        thread.start()
    }

    func post(_ c: Command) {
        mailbox.withLock { $0.append(c) }
        if let context { lws_cancel_service(context) } else if case .open(let t, _, _, let events) = c {
            events(.failed("libwebsockets could not create a client context"))
            _ = t
        }
    }

    /// Loop thread: everything other threads handed over since the last wake.
    func drain() {
        let commands = mailbox.withLock { m -> [Command] in
            defer { m.removeAll(keepingCapacity: true) }
            return m
        }
        for c in commands {
            switch c {
            case .open(let t, let url, let proto, let events):
                t.events = events
                connect(t, url, proto)
            case .send(let t, let bytes):
                guard let wsi = t.wsi, !t.finished else { continue }
                t.outbox.append(bytes)
                lws_callback_on_writable(wsi)
            case .close(let t, let code):
                guard let wsi = t.wsi, !t.finished else { continue }
                t.closeCode = code
                // The app moved on: nothing more is reported for this transport.
                t.events = nil
                lws_callback_on_writable(wsi)
            }
        }
    }

    private func connect(_ t: LWSTransport, _ url: URL, _ proto: String) {
        guard let context, let scheme = url.scheme, scheme == "ws" || scheme == "wss", let host = url.host, !host.isEmpty else {
            return t.finish(.failed("\(url.absoluteString): expected ws://HOST:PORT/PATH or wss://…"))
        }
        let port = url.port ?? (scheme == "wss" ? 443 : 80)
        var path = url.path.isEmpty ? "/" : url.path
        if let q = url.query { path += "?" + q }
        let hostHeader = url.port == nil ? host : "\(host):\(port)"
        // Kept for the transport's life: lws may read them after this call returns.
        t.strings = [strdup(host), strdup(path), strdup(hostHeader), strdup(proto)]
        let cHost = t.strings[0], cPath = t.strings[1], cHostHeader = t.strings[2], cProto = t.strings[3]
        var ci = lws_client_connect_info()
        ci.context = context
        ci.port = Int32(port)
        ci.address = UnsafePointer(cHost)
        ci.path = UnsafePointer(cPath)
        ci.host = UnsafePointer(cHostHeader)
        // No Origin header: a device is not a browser, and --allow-origin must not lock it out.
        ci.origin = nil
        ci.protocol = UnsafePointer(cProto)
        if scheme == "wss" {
            ci.ssl_connection = Int32(LCCSCF_USE_SSL.rawValue)
            if t.allowSelfSigned {
                ci.ssl_connection |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue)
            }
        }
        // Retained while lws may call back for it; released when it reports its end.
        ci.opaque_user_data = Unmanaged.passRetained(t).toOpaque()
        let wsi = lws_client_connect_via_info(&ci)
        // A connection that fails at once may already have been reported (and released) by
        // CLIENT_CONNECTION_ERROR inside the call.
        guard !t.finished else { return }
        if let wsi {
            t.wsi = wsi
        } else {
            Unmanaged<LWSTransport>.fromOpaque(ci.opaque_user_data).release()
            t.finish(.failed("cannot connect to \(url.absoluteString)"))
        }
    }
}

private func transport(_ wsi: OpaquePointer?) -> LWSTransport? {
    guard let wsi, let p = lws_get_opaque_user_data(wsi) else { return nil }
    return Unmanaged<LWSTransport>.fromOpaque(p).takeUnretainedValue()
}

/// lws forgets the connection after these; the retain taken in `connect` goes with it.
private func release(_ wsi: OpaquePointer?, _ t: LWSTransport) {
    t.wsi = nil
    lws_set_opaque_user_data(wsi, nil)
    Unmanaged.passUnretained(t).release()
}

func lwsClientCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                       _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    switch reason {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        guard let wsi, let ctx = lws_get_context(wsi), let u = lws_context_user(ctx) else { return 0 }
        Unmanaged<LWSClientLoop>.fromOpaque(u).takeUnretainedValue().drain()
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        guard let t = transport(wsi) else { return 0 }
        t.events?(.opened)
        if !t.outbox.isEmpty || t.closeCode != nil { lws_callback_on_writable(wsi) }
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        guard let t = transport(wsi) else { return -1 }
        if let code = t.closeCode {
            lws_close_reason(wsi, lws_close_status(rawValue: UInt32(code)), nil, 0)
            return -1
        }
        guard !t.outbox.isEmpty else { return 0 }
        let frame = t.outbox.removeFirst()
        let pre = Int(clws_pre())
        var buf = [UInt8](repeating: 0, count: pre + frame.count)
        buf.replaceSubrange(pre..., with: frame)
        let n = buf.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, frame.count, LWS_WRITE_TEXT) }
        if n < frame.count { return -1 }
        if !t.outbox.isEmpty { lws_callback_on_writable(wsi) }
    case LWS_CALLBACK_CLIENT_RECEIVE:
        guard let t = transport(wsi) else { return 0 }
        if let input { t.rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: len)) }
        guard t.rx.count <= 1 << 20 else { return -1 }
        if lws_is_final_fragment(wsi) != 0, lws_remaining_packet_payload(wsi) == 0 {
            let message = t.rx
            t.rx.removeAll(keepingCapacity: true)
            t.events?(.message(message))
        }
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        guard let t = transport(wsi), let input, len >= 2 else { return 0 }
        let b = input.assumingMemoryBound(to: UInt8.self)
        t.peerCloseCode = UInt16(b[0]) << 8 | UInt16(b[1])
        t.peerCloseReason = String(decoding: UnsafeBufferPointer(start: b + 2, count: min(len - 2, 123)), as: UTF8.self)
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        guard let t = transport(wsi) else { return 0 }
        let why = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "unknown error"
        t.finish(.failed(why))
        release(wsi, t)
    case LWS_CALLBACK_CLIENT_CLOSED:
        guard let t = transport(wsi) else { return 0 }
        t.finish(.closed(code: t.peerCloseCode, reason: t.peerCloseReason))
        release(wsi, t)
    default:
        break
    }
    return 0
}
#endif
