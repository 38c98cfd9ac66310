import RideAuth
import RideCore
import RideProtocol
import RideStore

/// Idempotency keys on the exactly-once store of ride.v1 request ids (the reply table, no
/// schema of its own): a key is stored as request id "http:" + hex SHA-256(scope, key) in the
/// caller's account scope, with "http " + a fingerprint of the request as what was asked and the
/// status and body as the reply. A retry with the same key and body gets the same status and
/// bytes, on any node sharing the store, after a restart, for as long as replies are kept (24 h);
/// the same key with another body is refused (Stripe's rule).
///
/// Keys are scoped per account, as Stripe scopes them: every `ops` token is the operator's
/// backend (several instances, each with its own `sub`, retry one another's requests), so
/// they share one scope; a rider's token is its own account, scoped by its `sub`.
package enum ServerAPIIdempotency {
    package static let maxKeyBytes = 64
    /// Marks a stored request as the server API's (ride.v1 records what was asked in words).
    static let fingerprintPrefix = "http "
    /// The operator's scope: empty, which no rider's scope can be (a token's `sub` is never
    /// empty: TokenSigner refuses it). With authentication off every request is the
    /// operator's, and was already stored under this scope.
    package static let operatorScope = ""

    /// The scope a caller's keys live in: the operator's for ops tokens (and with
    /// authentication off), the rider's own `sub` otherwise.
    package static func scope(_ access: Access?) -> String {
        guard let access, !access.claims.ops else { return operatorScope }
        return access.rider
    }

    package static func replyKey(subject: String, key: String) -> ReplyKey {
        // The NUL keeps ("ab", "c") and ("a", "bc") apart; the hash keeps any key 69 bytes.
        ReplyKey(scope: subject, id: "http:" + Digest.sha256Hex(Array(subject.utf8) + [0] + Array(key.utf8)))
    }

    /// Where an ops token's key was stored before keys were scoped per account (under the
    /// token's own `sub`): looked up when the operator's scope has no answer, so a retry that
    /// spans the upgrade is still answered once rather than applied again. Needed only while
    /// such replies are kept (24 h after the upgrade); nil for riders, whose scope is unchanged.
    package static func legacyKey(_ access: Access?, key: String) -> ReplyKey? {
        guard let access, access.claims.ops else { return nil }
        return replyKey(subject: access.rider, key: key)
    }

    package static func fingerprint(method: String, path: String, body: [UInt8]) -> String {
        fingerprintPrefix + Digest.sha256Hex(Array("\(method) \(path)\n".utf8) + body)
    }

    /// An answer as stored and as handed from the store worker to the service thread:
    /// three status digits, a space, the body. A replay is handed over with "+" for the
    /// space; only first answers are stored, so a stored answer always has the space.
    package static func packed(_ a: HTTPAnswer) -> [UInt8] {
        Array(String(a.status).utf8) + [a.replayed ? replayMark : 0x20] + a.body
    }

    static let replayMark = UInt8(ascii: "+")

    package static func unpacked(_ bytes: [UInt8]) -> HTTPAnswer {
        guard bytes.count >= 4, bytes[3] == 0x20 || bytes[3] == replayMark,
              let status = UInt32(String(decoding: bytes[0..<3], as: UTF8.self)) else {
            return .error(500, "internal", "a stored answer could not be read")
        }
        return HTTPAnswer(status: status, body: Array(bytes[4...]), replayed: bytes[3] == replayMark)
    }

    /// A key seen before: the stored answer for the same request (marked replayed), 422 for another.
    package static func again(_ earlier: RideBook.Earlier, fingerprint: String) -> HTTPAnswer {
        guard earlier.request == fingerprint else {
            return .error(422, "idempotency_key_reused",
                          "this Idempotency-Key was used for another request (method, path or body differ); use a new key for a new request")
        }
        let stored = unpacked(earlier.bytes)
        return HTTPAnswer(status: stored.status, body: stored.body, replayed: true)
    }
}

/// The HTTP face of the service's refusals: ride.v1's error codes with a status each.
package enum ServerAPIAnswer {
    package static func error(_ e: ProtocolError) -> HTTPAnswer {
        .error(status(e.code), e.code.rawValue, e.message)
    }

    package static func status(_ code: ErrorCode) -> UInt32 {
        switch code {
        case .rideNotFound: return 404
        case .forbidden: return 403
        case .unauthorized: return 401
        case .invalidTransition, .conflict: return 409
        case .tooManyRides, .rateLimited: return 429
        case .unavailable: return 503
        case .tooLarge: return 413
        // Well-formed, refused by where the ride is (docs/zones.md): not a malformed request.
        case .startNotAllowed, .endNotAllowed, .positionRequired: return 422
        default: return 400
        }
    }

    /// A committed change's answer: the ride as `GET /rides/{id}` shows it at the decision.
    package static func success(_ call: ServerAPICall, ride: Ride, plan: FarePlan, at: UnixMillis) -> HTTPAnswer {
        HTTPAnswer(status: call.successStatus, body: ServerMessages.rideDocument(ride: ride, plan: plan, at: at))
    }

    /// A write refused by the store although the book allowed it: another node changed the
    /// ride, or applied a request with the same key, at the same moment. The retry with the
    /// same key is decided on what was committed: the stored answer, or the ride's new state.
    package static func notRecorded(_ failure: StoreError, type: String) -> HTTPAnswer {
        if failure.refusal == .replyAlreadyRecorded {
            return .error(409, "idempotency_key_in_flight", "another node applied a request with this Idempotency-Key at the same moment; retry with the same key for its answer")
        }
        if failure.kind == .conflict {
            return .error(409, "conflict", "another request changed this ride at the same moment (on this node or another); retry with the same Idempotency-Key for the outcome")
        }
        return error(ProtocolError(failure.kind == .notFound ? .rideNotFound : .unavailable, "could not record the \(type): \(failure.message)"))
    }
}
