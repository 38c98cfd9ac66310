import Foundation
import RideCore
import RideProtocol

/// What a committed transition owes the devices, as the outbox row written in the
/// transition's own transaction holds it (endpoint `OutboxEvent.pushEndpoint`): the ride's
/// content-state at the commit, and for a start who the rider is and the plan's name, so a
/// push-to-start can be built without reading the ride again. The sender turns it into pushes
/// once it knows the ride's targets; a crash before that leaves the row pending.
public struct PushIntent: Sendable, Equatable {
    /// The ride's journal seq of the transition (1 for its start).
    public var seq: Int64
    /// "start", "pause", "resume", "end".
    public var transition: String
    public var content: RideActivityContent
    /// The ride's rider (token `sub`, "" with auth off): whose push-to-start tokens a start uses.
    public var rider: String
    public var planName: String
    public var created: UnixMillis
    /// A start's alert for a push-to-start, in the plan's language (PushAlerts.started).
    public var alert: DevicePush.Alert?

    public init(seq: Int64, transition: String, content: RideActivityContent, rider: String, planName: String, created: UnixMillis,
                alert: DevicePush.Alert? = nil) {
        self.alert = alert
        self.seq = seq
        self.transition = transition
        self.content = content
        self.rider = rider
        self.planName = planName
        self.created = created
    }

    public var isStart: Bool { transition == "start" }

    /// `{"ride":…,"seq":…,"transition":…,"created":…,"rider":…,"plan":…,"content":{…}}`.
    public func body() -> [UInt8] {
        var w = JSONWriter(reserving: 384)
        w.beginObject()
        w.field("ride", content.ride)
        w.field("seq", seq)
        w.field("transition", transition)
        w.field("created", created)
        w.field("rider", rider)
        w.field("plan", planName)
        if let alert {
            w.key("alert")
            w.beginObject()
            w.field("title", alert.title)
            w.field("body", alert.body)
            w.endObject()
        }
        w.key("content")
        w.raw(content.json())
        w.endObject()
        return w.bytes
    }

    public enum DecodeError: Error, Equatable {
        case malformed(String)
    }

    private struct Wire: Decodable {
        var seq: Int64
        var transition: String
        var created: Int64
        var rider: String?
        var plan: String?
        var content: RideActivityContent
        var alert: WireAlert?
    }

    private struct WireAlert: Decodable {
        var title: String
        var body: String
    }

    /// A row's body back; a body this build cannot read is an error the sender logs and skips.
    public init(body: [UInt8]) throws(DecodeError) {
        let w: Wire
        do { w = try JSONDecoder().decode(Wire.self, from: Data(body)) } catch {
            throw .malformed("not a push intent: \(error)")
        }
        self.init(seq: w.seq, transition: w.transition, content: w.content, rider: w.rider ?? "", planName: w.plan ?? "",
                  created: w.created, alert: w.alert.map { DevicePush.Alert(title: $0.title, body: $0.body) })
    }
}
