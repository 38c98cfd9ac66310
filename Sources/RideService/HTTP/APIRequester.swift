import RideStore

extension Requester {
    /// The store worker's answer to this requester: a ride.v1 frame to a session, or an HTTP
    /// answer (packed by ServerAPIIdempotency) to a server API request.
    package func reply(_ bytes: [UInt8], ride: LiveRide?) -> ShardEvent {
        guard http != nil else { return .reply(session, bytes, ride: ride) }
        return answer(ServerAPIIdempotency.unpacked(bytes))
    }

    package func answer(_ a: HTTPAnswer) -> ShardEvent { .httpAnswer(http ?? 0, a) }
}
