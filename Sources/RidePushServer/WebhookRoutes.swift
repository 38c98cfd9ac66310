import RideService

/// The webhook routes (WebhookDesk.swift decides and reads, off this service thread); the
/// answer is written on HTTP_WRITEABLE like a store read's (`httpAnswered`).
extension Shard {
    /// The router has checked the ops token.
    func webhooks(_ wsi: OpaquePointer, _ op: WebhookOp) -> Int32 {
        guard let desk = service.webhookDesk else { return respond(wsi, 404, json: errorJSON("not_found", "webhooks are off (no --webhook)")) }
        let token = awaitingStore.add(wsi, "webhooks")
        desk.answer(op) { [self] answer in post(.httpAnswer(token, answer)) }
        return 0
    }
}
