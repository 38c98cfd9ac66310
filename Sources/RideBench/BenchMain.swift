import Glibc

/// `ridepush bench …` (arguments after "bench"). The parent spreads the clients over
/// worker processes (the same binary re-executed with `--worker I`), because one process
/// may hold at most ~20,000 files here.
public func benchMain(arguments: [String]) -> Int32 {
    if arguments.contains("--tick-encode") { return TickEncodeBench.main(arguments) }
    if arguments.contains("--transitions") {
        do {
            let t = try TransitionOptions.parse(arguments)
            if t.help { print(TransitionOptions.usage, terminator: ""); return 0 }
            return TransitionBench.run(t)
        } catch {
            printErr("ridepush bench --transitions: \(error)\n\n\(TransitionOptions.usage)")
            return 2
        }
    }
    let options: BenchOptions
    do {
        options = try BenchOptions.parse(arguments)
    } catch {
        printErr("ridepush bench: \(error)\n\n\(BenchOptions.usage)")
        return 2
    }
    if options.help {
        print(BenchOptions.usage, terminator: "")
        return 0
    }
    if let w = options.workerIndex {
        return Worker(options: options, index: w).run()
    }
    return Coordinator(options: options, arguments: arguments).run()
}
