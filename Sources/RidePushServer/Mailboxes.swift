import RideService
/// How the store worker reaches the service threads: made before them (the worker's
/// coordinator needs it at once), filled with the shards once they exist, before any thread
/// runs. Holds the shards, not the hub, so no reference leads back to what made it.
final class Mailboxes: @unchecked Sendable {  // `shards` is written once in Hub.init before any thread starts, then only read
    var shards: [Shard] = []

    /// Hands service thread `i` its events (Shard.post: its mailbox, then a wake-up).
    func post(_ i: Int, _ events: [ShardEvent]) { shards[i].post(events) }
}
