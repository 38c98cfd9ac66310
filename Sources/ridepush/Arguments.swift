/// A small `--flag value` / `--flag=value` parser: the toolchain has no ArgumentParser here.
struct Arguments {
    private(set) var values: [String: String] = [:]
    private(set) var flags: Set<String> = []
    private(set) var multi: [String: [String]] = [:]
    private(set) var positional: [String] = []

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// `valued` lists the options that take a value; every other `--x` is a switch.
    init(_ args: [String], valued: Set<String>, switches: Set<String>) throws(Failure) {
        var i = 0
        while i < args.count {
            let a = args[i]
            i += 1
            guard a.hasPrefix("-"), a.count > 1 else { positional.append(a); continue }
            var name = a
            var inline: String?
            if let eq = a.firstIndex(of: "=") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            if valued.contains(name) {
                guard let v = inline ?? (i < args.count ? args[i] : nil) else { throw Failure(description: "\(name) needs a value") }
                if inline == nil { i += 1 }
                values[name] = v
                multi[name, default: []].append(v)
            } else if switches.contains(name), inline == nil {
                flags.insert(name)
            } else {
                throw Failure(description: "unknown option \(name) (see --help)")
            }
        }
    }

    subscript(_ name: String) -> String? { values[name] }
    func has(_ flag: String) -> Bool { flags.contains(flag) }
}
