import RideOptions
import Testing

/// A table shaped like the real commands': every kind of option once.
let table = OptionTable(usage: "usage: demo [options] ACTION", about: "Does a demo.", options: [
    .string("--host", placeholder: "ADDR", env: "DEMO_HOST", default: "127.0.0.1", help: "address to bind"),
    .int("--port", range: 0...65535, env: "DEMO_PORT", default: 8080, help: "port, 0 picks a free one"),
    .int("-n", "--clients", range: 1...1_000_000, help: "connections"),
    .int("--wait", placeholder: "SECONDS", range: 1...Int.max, unit: "seconds", default: 15, help: "give up after this long"),
    .choice("--log-format", of: ["text", "json"], env: "DEMO_LOG", default: "text", help: "how lines look"),
    .flag("--trust-proxy", env: "DEMO_TRUST", help: "believe X-Real-IP"),
    .flag("--insecure", help: "accept a self-signed certificate"),
    .string("--ride", placeholder: "ID", repeatable: true, needs: "a ride id", help: "a ride"),
    .string("--allow-origin", placeholder: "ORIGIN", env: "DEMO_ORIGINS", repeatable: true, envSeparator: ",", help: "allowed Origin"),
    .int("--worker", range: 0...255, help: "internal", hidden: true),
])

func parse(_ args: [String], _ env: [String: String] = [:]) throws(OptionError) -> ParsedOptions {
    try table.parse(args, environment: env)
}

func failure(_ args: [String], _ env: [String: String] = [:]) -> String? {
    do { _ = try parse(args, env); return nil } catch { return error.description }
}

@Suite struct Parsing {
    @Test func defaultsWhenNothingIsGiven() throws {
        let o = try parse([])
        #expect(o.string("--host") == "127.0.0.1")
        #expect(o.int("--port") == 8080)
        #expect(o.int("--clients") == nil)
        #expect(o.int("--wait") == 15)
        #expect(o.string("--log-format") == "text")
        #expect(o.flag("--trust-proxy") == false)
        #expect(o.strings("--ride") == [])
        #expect(o.positional == [])
        #expect(o.help == false)
        #expect(o.isGiven("--port") == false)
    }

    @Test func bothLongFormsShortAliasesAndTheLastValueWins() throws {
        let o = try parse(["--port", "9001", "--host=::1", "-n", "40", "--clients=50", "--port=0", "start"])
        #expect(o.int("--port") == 0)
        #expect(o.string("--host") == "::1")
        #expect(o.int("-n") == 50)
        #expect(o.int("--clients") == 50)
        #expect(o.positional == ["start"])
        #expect(o.given == [
            .init(name: "--port", typed: "--port", value: "9001"), .init(name: "--host", typed: "--host", value: "::1"),
            .init(name: "--clients", typed: "-n", value: "40"), .init(name: "--clients", typed: "--clients", value: "50"),
            .init(name: "--port", typed: "--port", value: "0"),
        ])
        #expect(o.isGiven("--port"))
    }

    @Test func aValuedOptionTakesTheNextArgumentEvenWithADash() throws {
        let o = try parse(["--host", "-weird", "--ride", "--insecure"])
        #expect(o.string("--host") == "-weird")
        #expect(o.strings("--ride") == ["--insecure"])
        #expect(o.flag("--insecure") == false)
    }

    @Test func repeatableOptionsKeepEveryValueInOrder() throws {
        let o = try parse(["--ride", "r-1", "--ride=r-2", "--ride", "r-1"])
        #expect(o.strings("--ride") == ["r-1", "r-2", "r-1"])
        #expect(o.string("--ride") == "r-1")
    }

    @Test func flags() throws {
        #expect(try parse(["--insecure"]).flag("--insecure"))
        #expect(failure(["--insecure=yes"]) == "--insecure takes no value")
    }

    @Test func doubleDashEndsTheOptions() throws {
        let o = try parse(["--port", "1", "--", "--port", "-n"])
        #expect(o.int("--port") == 1)
        #expect(o.positional == ["--port", "-n"])
        #expect(failure(["--host", "--"]) == "--host needs a value")
    }

    @Test func helpAnywhereWinsOverEveryOtherProblem() throws {
        #expect(try parse(["--bogus", "--port", "x", "--help"]).help)
        #expect(try parse(["-h"]).help)
        #expect(try parse(["--", "--help"]).help == false)
    }

    @Test func integers() {
        #expect(failure(["--port", "65536"]) == "--port 65536: expected a whole number from 0 to 65535")
        #expect(failure(["--port=-1"]) == "--port -1: expected a whole number from 0 to 65535")
        #expect(failure(["-n", "0"]) == "-n 0: expected a whole number from 1 to 1000000")
        #expect(failure(["--clients", "+5"]) == "--clients +5: expected a whole number from 1 to 1000000")
        #expect(failure(["--clients", " 5"]) == "--clients  5: expected a whole number from 1 to 1000000")
        #expect(failure(["--clients", "1e3"]) == "--clients 1e3: expected a whole number from 1 to 1000000")
        #expect(failure(["--wait", "0"]) == "--wait 0: expected a whole number of seconds, at least 1")
        #expect(failure(["--wait", "99999999999999999999"]) == "--wait 99999999999999999999: expected a whole number of seconds, at least 1")
        #expect(failure(["--worker", "256"]) == "--worker 256: expected a whole number from 0 to 255")
    }

    @Test func integersAtTheEdgesOfTheirRange() throws {
        #expect(try parse(["--port", "0"]).int("--port") == 0)
        #expect(try parse(["--port", "65535"]).int("--port") == 65535)
        #expect(try parse(["--wait", "9223372036854775807"]).int("--wait") == Int.max)
        #expect(try parse(["-n", "007"]).int("-n") == 7)
    }

    @Test func choices() throws {
        #expect(try parse(["--log-format", "json"]).string("--log-format") == "json")
        #expect(failure(["--log-format", "xml"]) == "--log-format xml: expected text or json")
        let three = OptionTable(usage: "u", options: [.choice("--mode", of: ["a", "b", "c"], help: "m")])
        #expect(throws: OptionError.invalidValue("--mode d", expected: "a, b or c")) { try three.parse(["--mode", "d"]) }
        #expect(throws: OptionError.missingValue("--mode", needs: "one of a, b or c")) { try three.parse(["--mode"]) }
    }

    @Test func missingAndEmptyValues() {
        #expect(failure(["--port"]) == "--port needs a value")
        #expect(failure(["--ride"]) == "--ride needs a ride id")
        #expect(failure(["--ride="]) == "--ride needs a ride id")
        #expect(failure(["--ride", ""]) == "--ride needs a ride id")
    }

    @Test func unknownOptionsAndStrayArguments() throws {
        #expect(failure(["--frobnicate"]) == "unknown option --frobnicate")
        #expect(failure(["--frobnicate=1"]) == "unknown option --frobnicate")
        // `=` belongs to long options; a short one takes its value as the next argument.
        #expect(failure(["-n=5"]) == "unknown option -n=5")
        #expect(failure(["-x"]) == "unknown option -x")
        // A lone `-` is an argument (stdin, by convention), not an option.
        #expect(try parse(["-"]).positional == ["-"])
    }
}

@Suite struct Environment {
    @Test func theVariableStandsInForAMissingOption() throws {
        let o = try parse([], ["DEMO_HOST": "::", "DEMO_PORT": "9000", "DEMO_LOG": "json"])
        #expect(o.string("--host") == "::")
        #expect(o.int("--port") == 9000)
        #expect(o.string("--log-format") == "json")
        #expect(o.isGiven("--port") == false)
    }

    @Test func theCommandLineBeatsTheVariableAndABadUnusedVariableIsNotAnError() throws {
        let o = try parse(["--port", "1"], ["DEMO_PORT": "junk"])
        #expect(o.int("--port") == 1)
    }

    @Test func anEmptyVariableIsUnset() throws {
        let o = try parse([], ["DEMO_HOST": "", "DEMO_PORT": "", "DEMO_TRUST": ""])
        #expect(o.string("--host") == "127.0.0.1")
        #expect(o.int("--port") == 8080)
        #expect(o.flag("--trust-proxy") == false)
    }

    @Test func aBadVariableIsNamedWithItsValue() {
        #expect(failure([], ["DEMO_PORT": "80x"]) == "DEMO_PORT=80x: expected a whole number from 0 to 65535")
        #expect(failure([], ["DEMO_LOG": "xml"]) == "DEMO_LOG=xml: expected text or json")
        #expect(failure([], ["DEMO_TRUST": "maybe"]) == "DEMO_TRUST=maybe: expected 1 or 0")
    }

    @Test func flagVariables() throws {
        for yes in ["1", "true", "yes", "YES"] { #expect(try parse([], ["DEMO_TRUST": yes]).flag("--trust-proxy"), "\(yes)") }
        for no in ["0", "false", "no"] { #expect(try parse([], ["DEMO_TRUST": no]).flag("--trust-proxy") == false, "\(no)") }
        #expect(try parse(["--trust-proxy"], ["DEMO_TRUST": "0"]).flag("--trust-proxy"))
    }

    @Test func aListVariableIsSplitAndTrimmedAndTheCommandLineReplacesIt() throws {
        let env = ["DEMO_ORIGINS": " https://a.example , ,https://b.example"]
        #expect(try parse([], env).strings("--allow-origin") == ["https://a.example", "https://b.example"])
        #expect(try parse(["--allow-origin", "https://c.example"], env).strings("--allow-origin") == ["https://c.example"])
    }
}

@Suite struct Help {
    @Test func theHelpIsPrintedFromTheDeclarations() {
        let expected = """
        usage: demo [options] ACTION

        Does a demo.

        options:
          --host ADDR             address to bind (DEMO_HOST, default 127.0.0.1)
          --port N                port, 0 picks a free one (DEMO_PORT, default 8080)
          -n, --clients N         connections
          --wait SECONDS          give up after this long (default 15)
          --log-format text|json  how lines look (DEMO_LOG, default text)
          --trust-proxy           believe X-Real-IP (DEMO_TRUST=1)
          --insecure              accept a self-signed certificate
          --ride ID               a ride (repeatable)
          --allow-origin ORIGIN   allowed Origin (repeatable, DEMO_ORIGINS as a comma-separated list)
          -h, --help              show this help

        """
        #expect(table.help == expected)
    }

    @Test func longHeadsGetALineOfTheirOwnAndLongHelpWraps() {
        let t = OptionTable(usage: "usage: x", options: [
            .string("--a-very-long-option-name", placeholder: "VALUE", help: "short"),
            .flag("--b", help: "one two three four five six seven eight nine ten eleven twelve"),
        ], footer: "See the README.", width: 40)
        let expected = """
        usage: x

        options:
          --a-very-long-option-name VALUE
                      short
          --b         one two three four five
                      six seven eight nine ten
                      eleven twelve
          -h, --help  show this help

        See the README.

        """
        #expect(t.help == expected)
    }
}
