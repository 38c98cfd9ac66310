import RideCore

/// Keys by the time each is due, earliest first: an indexed binary min-heap, so setting,
/// moving or removing one key is O(log n) and the earliest is O(1). PushSchedule keeps its
/// targets with a push waiting and its rides' fare steps here, so a poll or a wake costs what
/// is due, not what is kept (10,000 activities).
struct DueQueue<Key: Hashable> {
    private var heap: [(at: UnixMillis, key: Key)] = []
    private var position: [Key: Int] = [:]

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    /// The earliest time anything is due.
    var earliest: UnixMillis? { heap.first?.at }

    func at(_ key: Key) -> UnixMillis? { position[key].map { heap[$0].at } }

    /// Adds `key` due at `at`, or moves it there.
    mutating func set(_ key: Key, at: UnixMillis) {
        if let i = position[key] {
            let old = heap[i].at
            heap[i].at = at
            if at < old { up(i) } else if at > old { down(i) }
        } else {
            heap.append((at, key))
            position[key] = heap.count - 1
            up(heap.count - 1)
        }
    }

    mutating func remove(_ key: Key) {
        guard let i = position.removeValue(forKey: key) else { return }
        let last = heap.count - 1
        if i != last {
            heap.swapAt(i, last)
            position[heap[i].key] = i
        }
        heap.removeLast()
        if i < heap.count {
            let moved = heap[i].key
            up(i)
            down(position[moved]!)
        }
    }

    /// Takes every key due at or before `now` (in no particular order).
    mutating func popDue(_ now: UnixMillis) -> [Key] {
        var out: [Key] = []
        while let first = heap.first, first.at <= now {
            out.append(first.key)
            remove(first.key)
        }
        return out
    }

    private mutating func up(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].at < heap[parent].at else { break }
            swap(i, parent)
            i = parent
        }
    }

    private mutating func down(_ start: Int) {
        var i = start
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count, heap[l].at < heap[m].at { m = l }
            if r < heap.count, heap[r].at < heap[m].at { m = r }
            guard m != i else { return }
            swap(i, m)
            i = m
        }
    }

    private mutating func swap(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        position[heap[a].key] = a
        position[heap[b].key] = b
    }
}
