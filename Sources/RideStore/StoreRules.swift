import RideCore

/// The rules every store applies the same way, so they accept and refuse the same writes with
/// the same words: each refusal's kind and message is written here once. An append is checked
/// against two fields a store keeps per ride (its last entry's number and state), so it costs
/// the same however long the journal is.
public enum StoreRules {
    /// A create whose ride id is taken.
    public static func rideExists(_ id: String) -> StoreError {
        StoreError(.rideExists, "ride \(id) already exists")
    }

    /// An append or trace checkpoint for a ride the store does not have.
    public static func noRide(_ id: String) -> StoreError {
        StoreError(.rideNotFound, "no ride \(id)")
    }

    /// A write whose reply key is already recorded: applying it again would break "applied once".
    public static func replyTaken(_ reply: ReplyRecord?) -> StoreError {
        StoreError(.replyAlreadyRecorded, "a reply is already recorded for \(reply.map { "\($0.key)" } ?? "this request")")
    }

    /// A start appended to a ride that has one (every ride's first entry).
    public static func startAppended(_ id: String) -> StoreError {
        StoreError(.notAllowed, "ride \(id) has already started; a start cannot be appended")
    }

    /// A transition the ride's state does not allow.
    public static func notAllowed(_ id: String, _ error: RideError) -> StoreError {
        StoreError(.notAllowed, "ride \(id): \(error)")
    }

    /// An entry whose number is not the ride's next; `last` when the store read it (a store
    /// that lost a conditional insert knows only that another writer came first).
    public static func notNext(_ entry: JournalEntry, last: Int64?) -> StoreError {
        StoreError(.notNext, "ride \(entry.ride): entry \(entry.seq) is not the next one\(last.map { " (the last is \($0))" } ?? "")")
    }

    /// A write the store's own statement refused although none of the rules above names why
    /// (the server decides from the same state, so this is rare).
    public static func refusedUnexplained(_ id: String) -> StoreError {
        StoreError(.notNext, "ride \(id): refused by the store")
    }

    /// Why an append is refused given the ride's last recorded entry and state, or nil.
    public static func appendRefusal(_ entry: JournalEntry, lastSeq: Int64, state: RideState) -> StoreError? {
        let command: RideCommand
        switch entry.transition {
        case .start:
            return startAppended(entry.ride)
        case .pause: command = .pause
        case .resume: command = .resume
        case .end: command = .end
        }
        let allowed: Bool
        switch (state, command) {
        case (.riding, .pause), (.paused, .resume), (.riding, .end), (.paused, .end): allowed = true
        default: allowed = false
        }
        if !allowed { return notAllowed(entry.ride, RideError(state: state, command: command)) }
        if entry.seq != lastSeq + 1 { return notNext(entry, last: lastSeq) }
        return nil
    }

    /// The ride's state once `transition` applied.
    public static func state(after transition: RideTransition) -> RideState {
        switch transition {
        case .start, .resume: return .riding
        case .pause: return .paused
        case .end: return .ended
        }
    }
}
