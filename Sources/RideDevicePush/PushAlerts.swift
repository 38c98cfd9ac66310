import RideCore

/// The words that light the lock screen, in the plan's language: Korean when the plan has a
/// Korean name (the operator's market), English otherwise.
public enum PushAlerts {
    static func korean(_ plan: FarePlan) -> Bool { plan.names.keys.contains { $0.lowercased().hasPrefix("ko") } }

    /// 5 minutes or 1 minute left before the ride's time limit.
    public static func limitWarning(remaining seconds: Int64, plan: FarePlan) -> DevicePush.Alert {
        let minutes = max(1, (seconds + 59) / 60)
        if korean(plan) {
            return DevicePush.Alert(title: "\(minutes)분 남았습니다", body: "시간 제한에 이르면 대여가 자동으로 종료됩니다")
        }
        return DevicePush.Alert(title: minutes == 1 ? "1 minute left" : "\(minutes) minutes left",
                                body: "The ride ends by itself at its time limit")
    }

    /// A push-to-start: the ride the backend started.
    public static func started(plan: FarePlan) -> DevicePush.Alert {
        korean(plan) ? DevicePush.Alert(title: plan.displayName, body: "대여가 시작되었습니다")
            : DevicePush.Alert(title: plan.displayName, body: "Your ride has started")
    }
}
