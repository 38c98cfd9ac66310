import Glibc
import RideService

/// The `process_*` figures Prometheus' client libraries export, read from /proc at scrape
/// time (never on the tick path): enough for "connections near the file limit" and memory.
package enum ProcessStats {
    /// Entries of /proc/self/fd, less the one the listing itself holds open.
    package static func openFiles() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var n = 0
        while let e = readdir(dir) {
            let first = withUnsafeBytes(of: e.pointee.d_name) { $0[0] }
            if first != UInt8(ascii: ".") { n += 1 }
        }
        return n - 1
    }

    /// The soft RLIMIT_NOFILE: what accept() runs into.
    package static func maxFiles() -> Int? {
        var r = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) == 0, r.rlim_cur != rlim_t.max else { return nil }
        return Int(r.rlim_cur)
    }

    /// Resident set size in bytes (/proc/self/statm's second field, in pages).
    package static func residentBytes() -> Int? {
        guard let statm = readSmall("/proc/self/statm") else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count >= 2, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// When this process started, Unix seconds: boot time + the start tick in /proc/self/stat.
    package static let startTime: Double? = {
        guard let stat = readSmall("/proc/self/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after "(comm)": state is field 3, starttime field 22.
        let after = stat[stat.index(after: close)...].split(separator: " ")
        guard after.count > 19, let ticks = Double(after[19]) else { return nil }
        guard let s = readSmall("/proc/stat"),
              let line = s.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let boot = Double(line.dropFirst(6)) else { return nil }
        return boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }()

    private static func readSmall(_ path: String) -> String? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var out = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 4096)
        while out.count < 1 << 16 {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension ProcessStats {
    /// What /metrics renders of this process (RideServer.metricsText).
    static func figures() -> ProcessFigures {
        ProcessFigures(openFiles: openFiles(), maxFiles: maxFiles(), residentBytes: residentBytes(), startTime: startTime)
    }
}
