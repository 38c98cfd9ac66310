/// An append-only array kept in fixed pages of `pageSize` elements. An `Array` grown by
/// appending doubles its buffer, so at any size up to half of it can be reserved and unused
/// (9,500 rows sat in room for 16,384), and each doubling copies everything; here at most one
/// page is partly empty and nothing is ever copied.
struct PagedArray<Element> {
    static var pageSize: Int { 1024 }
    private var pages: [[Element]] = []
    private(set) var count = 0

    /// Appends `e`; returns its index.
    @discardableResult
    mutating func append(_ e: Element) -> Int32 {
        if count % Self.pageSize == 0 {
            var page: [Element] = []
            page.reserveCapacity(Self.pageSize)
            pages.append(page)
        }
        pages[pages.count - 1].append(e)
        count += 1
        return Int32(count - 1)
    }

    subscript(i: Int32) -> Element {
        get { pages[Int(i) / Self.pageSize][Int(i) % Self.pageSize] }
        _modify { yield &pages[Int(i) / Self.pageSize][Int(i) % Self.pageSize] }
    }
}
