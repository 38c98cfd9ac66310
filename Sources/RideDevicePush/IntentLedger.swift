import RideProtocol

/// Which outbox rows (push intents) are still owed to which targets, kept beside PushSchedule
/// so a row is recorded delivered only once every target's push carrying it was answered:
/// sent, the target dropped, or the push replaced by a newer one that was answered. Mirrors
/// the schedule's one-waiting, one-in-flight slots: a row joins its target's waiting set,
/// moves in flight with a send, and goes back to waiting on a retry (the schedule merges the
/// push into whatever waits). Pure; the sender calls it under its lock.
public struct IntentLedger: Sendable {
    private var owed: [Int64: Set<PushTarget>] = [:]
    private var waiting: [PushTarget: Set<Int64>] = [:]
    private var inFlight: [PushTarget: Set<Int64>] = [:]

    public init() {}

    /// Rows not yet answered for every target.
    public var openRows: Set<Int64> { Set(owed.keys) }

    /// Row `seq` was handed to the schedule for these targets. With none it is done at once
    /// (returned): a ride nobody watches costs one read and one delete.
    public mutating func opened(_ seq: Int64, targets: [PushTarget]) -> [Int64] {
        guard !targets.isEmpty else { return [seq] }
        owed[seq, default: []].formUnion(targets)
        for t in targets { waiting[t, default: []].insert(seq) }
        return []
    }

    /// The schedule sent `target` its waiting push.
    public mutating func sent(_ target: PushTarget) {
        inFlight[target, default: []].formUnion(waiting.removeValue(forKey: target) ?? [])
    }

    /// The push in flight to `target` was answered with `verdict`; returns the rows now done.
    public mutating func answered(_ target: PushTarget, _ verdict: PushVerdict) -> [Int64] {
        let rows = inFlight.removeValue(forKey: target) ?? []
        switch verdict {
        case .retry, .renewCredentials:
            waiting[target, default: []].formUnion(rows)
            return []
        case .delivered, .dropTarget, .failed:
            return settle(rows, target)
        }
    }

    /// The schedule forgot `target` (its `end` answered, its token gone): nothing more is
    /// owed to it. Returns the rows now done.
    public mutating func forgot(_ target: PushTarget) -> [Int64] {
        let rows = (waiting.removeValue(forKey: target) ?? []).union(inFlight.removeValue(forKey: target) ?? [])
        return settle(rows, target)
    }

    /// Rows another node now holds (a lost lease): forgotten here, not done.
    public mutating func drop(_ seqs: Set<Int64>) {
        for seq in seqs {
            guard let targets = owed.removeValue(forKey: seq) else { continue }
            for t in targets {
                waiting[t]?.remove(seq)
                inFlight[t]?.remove(seq)
            }
        }
    }

    private mutating func settle(_ rows: Set<Int64>, _ target: PushTarget) -> [Int64] {
        var done: [Int64] = []
        for seq in rows.sorted() {
            owed[seq]?.remove(target)
            if owed[seq]?.isEmpty == true {
                owed[seq] = nil
                done.append(seq)
            }
        }
        return done
    }
}
