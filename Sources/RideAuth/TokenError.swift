/// Why a token was refused. `message` is meant for the client (it goes into the
/// `unauthorized` error), so it names the problem without echoing secrets or long input.
public struct TokenError: Error, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case malformed
        case badSignature
        /// An asymmetric token whose `kid` names no configured key (or that has none).
        case unknownKey
        case unsupportedAlgorithm
        case expired
        case notYetValid
        case invalidClaims
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

extension TokenError: Sendable {}
