import Foundation

/// What happens on one WebSocket connection, reported by a transport from any thread.
public enum TransportEvent: Sendable, Equatable {
    /// The upgrade succeeded (subprotocol ride.v1).
    case opened
    /// One complete text message.
    case message([UInt8])
    /// The connection closed; 1006 when it ended without a close frame.
    case closed(code: UInt16, reason: String)
    /// The connection could not be opened.
    case failed(String)
}

/// One WebSocket connection. The client makes a new one per attempt and ignores a
/// transport's events once it has moved on. `open` is called once; after `.closed` or
/// `.failed` the transport reports nothing more.
public protocol RidePushTransport: AnyObject, Sendable {
    func open(_ url: URL, subprotocol: String, events: @escaping @Sendable (TransportEvent) -> Void)
    func send(_ text: [UInt8])
    func close(code: UInt16)
}

public protocol RidePushTransportFactory: Sendable {
    func makeTransport() -> any RidePushTransport
}

/// The platform's transport: libwebsockets' client on Linux, URLSessionWebSocketTask on
/// Apple platforms.
public struct DefaultTransportFactory: RidePushTransportFactory {
    /// wss:// only: accept a self-signed certificate (a test server). Linux only.
    public var allowSelfSigned: Bool
    public init(allowSelfSigned: Bool = false) { self.allowSelfSigned = allowSelfSigned }

    public func makeTransport() -> any RidePushTransport {
        #if canImport(Darwin)
        return URLSessionTransport()
        #else
        return LWSTransport(allowSelfSigned: allowSelfSigned)
        #endif
    }
}
