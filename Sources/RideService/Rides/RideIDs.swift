import RideProtocol

/// The ride ids a connection is subscribed to, in order, as `Connection` keeps them: one
/// String of the ids joined by spaces, which a ride id never holds. Nearly every connection
/// watches one ride with a short id: held inline (16 bytes inside the connection, no heap)
/// instead of an array of one (a 64-byte heap block per connection).
package struct RideIDs {
    private var joined = ""

    package init(_ ids: [String] = []) {
        for id in ids {
            // Only validated ride ids get here (ClientCodec): 1-64 of A-Z a-z 0-9 - _ . :
            precondition(ClientCodec.isValidRideID(id), "not a ride id: \(id.prefix(80))")
        }
        joined = ids.joined(separator: " ")
    }

    package var array: [String] { joined.isEmpty ? [] : joined.split(separator: " ").map(String.init) }
}
