#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A WGS 84 position in degrees, as devices and GeoJSON give it (GeoJSON writes `[lon, lat]`).
public struct GeoPoint: Sendable, Equatable {
    public var lat: Double
    public var lon: Double

    public init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }

    /// Finite, latitude within ±90 and longitude within ±180.
    public var isValid: Bool {
        lat.isFinite && lon.isFinite && abs(lat) <= 90 && abs(lon) <= 180
    }
}

public enum Geo {
    /// The IUGG mean Earth radius (R1 = (2a + b) / 3 of WGS 84). A sphere is within about 0.5 %
    /// of the ellipsoid anywhere, far below what a phone's fix is worth.
    public static let earthRadiusMetres = 6_371_008.8

    /// Great-circle distance on the sphere of `earthRadiusMetres`, in metres (haversine form,
    /// which stays accurate for the few-metre steps a trace is made of, unlike the spherical
    /// law of cosines).
    public static func haversineMetres(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        let rad = Double.pi / 180
        let dLat = (b.lat - a.lat) * rad
        let dLon = (b.lon - a.lon) * rad
        let s1 = sin(dLat / 2)
        let s2 = sin(dLon / 2)
        let h = s1 * s1 + cos(a.lat * rad) * cos(b.lat * rad) * s2 * s2
        // min: rounding can push h a hair over 1 for antipodal points.
        return 2 * earthRadiusMetres * asin(min(1, h.squareRoot()))
    }

    /// `haversineMetres` rounded to whole metres.
    public static func distanceMetres(_ a: GeoPoint, _ b: GeoPoint) -> Int64 {
        Int64(haversineMetres(a, b).rounded())
    }
}
