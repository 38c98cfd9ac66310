/// One command-line option, declared once: the parser reads it and the help text is printed
/// from it, so the two cannot disagree. The first long (`--`) name is the canonical one: what
/// `ParsedOptions.given` records; lookups take any of the names.
public struct Option: Sendable {
    public enum Kind: Sendable, Equatable {
        case flag
        case string
        /// A whole number in the range; `unit` ("seconds") only words the error.
        case integer(ClosedRange<Int>, unit: String?)
        case choice([String])
    }

    public let names: [String]
    public let kind: Kind
    /// What the value looks like in the help (`N`, `DIR`); choices show `a|b`.
    public let placeholder: String
    /// Read when the option is not on the command line; an empty variable counts as unset.
    public let env: String?
    /// Parsed and checked exactly like a typed value, so a default cannot be out of range.
    public let defaultValue: String?
    /// Shown instead of `defaultValue` when that is computed (`number of cores`).
    public let defaultShown: String?
    /// Every occurrence is kept (`strings`); otherwise the last one wins.
    public let repeatable: Bool
    /// For a repeatable option: the environment variable holds a list split on this.
    public let envSeparator: Character?
    /// The end of "--ride needs …" when the value is missing or empty.
    public let needs: String
    public let help: String
    /// Parsed but left out of the help (internal options such as the bench's `--worker`).
    public let hidden: Bool

    public var name: String { names.first { $0.hasPrefix("--") } ?? names[0] }

    init(names: [String], kind: Kind, placeholder: String, env: String?, defaultValue: String?, defaultShown: String?,
         repeatable: Bool, envSeparator: Character?, needs: String, help: String, hidden: Bool) {
        precondition(!names.isEmpty && names.allSatisfy { $0.hasPrefix("-") && $0.count > 1 && !$0.contains("=") },
                     "option names start with - and hold no =: \(names)")
        precondition(envSeparator == nil || repeatable, "\(names[0]): only a repeatable option splits its variable")
        self.names = names
        self.kind = kind
        self.placeholder = placeholder
        self.env = env
        self.defaultValue = defaultValue
        self.defaultShown = defaultShown
        self.repeatable = repeatable
        self.envSeparator = envSeparator
        self.needs = needs
        self.help = help
        self.hidden = hidden
    }

    /// A switch: present or not. With `env`, the variable may say 1/true/yes or 0/false/no.
    public static func flag(_ names: String..., env: String? = nil, help: String, hidden: Bool = false) -> Option {
        Option(names: names, kind: .flag, placeholder: "", env: env, defaultValue: nil, defaultShown: nil,
               repeatable: false, envSeparator: nil, needs: "", help: help, hidden: hidden)
    }

    public static func string(_ names: String..., placeholder: String, env: String? = nil, default defaultValue: String? = nil,
                              repeatable: Bool = false, envSeparator: Character? = nil, needs: String = "a value",
                              help: String, hidden: Bool = false) -> Option {
        Option(names: names, kind: .string, placeholder: placeholder, env: env, defaultValue: defaultValue, defaultShown: nil,
               repeatable: repeatable, envSeparator: envSeparator, needs: needs, help: help, hidden: hidden)
    }

    public static func int(_ names: String..., placeholder: String = "N", range: ClosedRange<Int>, unit: String? = nil,
                           env: String? = nil, default defaultValue: Int? = nil, defaultShown: String? = nil,
                           help: String, hidden: Bool = false) -> Option {
        Option(names: names, kind: .integer(range, unit: unit), placeholder: placeholder, env: env,
               defaultValue: defaultValue.map(String.init), defaultShown: defaultShown,
               repeatable: false, envSeparator: nil, needs: "a value", help: help, hidden: hidden)
    }

    public static func choice(_ names: String..., of choices: [String], env: String? = nil, default defaultValue: String? = nil,
                              help: String) -> Option {
        precondition(choices.count >= 2, "a choice needs two values or more")
        return Option(names: names, kind: .choice(choices), placeholder: choices.joined(separator: "|"), env: env,
                      defaultValue: defaultValue, defaultShown: nil, repeatable: false, envSeparator: nil,
                      needs: "one of " + OptionError.list(choices), help: help, hidden: false)
    }

    /// What a valid value is, in the words errors use: "a whole number from 0 to 65535".
    var expected: String {
        switch kind {
        case .flag, .string: return needs
        case .choice(let choices): return OptionError.list(choices)
        case .integer(let range, let unit):
            let what = unit.map { "a whole number of \($0)" } ?? "a whole number"
            return range.upperBound == Int.max ? "\(what), at least \(range.lowerBound)" : "\(what) from \(range.lowerBound) to \(range.upperBound)"
        }
    }
}
