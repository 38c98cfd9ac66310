import Dispatch
import RideCore
import RideAuth
import RideService
import RideWebhooks

/// `GET /v1/webhooks/dead`: the deliveries given up after 24 hours, for operators. The outbox
/// read is disk or network I/O, so it runs on `Hub.webhookReads`, never on this service
/// thread, which answers on HTTP_WRITEABLE like a store read (`httpAnswered`).
extension Shard {
    static let deadListingLimit = 1000

    func deadWebhooks(_ wsi: OpaquePointer) -> Int32 {
        if let verifier = hub.verifier {
            switch HTTPToken.verify(requestToken(wsi), verifier: verifier, wall: WallClock.seconds()) {
            case .failure(let refusal): return respond(refusal.answer, wsi)
            case .success(let claims) where !claims.ops:
                return respond(wsi, 403, json: errorJSON("forbidden", "the dead-letter listing needs an operator (ops) token"))
            case .success: break
            }
        }
        guard let outbox = hub.webhookOutbox else {
            return respond(wsi, 404, json: errorJSON("not_found", "webhooks are off (no --webhook)"))
        }
        let token = awaitingStore.add(wsi, "webhooks/dead")
        hub.webhookReads.async { [self] in
            let body = WebhookMetrics.deadListingJSON(outbox.dead(limit: Shard.deadListingLimit))
            post(.httpAnswer(token, 200, body))
        }
        return 0
    }
}
