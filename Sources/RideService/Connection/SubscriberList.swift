/// A ride's subscribers on one service thread. Nearly every ride has one or two watchers, so
/// the first is held inline in the slot and only the others in an array: an array of one cost
/// a 64-byte heap block per ride and thread. Order is not kept by removals (the last moves
/// into the gap), as before.
package struct SubscriberList {
    private var first: Subscriber?
    private var rest: [Subscriber] = []

    package var isEmpty: Bool { first == nil }
    package var count: Int { first == nil ? 0 : 1 + rest.count }
    package var indices: Range<Int> { 0..<count }

    package subscript(i: Int) -> Subscriber {
        get { i == 0 ? first! : rest[i - 1] }
        _modify {
            if i == 0 { yield &first! } else { yield &rest[i - 1] }
        }
    }

    package mutating func append(_ s: Subscriber) {
        if first == nil { first = s } else { rest.append(s) }
    }

    package mutating func swapAt(_ i: Int, _ j: Int) {
        guard i != j else { return }
        let a = self[i]
        self[i] = self[j]
        self[j] = a
    }

    /// Removes the last; the array's buffer goes with the last of the others.
    package mutating func removeLast() {
        if rest.isEmpty {
            precondition(first != nil, "removeLast of no subscribers")
            first = nil
        } else {
            rest.removeLast()
            if rest.isEmpty { rest = [] }
        }
    }

    /// Runs `body` on each subscriber in place, in index order: the fan-out's walk, which
    /// retains nothing.
    package mutating func forEachInPlace(_ body: (inout Subscriber) -> Void) {
        guard first != nil else { return }
        body(&first!)
        if rest.isEmpty { return }
        rest.withUnsafeMutableBufferPointer { others in
            for j in others.indices { body(&others[j]) }
        }
    }
}
