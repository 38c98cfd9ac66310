import Foundation
import RideAuth
import RideBench
import RidePushServer
import RideService

let usage = """
ridepush — live ride push server

usage:
  ridepush serve [--host H] [--port P] [--public DIR] [--store PATH|memory] ...
  ridepush ride start [--ride ID] [--plan P] [--limit S] [--url ws://…/ws] [--token T]
  ridepush ride pause|resume|get|share ID [--url …] [--token T]
  ridepush ride end ID [--distance METRES] [--force] [--url …] [--token T]
  ridepush ride watch ID [--url …] [--token T]
  ridepush ride simulate ID --gpx TRACK.gpx [--speed X] [--url …] [--token T]
  ridepush token [--watch|--control] [--ride ID] [--sub RIDER] [--ops] [--ttl 2h] [--store PATH]
  ridepush backup --store PATH --to FILE [--force] [--pages N]
  ridepush bench --url ws://127.0.0.1:8080/ws -n CLIENTS ...
  ridepush --version

Each command takes --help.
"""

LogSink.install(.text)  // every command logs like the server until `serve` picks its format
let argv = CommandLine.arguments
let rest = Array(argv.dropFirst(2))
let status: Int32
switch argv.count > 1 ? argv[1] : "" {
case "":
    // No command is a usage error (a script that forgot it must not read success).
    FileHandle.standardError.write(Data("ridepush: give a command\n\n\(usage)\n".utf8))
    status = 2
case "serve": status = serveCommand(rest)
case "ride": status = rideCommand(rest)
case "token":
    let (out, code) = tokenCommand(arguments: rest, environment: ProcessInfo.processInfo.environment)
    if code == 0 { print(out, terminator: out.hasSuffix("\n") ? "" : "\n") } else {
        FileHandle.standardError.write(Data((out.hasSuffix("\n") ? out : out + "\n").utf8))
    }
    status = code
case "backup": status = backupCommand(rest)
case "bench": status = benchMain(arguments: rest)
case "--version", "version": print("ridepush \(BuildInfo.version) (commit \(BuildInfo.commit))"); status = 0
case "--help", "-h", "help": print(usage); status = 0
default:
    FileHandle.standardError.write(Data("ridepush: unknown command \(argv[1])\n\n\(usage)\n".utf8))
    status = 2
}
exit(status)
