import RideService
import CLibWebSockets

// libwebsockets calls C function pointers; these top-level thunks find the Swift shard that
// owns the context (through the mailboxes, its `user` pointer) and forward. The mailboxes live
// until every context is destroyed (Hub holds them), so an unretained reference is safe here.

func shard(of wsi: OpaquePointer?) -> Shard? {
    guard let wsi, let ctx = lws_get_context(wsi), let user = lws_context_user(ctx) else { return nil }
    return Unmanaged<Mailboxes>.fromOpaque(user).takeUnretainedValue().shard(for: ctx)
}

/// Protocol 0, "ride.v1": HTTP (page, health, metrics, rides) and the WebSocket protocol. One
/// protocol serves both because lws binds accepted sockets to the vhost's default protocol.
func rideProtocolCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                          _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    guard let wsi, let shard = shard(of: wsi) else { return 0 }
    if reason == LWS_CALLBACK_RECEIVE || reason == LWS_CALLBACK_RECEIVE_PONG, let s = shard.session(wsi) {
        shard.heard(s)
        if reason == LWS_CALLBACK_RECEIVE_PONG { return 0 }
    }
    return shard.callback(wsi, reason, user, input, len)
}

/// "ridepush-accept": the adopted listening socket.
func acceptCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                    _ input: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
    guard reason == LWS_CALLBACK_RAW_RX_FILE, let shard = shard(of: wsi) else { return 0 }
    return shard.acceptReady()
}
