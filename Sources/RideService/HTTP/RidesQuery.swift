import RideCore
import RideStore

/// A well-formed `GET /rides?state=&rider=&limit=&cursor=` query (the router has checked the
/// ops token). Unknown or repeated parameters are refused, as `/quote` refuses them: a
/// misspelt `?ridr=alice` must not silently list every rider's rides.
package struct RidesQuery: Equatable, Sendable {
    /// nil: every ride, open or ended.
    package let state: RideState?
    /// Only this rider's rides (their tokens' `sub`); nil: every rider's.
    package let rider: String?
    package let limit: Int
    package let cursor: RideKey?

    /// `token` is the JWT where a header cannot be set: the router has read it already.
    package static let known = ["state", "rider", "limit", "cursor", "token"]
    package static let maxPage = 500
    package static let defaultPage = 100

    package init(state: RideState? = nil, rider: String? = nil, limit: Int = defaultPage, cursor: RideKey? = nil) {
        self.state = state
        self.rider = rider
        self.limit = limit
        self.cursor = cursor
    }

    /// The query, or the 400 that says which parameter is wrong and why.
    package static func parse(_ args: [(name: String, value: String)]) -> Result<RidesQuery, HTTPRefusalAnswer> {
        func bad(_ why: String) -> Result<RidesQuery, HTTPRefusalAnswer> { .failure(HTTPRefusalAnswer(.error(400, "bad_request", why))) }
        var seen: Set<String> = []
        for (name, _) in args {
            guard known.contains(name) else {
                return bad("unknown parameter \"\(name.prefix(40))\" (known: \(known.joined(separator: ", ")))")
            }
            guard seen.insert(name).inserted else { return bad("\(name)= is given more than once") }
        }
        func arg(_ name: String) -> String? { args.first { $0.name == name }?.value }
        var state: RideState?
        if let s = arg("state") {
            switch s {
            case "riding": state = .riding
            case "paused": state = .paused
            case "ended": state = .ended
            default: return bad("state= must be riding, paused or ended (or absent for every ride)")
            }
        }
        var rider: String?
        if let r = arg("rider") {
            guard ServerAPIRequest.isValidRider(r) else {
                return bad("rider= is a rider's id (their tokens' sub), 1-\(ServerAPIRequest.maxRiderBytes) bytes without control characters")
            }
            rider = r
        }
        var limit = defaultPage
        if let text = arg("limit") {
            guard let n = Int(text), n >= 1, n <= maxPage else { return bad("limit= must be a whole number from 1 to \(maxPage)") }
            limit = n
        }
        var cursor: RideKey?
        if let text = arg("cursor") {
            guard let k = OpsMessages.parseCursor(text) else { return bad("cursor= is not one this server returned in \"next\"") }
            cursor = k
        }
        return .success(RidesQuery(state: state, rider: rider, limit: limit, cursor: cursor))
    }

    /// The store's page for ended rides and for every ride (open rides are listed from memory).
    package var storePage: RidePage { state == .ended ? .ended(before: cursor) : .byStart(after: cursor) }

    /// Whether an open ride in memory belongs on this page (its key after the cursor).
    package func includes(open ride: Ride, key: RideKey) -> Bool {
        guard ride.state == state else { return false }
        if let rider, ride.owner != rider { return false }
        if let c = cursor, !(c < key) { return false }
        return true
    }
}
