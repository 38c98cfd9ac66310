import RideService
/// How the store worker and the lws callbacks reach the service threads: made before them (the
/// worker's coordinator needs it at once), filled with the shards once they exist, before any
/// thread runs. Each context's user pointer; holds the shards, not what made them.
final class Mailboxes: @unchecked Sendable {  // `shards` is written once in Hub.init before any thread starts, then only read
    var shards: [Shard] = []

    /// Hands service thread `i` its events (Shard.post: its mailbox, then a wake-up).
    func post(_ i: Int, _ events: [ShardEvent]) { shards[i].post(events) }

    /// The shard servicing lws context `ctx` (the callbacks' way in): on a service thread its
    /// own, else found among the few.
    func shard(for ctx: OpaquePointer) -> Shard? {
        let i = ServiceThread.current
        if i >= 0, i < shards.count, shards[i].context == ctx { return shards[i] }
        return shards.first { $0.context == ctx }
    }
}
