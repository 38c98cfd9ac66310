#if canImport(ActivityKit) && canImport(WidgetKit) && canImport(SwiftUI)
import ActivityKit
import RidePushClient
import SwiftUI
import WidgetKit

/// The ride on the lock screen and in the Dynamic Island. An app's widget extension lists it
/// in its `WidgetBundle`. Every value comes from the pushed content-state through
/// `LockScreenRide`; the seconds count on the device, so the server pushes only changes.
public struct RideActivityWidget: Widget {
    public init() {}

    public var body: some WidgetConfiguration {
        ActivityConfiguration(for: RideAttributes.self) { context in
            RideLockScreenView(ride: LockScreenRide(context.state), plan: context.attributes.plan)
        } dynamicIsland: { context in
            DynamicIsland {
                DynamicIslandExpandedRegion(.leading) {
                    Text(LockScreenRide(context.state).title)
                }
                DynamicIslandExpandedRegion(.trailing) {
                    RideTime(ride: LockScreenRide(context.state))
                }
                DynamicIslandExpandedRegion(.bottom) {
                    RideFare(ride: LockScreenRide(context.state))
                }
            } compactLeading: {
                Image(systemName: "scooter")
            } compactTrailing: {
                RideTime(ride: LockScreenRide(context.state))
            } minimal: {
                Image(systemName: "scooter")
            }
        }
    }
}

struct RideLockScreenView: View {
    let ride: LockScreenRide
    let plan: String

    var body: some View {
        VStack(alignment: .leading, spacing: 4) {
            HStack {
                Text(ride.title).font(.headline)
                Spacer()
                RideTime(ride: ride).font(.title2)
            }
            RideFare(ride: ride)
            HStack {
                Text(plan)
                if let zone = ride.zoneText { Text(zone) }
                Spacer()
                if let limit = ride.limit { Text("ends by \(limit, style: .time)") }
            }
            .font(.caption)
            .foregroundStyle(.secondary)
        }
        .padding()
    }
}

/// A riding ride's time counts by itself from `timerStart`; a paused or ended one stands.
struct RideTime: View {
    let ride: LockScreenRide

    var body: some View {
        if let start = ride.timerStart {
            Text(timerInterval: start...Date.distantFuture, countsDown: false).monospacedDigit()
        } else {
            Text(ride.elapsedText).monospacedDigit()
        }
    }
}

struct RideFare: View {
    let ride: LockScreenRide

    var body: some View {
        HStack {
            if let fare = ride.fare { Text(fare, format: .currency(code: ride.currency)).bold() }
            if let next = ride.nextFare {
                Text("\(Text(next.amount, format: .currency(code: ride.currency))) from \(Text(next.at, style: .time))")
                    .font(.caption)
            }
        }
    }
}
#endif
