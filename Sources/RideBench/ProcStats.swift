import Glibc

/// What /proc says about the server process.
enum ProcStats {
    static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { fread($0.baseAddress, 1, 4096, f) }
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// utime + stime in seconds (fields 14 and 15 of /proc/PID/stat, counted after the
    /// command name, which may itself contain spaces or parentheses).
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let s = readFile("/proc/\(pid)/stat"), let close = s.lastIndex(of: ")") else { return nil }
        let fields = s[s.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3), so utime (14) is fields[11], stime (15) fields[12].
        guard fields.count > 12, let u = Double(fields[11]), let st = Double(fields[12]) else { return nil }
        return (u + st) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A "Key:   123 kB" line of /proc/PID/status, in KiB.
    static func statusKiB(pid: Int32, key: String) -> Int? {
        guard let s = readFile("/proc/\(pid)/status") else { return nil }
        for line in s.split(separator: "\n") where line.hasPrefix(key + ":") {
            let parts = line.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" })
            if let v = parts.first.flatMap({ Int($0) }) { return v }
        }
        return nil
    }

    static func alive(pid: Int32) -> Bool {
        guard let s = readFile("/proc/\(pid)/stat"), let close = s.lastIndex(of: ")") else { return false }
        let state = s[s.index(after: close)...].dropFirst().first
        return state != "Z" && state != "X"
    }
}
