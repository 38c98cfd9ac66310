import Glibc

/// Token times (`exp`, `nbf`, `iat`) are instants on the wall clock, so they are judged on it
/// as it reads at that moment. The process's ride clock slews toward the wall after a step (it
/// must never jump), and for the ~33 hours a 10-minute correction takes it would call a fresh
/// token "not yet valid" and accept one that expired minutes ago. Elapsed time and ticks stay
/// on the slewing clock.
public enum WallClock {
    /// Unix seconds now (CLOCK_REALTIME; a vDSO read, no system call).
    public static func seconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}
