/// A uniform grid over the zones, built once at load: a lookup reads one cell's list of zones
/// (file order kept) instead of testing every polygon. A cell no edge of a zone passes through is
/// wholly inside or wholly outside that zone, which is settled at build time: the zone is then
/// listed as certain, or left out. Only zones with an edge through the cell are tested point by
/// point, so an operating area as large as the map costs nothing away from its border.
public struct ZoneIndex: Sendable, Equatable {
    public let box: GeoBox
    public let columns: Int
    public let rows: Int
    /// Row-major; each cell lists `zone << 1 | certain`, ascending by zone.
    let cells: [[Int32]]

    /// Cells per side: about 2 √n, so a cell holds a handful of the small zones; bounded so
    /// the grid stays a few hundred kilobytes at most.
    static func side(for zones: Int) -> Int {
        min(256, max(1, Int((Double(zones).squareRoot() * 2).rounded(.up))))
    }

    public init(_ zones: [GeofencingZone]) {
        var all = GeoBox(minLon: .infinity, minLat: .infinity, maxLon: -.infinity, maxLat: -.infinity)
        for z in zones { all.add(z.box) }
        box = all
        guard !zones.isEmpty else {
            columns = 0
            rows = 0
            cells = []
            return
        }
        let n = Self.side(for: zones.count)
        columns = n
        rows = n
        var grid = [[Int32]](repeating: [], count: n * n)
        var crossed = [Bool](repeating: false, count: n * n)
        for (i, z) in zones.enumerated() {
            let (c0, r0) = Self.cell(lon: z.box.minLon, lat: z.box.minLat, in: all, columns: n, rows: n)
            let (c1, r1) = Self.cell(lon: z.box.maxLon, lat: z.box.maxLat, in: all, columns: n, rows: n)
            // Every cell an edge's box touches may hold both sides of that edge (conservative:
            // the box of an edge covers every cell the edge itself passes through).
            for r in r0...r1 { for c in c0...c1 { crossed[r * n + c] = false } }
            for polygon in z.polygons {
                for ring in polygon.rings {
                    let k = ring.coordinates
                    var j = 0
                    while j + 3 < k.count {
                        let (ea, eb) = (Self.cell(lon: min(k[j], k[j + 2]), lat: min(k[j + 1], k[j + 3]), in: all, columns: n, rows: n),
                                        Self.cell(lon: max(k[j], k[j + 2]), lat: max(k[j + 1], k[j + 3]), in: all, columns: n, rows: n))
                        for r in ea.1...eb.1 { for c in ea.0...eb.0 { crossed[r * n + c] = true } }
                        j += 2
                    }
                }
            }
            for r in r0...r1 {
                for c in c0...c1 {
                    if crossed[r * n + c] {
                        grid[r * n + c].append(Int32(i) << 1)
                    } else if z.contains(Self.centre(column: c, row: r, in: all, columns: n, rows: n)) {
                        grid[r * n + c].append(Int32(i) << 1 | 1)
                    }
                }
            }
        }
        cells = grid
    }

    static func centre(column c: Int, row r: Int, in b: GeoBox, columns: Int, rows: Int) -> GeoPoint {
        GeoPoint(lat: b.minLat + (Double(r) + 0.5) * (b.maxLat - b.minLat) / Double(rows),
                 lon: b.minLon + (Double(c) + 0.5) * (b.maxLon - b.minLon) / Double(columns))
    }

    /// The column and row holding (lon, lat), clamped to the grid (the max edge belongs to the
    /// last cell).
    static func cell(lon: Double, lat: Double, in b: GeoBox, columns: Int, rows: Int) -> (Int, Int) {
        let w = b.maxLon - b.minLon, h = b.maxLat - b.minLat
        let c = w > 0 ? Int((lon - b.minLon) / w * Double(columns)) : 0
        let r = h > 0 ? Int((lat - b.minLat) / h * Double(rows)) : 0
        return (min(max(c, 0), columns - 1), min(max(r, 0), rows - 1))
    }

    /// The cell's entries for `p` (`zone << 1 | certain`), in file order; empty outside
    /// every zone's box.
    func entries(_ p: GeoPoint) -> [Int32] {
        guard columns > 0, box.contains(p) else { return [] }
        let (c, r) = Self.cell(lon: p.lon, lat: p.lat, in: box, columns: columns, rows: rows)
        return cells[r * columns + c]
    }

    /// The zones that may contain `p`, in file order.
    public func candidates(_ p: GeoPoint) -> [Int] { entries(p).map { Int($0 >> 1) } }

    /// Total entries over all cells (a measure of the index's size, for the load log).
    public var entries: Int { cells.reduce(0) { $0 + $1.count } }
}
