import RideAuth

/// A connection's timers as one decision: once a second, on its own service thread and its
/// own timer (not the tick's fan-out), what is due for a session now. The adapter performs
/// what it returns; nothing here touches a socket, so it is tested with instants chosen by
/// hand (ConnectionTimersTests).
///
/// Keepalive without per-connection lws timers: lws's validity timers insert into a sorted
/// list on every pong, O(connections) each. A tick written counts as traffic: TCP_USER_TIMEOUT
/// (set at accept) drops a peer whose ticks stay unacknowledged, so subscribers of ticking
/// rides need no pings (pinging 19,000 of them every 15 s cost a tenth of the server's CPU).
package struct ConnectionTimers: Sendable, Equatable {
    /// --keepalive: dropped after this long silent, pinged at half.
    package let keepaliveMillis: Int64
    /// --handshake-timeout: to authenticate after the upgrade, and to finish a message.
    package let handshakeMillis: Int64
    /// --slow-consumer-lag, in seconds.
    package let slowConsumerSeconds: Int
    /// Tokens required (--auth jwt): an upgrade must authenticate within the handshake time.
    package let authRequired: Bool

    package init(keepaliveSeconds: Int, handshakeSeconds: Int, slowConsumerSeconds: Int, authRequired: Bool) {
        keepaliveMillis = Int64(keepaliveSeconds) * 1000
        handshakeMillis = Int64(handshakeSeconds) * 1000
        self.slowConsumerSeconds = slowConsumerSeconds
        self.authRequired = authRequired
    }

    package enum Due: Equatable, Sendable {
        /// Nothing taken off the outbox for the lag: closed hard (the socket is choked, so the
        /// close frame may never get out either).
        case slowConsumer(reason: String)
        /// The outbox clock runs over nothing (a fleet marker taken back out): reset it.
        case outboxIdle
        /// The token expired since it was checked: the connection refuses it (4401).
        case tokenExpired
        /// An upgrade that never authenticated would hold its per-address place forever.
        case authTimedOut
        /// A message whose final fragment never came: stop waiting for it (1008).
        case incompleteMessage(reason: String)
        /// Silent for the whole keepalive: drop.
        case drop
        /// Silent for half of it: ping once.
        case ping
    }

    /// What is due for `s` at `now` (monotonic ms) and `wall` (Unix seconds): at most one
    /// reason to close, in the order above, and the keepalive's verdict.
    package func due(_ s: Session, now: Int64, wall: Int64) -> [Due] {
        var out: [Due] = []
        var closing = s.closing != nil
        func close(_ d: Due) {
            out.append(d)
            closing = true
        }
        // The one slow-consumer clock: whatever is queued (frames, ticks, operator frames).
        if !closing, s.outbox.overdue(at: Outbox.tenths(now), lag: Int32(clamping: slowConsumerSeconds * 10)) {
            if s.hasOutbox || s.pendingTicks > 0 {
                close(.slowConsumer(reason: "slow consumer: nothing read for \(slowConsumerSeconds)s"))
            } else {
                out.append(.outboxIdle)
            }
        }
        // Past the leeway, on the wall clock.
        if !closing, s.conn.tokenExp <= wall - TokenSigner.leeway { close(.tokenExpired) }
        let handshakeBy = now - handshakeMillis
        if !closing, authRequired, !s.conn.authenticated, s.connectedAt <= handshakeBy { close(.authTimedOut) }
        if !closing, s.rxSince > 0, s.rxSince <= handshakeBy {
            close(.incompleteMessage(reason: "message not completed within \(handshakeMillis / 1000) s"))
        }
        let idle = now - s.lastTraffic
        if idle >= keepaliveMillis {
            out.append(.drop)
        } else if idle >= keepaliveMillis / 2, !s.pingSent {
            out.append(.ping)
        }
        return out
    }
}
