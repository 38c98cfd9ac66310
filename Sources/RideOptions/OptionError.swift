/// Why a command line was refused, naming the option (as typed) or the variable, and what
/// was expected. The command adds its own prefix (`ridepush serve: `) and hint.
public enum OptionError: Error, Equatable, CustomStringConvertible {
    case unknownOption(String)
    case unexpectedArgument(String)
    /// The option, and what it needs: "--ride needs a ride id".
    case missingValue(String, needs: String)
    case takesNoValue(String)
    /// Where the value came from (`--port 99999`, `RIDEPUSH_PORT=x`) and what was expected.
    case invalidValue(String, expected: String)

    public var description: String {
        switch self {
        case .unknownOption(let o): return "unknown option \(o)"
        case .unexpectedArgument(let a): return "unexpected argument \(a.isEmpty ? "\"\"" : a)"
        case .missingValue(let o, let needs): return "\(o) needs \(needs)"
        case .takesNoValue(let o): return "\(o) takes no value"
        case .invalidValue(let source, let expected): return "\(source): expected \(expected)"
        }
    }

    /// "a or b", "a, b or c".
    static func list(_ items: [String]) -> String {
        items.count < 2 ? items.joined() : items.dropLast().joined(separator: ", ") + " or " + items[items.count - 1]
    }
}
