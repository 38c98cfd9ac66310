import RideService
import CLibWebSockets
import RideAuth
import RideCore
import RideProtocol

/// The thin lws side of a connection: feeds `Connection` (the protocol logic) what arrives
/// and performs what it asks, on this service thread.
extension Shard {
    func requester(_ s: Session) -> Requester { Requester(shard: index, session: s.serial) }

    func handleMessage(_ s: Session, _ bytes: [UInt8]) {
        perform(s, s.conn.received(bytes, service, from: requester(s)))
    }

    /// An error found before decoding (too large, binary): answered in turn.
    func reply(_ s: Session, _ e: ProtocolError) {
        perform(s, s.conn.failed(e, from: requester(s)))
    }

    func perform(_ s: Session, _ actions: [ConnectionAction]) {
        for a in actions {
            switch a {
            case .send(let frame): send(s, frame)
            case .submit(let job): service.submit(job)
            case .subscribe(let live):
                let slot = live.slot(index)
                s.subscriptions.append(Subscription(live: live, index: Int32(slot.pointee.subscribers.count)))
                slot.pointee.subscribers.append(Subscriber(session: s))
                live.subscriberCount.wrappingAdd(1, ordering: .relaxed)
                service.metrics.add(service.metrics.subscribers)
            case .unsubscribe(let ride):
                guard let sub = s.subscription(for: ride) else { continue }
                detach(s, sub)
                s.subscriptions.remove(sub.live)
            case .close(let code, let reason): closeHard(s, code: code, reason: reason)
            case .pauseReading: lws_rx_flow_control(s.wsi, 0)
            case .resumeReading: lws_rx_flow_control(s.wsi, 1)
            case .watchAll(let id): watchAll(s, id: id)
            case .unwatchAll(let id): unwatchAll(s, id: id)
            case .endFeed: dropOpsWatcher(s)
            }
        }
    }
}
