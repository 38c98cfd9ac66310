/// A uniform grid over the zones' bounding boxes, built once at load: a lookup reads one cell's
/// list of candidate zones (file order kept) instead of testing every polygon. Hundreds of
/// city-sized zones give cells of a few zones each; a zone as large as the whole map (an
/// operating area) sits in every cell and costs one bounding-box test plus one ring walk.
public struct ZoneIndex: Sendable, Equatable {
    public let box: GeoBox
    public let columns: Int
    public let rows: Int
    /// Row-major; each cell lists the zones whose box overlaps it, ascending.
    let cells: [[Int32]]

    /// Cells per side: about 2 √n, so a cell holds a handful of the small zones; bounded so
    /// the grid stays a few hundred kilobytes at most.
    static func side(for zones: Int) -> Int {
        min(256, max(1, Int((Double(zones).squareRoot() * 2).rounded(.up))))
    }

    public init(_ boxes: [GeoBox]) {
        var all = GeoBox(minLon: .infinity, minLat: .infinity, maxLon: -.infinity, maxLat: -.infinity)
        for b in boxes { all.add(b) }
        box = all
        guard !boxes.isEmpty else {
            columns = 0
            rows = 0
            cells = []
            return
        }
        let n = Self.side(for: boxes.count)
        columns = n
        rows = n
        var grid = [[Int32]](repeating: [], count: n * n)
        for (i, b) in boxes.enumerated() {
            let (c0, r0) = Self.cell(lon: b.minLon, lat: b.minLat, in: all, columns: n, rows: n)
            let (c1, r1) = Self.cell(lon: b.maxLon, lat: b.maxLat, in: all, columns: n, rows: n)
            for r in r0...r1 {
                for c in c0...c1 { grid[r * n + c].append(Int32(i)) }
            }
        }
        cells = grid
    }

    /// The column and row holding (lon, lat), clamped to the grid (the max edge belongs to the
    /// last cell).
    static func cell(lon: Double, lat: Double, in b: GeoBox, columns: Int, rows: Int) -> (Int, Int) {
        let w = b.maxLon - b.minLon, h = b.maxLat - b.minLat
        let c = w > 0 ? Int((lon - b.minLon) / w * Double(columns)) : 0
        let r = h > 0 ? Int((lat - b.minLat) / h * Double(rows)) : 0
        return (min(max(c, 0), columns - 1), min(max(r, 0), rows - 1))
    }

    /// The zones that may contain `p`, in file order; empty outside every zone's box.
    public func candidates(_ p: GeoPoint) -> [Int32] {
        guard columns > 0, box.contains(p) else { return [] }
        let (c, r) = Self.cell(lon: p.lon, lat: p.lat, in: box, columns: columns, rows: rows)
        return cells[r * columns + c]
    }

    /// Total entries over all cells (a measure of the index's size, for the load log).
    public var entries: Int { cells.reduce(0) { $0 + $1.count } }
}
