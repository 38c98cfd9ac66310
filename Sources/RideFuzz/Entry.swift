import Foundation

// Built with `-sanitize=fuzzer` (make fuzz: -DFUZZING) this is a libFuzzer binary whose
// target is chosen by RIDEFUZZ_TARGET; built normally it replays files through a target
// (`RideFuzz TARGET FILE|DIR…`), which is how make test checks the seed corpora and how a
// crash file is re-run under a debugger.

#if FUZZING
nonisolated(unsafe) var selected: FuzzTarget = .json

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>) -> CInt {
    let name = ProcessInfo.processInfo.environment["RIDEFUZZ_TARGET"] ?? ""
    guard let t = FuzzTarget(rawValue: name) else {
        fatalError("RIDEFUZZ_TARGET must be one of \(FuzzTarget.allCases.map(\.rawValue))")
    }
    selected = t
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
#else
@main
struct Replay {
    static func main() {
        let args = CommandLine.arguments.dropFirst()
        guard let name = args.first, let target = FuzzTarget(rawValue: name), args.count > 1 else {
            FileHandle.standardError.write(Data("usage: RideFuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE|DIR…\n".utf8))
            exit(2)
        }
        var files: [String] = []
        for path in args.dropFirst() {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else { continue }
            if isDir.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.sorted().map { path + "/" + $0 }
            } else {
                files.append(path)
            }
        }
        for f in files {
            guard let data = FileManager.default.contents(atPath: f) else { continue }
            target.run(Array(data))
        }
        print("RideFuzz \(name): \(files.count) inputs replayed")
    }
}
#endif
