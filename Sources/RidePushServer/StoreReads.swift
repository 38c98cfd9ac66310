import CLibWebSockets
import RideAuth
import RideService
import RideStore

extension Shard {
    func rideDocumentWithJournal(_ wsi: OpaquePointer, _ id: String, _ claims: TokenClaims?) -> Int32 {
        awaitStore(wsi, id, OpsReads.rideDocument(id, claims: claims))
    }

    /// Has the store worker run `work` and answers this HTTP connection with its result
    /// (on HTTP_WRITEABLE, if the connection is still there); this thread serves others meanwhile.
    func awaitStore(_ wsi: OpaquePointer, _ what: String, _ work: @escaping @Sendable (RideStore, RideRegistry) -> OpsAnswer) -> Int32 {
        let token = awaitingStore.add(wsi, what)
        service.submit(.read(from: Requester(shard: index, session: 0), http: token, work: work))
        return 0
    }

    func httpAnswered(_ token: UInt64, _ answer: HTTPAnswer) {
        guard let waiting = awaitingStore.take(token) else { return }
        deferredResponses[waiting.handle] = (answer.status, answer.body)
        let extra = answer.extraHeaders
        if !extra.isEmpty { deferredHeaders[waiting.handle] = extra }
        lws_callback_on_writable(waiting.handle)
    }
}
