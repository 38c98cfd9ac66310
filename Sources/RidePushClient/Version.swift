extension RidePushClient {
    /// This SDK's semantic version, as CHANGELOG.md numbers it: what an app's bug report can
    /// name. Raised with the CHANGELOG heading when a version is released (docs/sdk.md).
    public static let version = "0.4.0"
}
