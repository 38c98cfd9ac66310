/// Which build is running: `ridepush --version`, `/healthz` and `ridepush_build_info`.
public enum BuildInfo: BuildStampDefault {
    public static let version = "0.9.0"
}

/// `make` writes Sources/RidePushServer/BuildStamp.swift (git-ignored) with
/// `extension BuildInfo { public static let commit = "…" }`. A member of the type itself wins
/// over this protocol default, so a plain `swift build` without that file still compiles and
/// says "unknown" instead of failing.
public protocol BuildStampDefault {}

extension BuildStampDefault {
    public static var commit: String { "unknown" }
}
