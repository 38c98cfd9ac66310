extension OptionTable {
    /// The usage lines, the prose, every option with its help, where it can also come from
    /// and its default, then the footer; wrapped to `width`.
    public var help: String {
        let shown = options.filter { !$0.hidden }
        let heads = shown.map(Self.head) + [Self.helpNames.joined(separator: ", ")]
        let helps = shown.map(Self.fullHelp) + ["show this help"]
        // A head longer than 24 goes on a line of its own rather than pushing every column right.
        let column = 2 + (heads.map(\.count).filter { $0 <= 24 }.max() ?? 0) + 2
        var out = usage
        if let about { out += "\n\n" + about }
        out += "\n\noptions:\n"
        for (head, text) in zip(heads, helps) {
            let lines = Self.wrap(text, width: max(20, width - column))
            let pad = String(repeating: " ", count: column)
            if 2 + head.count + 2 <= column {
                out += "  " + head + String(repeating: " ", count: column - 2 - head.count) + lines[0] + "\n"
            } else {
                out += "  " + head + "\n" + pad + lines[0] + "\n"
            }
            for l in lines.dropFirst() { out += pad + l + "\n" }
        }
        if let footer { out += "\n" + footer + "\n" }
        return out
    }

    /// `-n, --clients N`, `--log-format text|json`, `--trust-proxy`.
    static func head(_ o: Option) -> String {
        let names = o.names.filter { !$0.hasPrefix("--") } + o.names.filter { $0.hasPrefix("--") }
        return names.joined(separator: ", ") + (o.kind == .flag ? "" : " " + o.placeholder)
    }

    /// The help sentence plus what the declaration says besides: "(RIDEPUSH_PORT, default 8080)".
    static func fullHelp(_ o: Option) -> String {
        var extra: [String] = []
        if o.repeatable { extra.append("repeatable") }
        if let env = o.env {
            if o.kind == .flag {
                extra.append("\(env)=1")
            } else if o.envSeparator != nil {
                extra.append("\(env) as a comma-separated list")
            } else {
                extra.append(env)
            }
        }
        if let d = o.defaultShown ?? o.defaultValue { extra.append("default \(d)") }
        return extra.isEmpty ? o.help : o.help + " (" + extra.joined(separator: ", ") + ")"
    }

    /// Greedy word wrap; a word longer than the width gets a line of its own.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        lines.append(line)
        return lines
    }
}
