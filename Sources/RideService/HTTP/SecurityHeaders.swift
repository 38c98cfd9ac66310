/// Sent with every HTTP response, lws's and ours: the page may run only its own scripts and
/// talk only to its own origin (which includes its WebSocket). Names as lws takes them
/// (lower-case, ending in a colon).
package enum SecurityHeaders {
    package static let all: [(name: String, value: String)] = [
        ("content-security-policy:", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("x-content-type-options:", "nosniff"),
        ("referrer-policy:", "no-referrer"),
        ("x-frame-options:", "DENY"),
    ]
}
