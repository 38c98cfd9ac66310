import Dispatch
import RideCore
import RideAuth
import RideService

/// `GET /v1/webhooks/dead`: the deliveries given up after 24 hours, for operators. The outbox
/// read is disk or network I/O, so it runs on `Hub.webhookReads`, never on this service
/// thread, which answers on HTTP_WRITEABLE like a store read (`httpAnswered`).
extension Shard {
    static let deadListingLimit = 1000

    /// The router has checked the ops token.
    func deadWebhooks(_ wsi: OpaquePointer) -> Int32 {
        guard let listing = hub.deadWebhooks else {
            return respond(wsi, 404, json: errorJSON("not_found", "webhooks are off (no --webhook)"))
        }
        let token = awaitingStore.add(wsi, "webhooks/dead")
        hub.webhookReads.async { [self] in
            let body = listing(Shard.deadListingLimit)
            post(.httpAnswer(token, HTTPAnswer(status: 200, body: body)))
        }
        return 0
    }
}
