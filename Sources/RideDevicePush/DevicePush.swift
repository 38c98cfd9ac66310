import RideCore
import RideProtocol

/// One push to one device, platform-neutral: what the schedule decides to send and what the
/// APNs and FCM builders turn into a request.
public struct DevicePush: Sendable, Equatable {
    /// ActivityKit's `event`.
    public enum Event: String, Sendable, Equatable {
        case update, end, start
    }

    /// APNs' `apns-priority`: 10 is delivered at once (and budgeted per app per hour), 5 when
    /// the device sees fit. FCM's `android.priority` follows (high, normal).
    public enum Priority: Int, Sendable, Equatable {
        case immediate = 10
        case opportunistic = 5
    }

    /// What lights the screen: the limit warnings, a push-to-start.
    public struct Alert: Sendable, Equatable {
        public var title: String
        public var body: String
        public init(title: String, body: String) {
            self.title = title
            self.body = body
        }
    }

    /// What a push-to-start creates the activity with (`attributes-type` "RideAttributes").
    public struct StartAttributes: Sendable, Equatable {
        public var ride: String
        public var planName: String
        public init(ride: String, planName: String) {
            self.ride = ride
            self.planName = planName
        }
    }

    public var event: Event
    public var priority: Priority
    public var content: RideActivityContent
    /// Unix seconds after which the device shows the content as out of date.
    public var staleDate: Int64?
    /// `end` only: Unix seconds the ended activity leaves the lock screen.
    public var dismissalDate: Int64?
    public var alert: Alert?
    /// `start` only.
    public var attributes: StartAttributes?

    public init(event: Event, priority: Priority, content: RideActivityContent, staleDate: Int64? = nil,
                dismissalDate: Int64? = nil, alert: Alert? = nil, attributes: StartAttributes? = nil) {
        self.event = event
        self.priority = priority
        self.content = content
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.alert = alert
        self.attributes = attributes
    }

    /// ActivityKit's `timestamp`: Unix seconds of the content, which orders updates on the
    /// device (an older one than it has is dropped).
    public var timestamp: Int64 { seconds(content.at) }
}

/// Unix milliseconds as whole Unix seconds, rounding down (also before 1970).
func seconds(_ ms: UnixMillis) -> Int64 { ms >= 0 ? ms / 1000 : (ms - 999) / 1000 }

/// Unix milliseconds as whole Unix seconds, rounding up: a date that must not come early.
func secondsUp(_ ms: UnixMillis) -> Int64 { -seconds(-ms) }
