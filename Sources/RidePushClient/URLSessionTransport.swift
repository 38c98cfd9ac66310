#if canImport(Darwin)
import Foundation

/// URLSessionWebSocketTask as a transport, for iOS and macOS apps. Not built or tested in
/// this repository's CI (Linux); Foundation's WebSocket task has no backend on Linux.
public final class URLSessionTransport: NSObject, RidePushTransport, URLSessionWebSocketDelegate, @unchecked Sendable {  // the delegate queue (serial) owns `session`, `task`, `events`
    // Mutated on the session's delegate queue (serial), and by `open` before any delegate call.
    private var session: URLSession?
    private var task: URLSessionWebSocketTask?
    private var events: (@Sendable (TransportEvent) -> Void)?
    private let queue: OperationQueue = {
        let q = OperationQueue()
        q.maxConcurrentOperationCount = 1
        return q
    }()

    public override init() { super.init() }

    public func open(_ url: URL, subprotocol: String, events: @escaping @Sendable (TransportEvent) -> Void) {
        queue.addOperation { [self] in
            self.events = events
            let session = URLSession(configuration: .default, delegate: self, delegateQueue: queue)
            // URLSession sends no Origin header for a WebSocket task.
            let task = session.webSocketTask(with: url, protocols: [subprotocol])
            self.session = session
            self.task = task
            task.resume()
        }
    }

    public func send(_ text: [UInt8]) {
        let message = URLSessionWebSocketTask.Message.string(String(decoding: text, as: UTF8.self))
        queue.addOperation { [self] in
            task?.send(message) { _ in /* a failed send ends the task; didComplete reports it */ }
        }
    }

    public func close(code: UInt16) {
        queue.addOperation { [self] in
            events = nil
            task?.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .normalClosure, reason: nil)
            session?.finishTasksAndInvalidate()
        }
    }

    private func receive() {
        task?.receive { [weak self] result in
            guard let self else { return }
            self.queue.addOperation {
                switch result {
                case .success(.string(let s)):
                    self.events?(.message(Array(s.utf8)))
                    self.receive()
                case .success(.data(let d)):
                    self.events?(.message(Array(d)))
                    self.receive()
                case .success:
                    self.receive()
                case .failure:
                    break // didCompleteWithError or didCloseWith reports the end
                }
            }
        }
    }

    public func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?) {
        events?(.opened)
        receive()
    }

    public func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask,
                           didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
        finish(.closed(code: UInt16(clamping: closeCode.rawValue), reason: reason.map { String(decoding: $0, as: UTF8.self) } ?? ""))
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let ws = task as? URLSessionWebSocketTask, ws.closeCode != .invalid {
            finish(.closed(code: UInt16(clamping: ws.closeCode.rawValue), reason: ""))
        } else if let error {
            finish(.failed("\(task.originalRequest?.url?.absoluteString ?? ""): \(error.localizedDescription)"))
        } else {
            finish(.closed(code: 1006, reason: ""))
        }
    }

    private func finish(_ ev: TransportEvent) {
        guard let e = events else { return }
        events = nil
        e(ev)
        session?.finishTasksAndInvalidate()
    }
}
#endif
