import RideCore

/// Where a page of the ride listing starts: an instant and a ride id, the last row of the
/// page before. A keyset, not an offset: rides that start or end between two pages do not
/// shift the rows after it, so paging visits every ride once.
public struct RideKey: Sendable, Equatable {
    public let at: UnixMillis
    public let id: String
    public init(at: UnixMillis, id: String) {
        self.at = at
        self.id = id
    }
}

/// A page of `RideStore.rides(_:limit:)`, in one of two stable orders.
public enum RidePage: Sendable, Equatable {
    /// Every ride, open or ended, by (started_at, id) ascending, after `after`. A ride's
    /// start never changes, so a ride that ends while someone pages stays where it was.
    case byStart(after: RideKey?)
    /// Ended rides, newest first: by (ended_at, id) descending, before `before`.
    case ended(before: RideKey?)
}

extension StoredRide {
    /// The ride's place in `page`'s order (nil: an open ride has no place among ended ones).
    public func key(in page: RidePage) -> RideKey? {
        switch page {
        case .byStart: return RideKey(at: ride.startedAt, id: id)
        case .ended: return ride.endedAt.map { RideKey(at: $0, id: id) }
        }
    }
}

extension RideKey {
    /// (at, id) order, the one both stores page by.
    public static func < (a: RideKey, b: RideKey) -> Bool {
        a.at != b.at ? a.at < b.at : a.id < b.id
    }
}
