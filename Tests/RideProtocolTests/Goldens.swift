import Foundation

/// protocol/examples, read as bytes (without the trailing newline of the file).
enum Goldens {
    static let examples = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("protocol/examples")

    static func bytes(_ path: String) throws -> [UInt8] {
        var b = Array(try Data(contentsOf: examples.appendingPathComponent(path)))
        if b.last == 0x0A { b.removeLast() }
        return b
    }

    static func text(_ path: String) throws -> String { String(decoding: try bytes(path), as: UTF8.self) }

    /// `(name without .json, bytes)` of every example in `dir`, sorted by name.
    static func all(_ dir: String) throws -> [(String, [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: examples.appendingPathComponent(dir).path)
            .filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { (String($0.dropLast(5)), try bytes(dir + "/" + $0)) }
    }
}
