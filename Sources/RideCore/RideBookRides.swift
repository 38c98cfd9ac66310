extension RideBook {
    /// The rides a book knows, by id. A dictionary of entries kept ~40 % of its 160-byte buckets
    /// empty (9,500 rides in 16,384 of them); here the dictionary's slack is on 20-byte buckets
    /// (id → position) and the entries themselves lie dense in fixed pages, which never copy
    /// the others when they grow. Removing one moves the last entry into its place.
    public struct Rides: ExpressibleByDictionaryLiteral {
        private var positions: [String: Int32] = [:]
        private var pages: [[Entry]] = []
        static let pageSize = 256

        public init() {}

        public init(dictionaryLiteral elements: (String, Entry)...) {
            for (id, e) in elements { self[id] = e }
        }

        public var count: Int { positions.count }
        public var isEmpty: Bool { positions.isEmpty }
        public func contains(_ id: String) -> Bool { positions[id] != nil }

        public subscript(id: String) -> Entry? {
            get { positions[id].map { at(Int($0)) } }
            set {
                precondition(newValue.map { $0.ride.id == id } ?? true, "ride \(newValue?.ride.id ?? "") kept as \(id)")
                if let i = positions[id] {
                    if let newValue { pages[Int(i) / Self.pageSize][Int(i) % Self.pageSize] = newValue } else { remove(id, at: Int(i)) }
                } else if let newValue {
                    let i = positions.count
                    if i % Self.pageSize == 0 {
                        var page: [Entry] = []
                        page.reserveCapacity(Self.pageSize)
                        pages.append(page)
                    }
                    pages[i / Self.pageSize].append(newValue)
                    positions[id] = Int32(i)
                }
            }
        }

        private func at(_ i: Int) -> Entry { pages[i / Self.pageSize][i % Self.pageSize] }

        private mutating func remove(_ id: String, at i: Int) {
            let last = positions.count - 1
            let moved = pages[last / Self.pageSize].removeLast()
            positions[id] = nil
            if i != last {
                pages[i / Self.pageSize][i % Self.pageSize] = moved
                positions[moved.ride.id] = Int32(i)
            }
            if pages[last / Self.pageSize].isEmpty { pages.removeLast() }
        }
    }
}
