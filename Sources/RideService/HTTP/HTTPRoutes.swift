import RideAuth
import RideCore
import RideProtocol

/// An HTTP answer made by the service: a status and a JSON body. The adapter writes it
/// (headers, HEAD, HTTP/2) and never decides what it says.
package struct HTTPAnswer: Equatable, Sendable {
    package let status: UInt32
    package let body: [UInt8]
    /// A server API answer given again for a repeated Idempotency-Key (the stored bytes): the
    /// adapter adds `Idempotent-Replayed: true`, so a client can tell a replay from a first answer.
    package let replayed: Bool

    package init(status: UInt32, body: [UInt8], replayed: Bool = false) {
        self.status = status
        self.body = body
        self.replayed = replayed
    }

    /// Headers beyond the common ones, as lws takes them (lower-case name with its colon).
    package var extraHeaders: [(name: String, value: String)] {
        replayed ? [("idempotent-replayed:", "true")] : []
    }

    /// `{"error":{"code":…,"message":…}}`, the one shape of every refusal.
    package static func error(_ status: UInt32, _ code: String, _ message: String) -> HTTPAnswer {
        HTTPAnswer(status: status, body: errorJSON(code, message))
    }

    package static func errorJSON(_ code: String, _ message: String) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("error")
        w.beginObject()
        w.key("code"); w.string(code)
        w.key("message"); w.string(message)
        w.endObject()
        w.endObject()
        return w.bytes
    }
}

/// A token over HTTP (`Authorization: Bearer`, else `?token=`), judged as the WebSocket judges
/// it: on the wall clock, and an expired one is said to be expired.
package enum HTTPToken {
    package static func verify(_ token: String?, verifier: TokenVerifier, wall: Int64) -> Result<TokenClaims, HTTPRefusal> {
        guard let token else {
            return .failure(HTTPRefusal(message: "a valid token is required (?token= or Authorization: Bearer)"))
        }
        do { return .success(try verifier.verify(token, now: wall)) } catch {
            if error.kind == .expired { return .failure(HTTPRefusal(message: "token expired; get a new one")) }
            return .failure(HTTPRefusal(message: "token refused: \(error.message)"))
        }
    }
}

/// Why a request's token was refused (answered 401 `unauthorized`).
package struct HTTPRefusal: Error, Equatable {
    package let message: String
    package var answer: HTTPAnswer { .error(401, "unauthorized", message) }
}

/// `GET /rides/{id}`, in the order that keeps the store out of reach of a request that may
/// not read the ride: the id (not looked up, not echoed) and the token (HTTPRouter), then the
/// ride, and only then, if asked and allowed, the journal.
package enum RideDocumentRoute {
    /// Whether the answer carries the journal and watchers: asked for (`?journal=1`), or an
    /// operator's token. Read only once the token is known to allow the ride.
    package static func wantsJournal(asked: Bool, claims: TokenClaims?) -> Bool {
        asked || claims?.ops == true
    }

    /// The answer once the ride is known (from memory or the store): 404 or 503 without it,
    /// 403 when the token may not read it, else the document. A 200 with `journal` asked is
    /// the adapter's cue to have the journal read.
    package static func answer(id: String, claims: TokenClaims?, ride: Ride?, plan: FarePlan?,
                               failure: ProtocolError?, at: UnixMillis) -> HTTPAnswer {
        guard let ride else {
            let e = failure ?? ProtocolError(.rideNotFound, "no ride \"\(id)\"")
            return .error(e.code == .rideNotFound ? 404 : 503, e.code.rawValue, e.message)
        }
        if let claims, !Access(claims).mayWatch(rideID: id, rideOwner: ride.owner) {
            return .error(403, "forbidden", "this token may not read ride \"\(id)\"")
        }
        return HTTPAnswer(status: 200, body: ServerMessages.rideDocument(ride: ride, plan: plan ?? .standard, at: at))
    }
}

/// A refusal that is already the answer to send.
package struct HTTPRefusalAnswer: Error, Equatable {
    package let answer: HTTPAnswer
    package init(_ answer: HTTPAnswer) { self.answer = answer }
}
