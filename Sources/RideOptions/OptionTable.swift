/// A command's options, its usage lines and prose: parses argv and prints the help from the
/// same declarations. `-h`/`--help` is always understood and always listed last.
public struct OptionTable: Sendable {
    public let usage: String
    public let about: String?
    public let options: [Option]
    public let footer: String?
    /// Help lines are wrapped to this many columns.
    public let width: Int
    let byName: [String: Int]

    public static let helpNames = ["-h", "--help"]

    public init(usage: String, about: String? = nil, options: [Option], footer: String? = nil, width: Int = 96) {
        var byName: [String: Int] = [:]
        for (i, o) in options.enumerated() {
            for n in o.names {
                precondition(byName[n] == nil && !Self.helpNames.contains(n), "option \(n) declared twice")
                byName[n] = i
            }
        }
        self.usage = usage
        self.about = about
        self.options = options
        self.footer = footer
        self.width = width
        self.byName = byName
    }

    /// Reads `args` (those after the command's name). Long options take `--name value` or
    /// `--name=value`, short ones `-n value`; a valued option always takes the next argument,
    /// even one starting with `-`. `--` ends the options. When help is asked for anywhere,
    /// nothing else is checked. Every value is checked here, so the accessors cannot fail.
    public func parse(_ args: [String], environment: [String: String] = [:]) throws(OptionError) -> ParsedOptions {
        let optionEnd = args.firstIndex(of: "--") ?? args.endIndex
        if args[..<optionEnd].contains(where: { Self.helpNames.contains($0) }) {
            return ParsedOptions(table: self, help: true, positional: [], given: [], values: [:], flags: [:], integers: [:])
        }
        var positional: [String] = []
        var given: [ParsedOptions.Occurrence] = []
        var i = 0
        while i < optionEnd {
            let arg = args[i]
            i += 1
            guard arg.hasPrefix("-"), arg.count > 1 else { positional.append(arg); continue }
            var typed = arg
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                typed = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            guard let index = byName[typed] else { throw .unknownOption(typed) }
            let option = options[index]
            if option.kind == .flag {
                if inline != nil { throw .takesNoValue(typed) }
                given.append(.init(name: option.name, typed: typed, value: nil))
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else if i < optionEnd {
                value = args[i]
                i += 1
            } else {
                throw .missingValue(typed, needs: option.needs)
            }
            if value.isEmpty { throw .missingValue(typed, needs: option.needs) }
            try check(option, value, source: "\(typed) \(value)")
            given.append(.init(name: option.name, typed: typed, value: value))
        }
        if optionEnd < args.endIndex { positional += args[(optionEnd + 1)...] }

        // Each option's value: the command line's last, else the environment's, else the default.
        var values: [String: [String]] = [:]
        var flags: [String: Bool] = [:]
        var integers: [String: Int] = [:]
        for option in options {
            let typed = given.filter { $0.name == option.name }
            let fromEnv = option.env.flatMap { name in environment[name].flatMap { $0.isEmpty ? nil : (name, $0) } }
            if option.kind == .flag {
                if !typed.isEmpty {
                    flags[option.name] = true
                } else if let (name, text) = fromEnv {
                    switch text.lowercased() {
                    case "1", "true", "yes": flags[option.name] = true
                    case "0", "false", "no": flags[option.name] = false
                    default: throw .invalidValue("\(name)=\(text)", expected: "1 or 0")
                    }
                } else {
                    flags[option.name] = false
                }
                continue
            }
            var chosen: [String]
            if !typed.isEmpty {
                chosen = typed.map { $0.value! }
                if !option.repeatable { chosen = [chosen[chosen.count - 1]] }
            } else if let (name, text) = fromEnv {
                if let sep = option.envSeparator {
                    chosen = text.split(separator: sep).map { trimmed($0) }.filter { !$0.isEmpty }
                } else {
                    chosen = [text]
                }
                for v in chosen { try check(option, v, source: "\(name)=\(v)") }
            } else if let d = option.defaultValue {
                chosen = [d]
                do { try check(option, d, source: "default") } catch { preconditionFailure("\(option.name): bad default: \(error)") }
            } else {
                continue
            }
            values[option.name] = chosen
            if case .integer = option.kind, let last = chosen.last { integers[option.name] = Self.wholeNumber(last) }
        }
        return ParsedOptions(table: self, help: false, positional: positional, given: given, values: values, flags: flags,
                             integers: integers)
    }

    func check(_ option: Option, _ value: String, source: String) throws(OptionError) {
        switch option.kind {
        case .flag, .string: return
        case .choice(let choices):
            if !choices.contains(value) { throw .invalidValue(source, expected: option.expected) }
        case .integer(let range, _):
            guard let n = Self.wholeNumber(value), range.contains(n) else { throw .invalidValue(source, expected: option.expected) }
        }
    }

    /// Plain ASCII digits with an optional `-`; `+1`, ` 1`, `1e3` and overflow are not numbers.
    static func wholeNumber(_ text: String) -> Int? {
        let digits = text.hasPrefix("-") ? text.utf8.dropFirst() : text.utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    func index(of name: String) -> Int {
        guard let i = byName[name] else { preconditionFailure("option \(name) is not declared") }
        return i
    }
}

func trimmed(_ s: Substring) -> String {
    String(s.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
}

/// The outcome of one parse. Lookups take any of an option's names; asking for an option
/// that was never declared is a programming error and stops the program.
public struct ParsedOptions: Sendable {
    public struct Occurrence: Sendable, Equatable {
        /// The canonical name, what the user typed (an alias perhaps), and the value.
        public let name: String
        public let typed: String
        public let value: String?

        public init(name: String, typed: String, value: String?) {
            self.name = name
            self.typed = typed
            self.value = value
        }
    }

    let table: OptionTable
    /// `-h` or `--help` was given: print `table.help` and do nothing else.
    public let help: Bool
    public let positional: [String]
    /// Every option on the command line, in order.
    public let given: [Occurrence]
    let values: [String: [String]]
    let flags: [String: Bool]
    let integers: [String: Int]

    func canonical(_ name: String) -> String { table.options[table.index(of: name)].name }

    /// The command line's last value, else the environment's, else the default.
    public func string(_ name: String) -> String? { values[canonical(name)]?.last }
    /// A repeatable option's values: all from the command line, else the variable's list, else the default.
    public func strings(_ name: String) -> [String] { values[canonical(name)] ?? [] }
    public func int(_ name: String) -> Int? { integers[canonical(name)] }
    public func flag(_ name: String) -> Bool { flags[canonical(name)] ?? false }
    /// On the command line itself (not from the environment or a default).
    public func isGiven(_ name: String) -> Bool {
        let n = canonical(name)
        return given.contains { $0.name == n }
    }
}
