import Glibc

/// The parent process: starts P workers (`/proc/self/exe bench --worker I …`), waits
/// until all have finished connecting, gives them one shared window, samples the server
/// in /proc at the window's edges, and merges their results.
final class Coordinator {
    private struct Child {
        var pid: pid_t
        var toChild: Int32     // its stdin
        var fromChild: Int32   // its stdout
        var pending: [UInt8] = []
        var ready: WorkerReport?
        var result: WorkerReport?
        var eof = false
    }

    let o: BenchOptions
    let args: [String]
    private var children: [Child] = []

    init(options: BenchOptions, arguments: [String]) {
        o = options
        args = arguments
    }

    func run() -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        var server: ServerSample?
        if let pid = o.serverPID {
            guard ProcStats.alive(pid: pid) else { return fail("no running process with pid \(pid)") }
            // Baseline before the first connection, so RSS per subscriber is what they add.
            server = ServerSample(pid: pid, rssBeforeKiB: ProcStats.statusKiB(pid: pid, key: "VmRSS"))
        }
        let procs = o.effectiveProcs
        for w in 0..<procs {
            guard let c = spawn(worker: w, procs: procs) else {
                stopChildren()
                return fail("could not start worker process \(w)")
            }
            children.append(c)
        }
        if !o.json {
            printErr("bench: \(o.clients) clients over \(procs) worker process(es), ramp \(o.ramp)/s, connecting…\n")
        }

        // 1. Connect phase: wait for every worker's "ready" line (or its exit).
        let readyDeadline = monotonicMicros() + Int64(o.connectTimeout + 30) * 1_000_000
        while children.contains(where: { $0.ready == nil && !$0.eof }) && monotonicMicros() < readyDeadline {
            pump(timeoutMillis: 200)
        }
        let readyAt = children.compactMap { $0.ready?.readyAtMillis }.max() ?? Int64(realtimeMillis())
        let window = BenchWindow.after(readyMillis: max(readyAt, Int64(realtimeMillis())),
                                       warmup: o.warmup, duration: o.duration, grace: o.grace)
        let line = Array("window \(window.t0) \(window.t1) \(window.end)\n".utf8)
        for c in children where !c.eof {
            _ = line.withUnsafeBytes { write(c.toChild, $0.baseAddress, line.count) }
        }
        if !o.json {
            let connected = children.compactMap { $0.ready?.connected }.reduce(0, +)
            printErr("bench: \(connected) connected; measuring \(o.duration) s…\n")
        }

        // 2. Window: sample the server at t0 and t1 while waiting for results.
        var t0Sampled = false, t1Sampled = false
        let resultDeadline = window.end + 30_000
        while children.contains(where: { $0.result == nil && !$0.eof }) && Int64(realtimeMillis()) < resultDeadline {
            let now = Int64(realtimeMillis())
            if !t0Sampled && now >= window.t0 {
                t0Sampled = true
                if let pid = o.serverPID { server?.cpuAtT0 = ProcStats.cpuSeconds(pid: pid) }
            }
            if !t1Sampled && now >= window.t1 {
                t1Sampled = true
                if let pid = o.serverPID {
                    server?.cpuAtT1 = ProcStats.cpuSeconds(pid: pid)
                    server?.rssAfterKiB = ProcStats.statusKiB(pid: pid, key: "VmRSS")
                    server?.hwmKiB = ProcStats.statusKiB(pid: pid, key: "VmHWM")
                    server?.alive = ProcStats.alive(pid: pid)
                }
            }
            let next = !t0Sampled ? window.t0 : (!t1Sampled ? window.t1 : now + 200)
            pump(timeoutMillis: Int32(clamping: max(1, min(200, next - now))))
        }
        if !t1Sampled { server?.cpuAtT1 = nil }
        stopChildren()

        let reports = children.compactMap(\.result)
        let summary = BenchSummary(options: o, window: window, reports: reports, server: server)
        if !o.json {
            print(summary.table)
            print("")
            if reports.count < procs {
                printErr("bench: \(procs - reports.count) worker(s) gave no result; their clients are not counted\n")
            }
        }
        print(summary.json.text)
        fflush(nil)
        // Non-zero when a worker was lost or nothing connected: scripts must not record
        // an empty run as a benchmark.
        return reports.count == procs && summary.connected > 0 ? 0 : 1
    }

    private func fail(_ message: String) -> Int32 {
        printErr("ridepush bench: \(message)\n")
        return 1
    }

    private func spawn(worker w: Int, procs: Int) -> Child? {
        var inPipe: [Int32] = [0, 0], outPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0 else { return nil }
        // Close-on-exec so one worker does not inherit its siblings' pipe ends.
        for fd in inPipe + outPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var fa = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fa)
        defer { posix_spawn_file_actions_destroy(&fa) }
        posix_spawn_file_actions_adddup2(&fa, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&fa, outPipe[1], 1)
        // The CLI is `ridepush bench …`: re-exec ourselves; later flags override earlier.
        let argv = ["ridepush", "bench"] + args + ["--worker", String(w), "--procs", String(procs)]
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cargs.append(nil)
        defer { for p in cargs { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/proc/self/exe", &fa, nil, cargs, environ)
        close(inPipe[0]); close(outPipe[1])
        guard rc == 0 else { close(inPipe[1]); close(outPipe[0]); return nil }
        _ = fcntl(outPipe[0], F_SETFL, fcntl(outPipe[0], F_GETFL) | O_NONBLOCK)
        return Child(pid: pid, toChild: inPipe[1], fromChild: outPipe[0])
    }

    /// Reads whatever the workers wrote, for up to `timeoutMillis`.
    private func pump(timeoutMillis: Int32) {
        var fds = children.map { pollfd(fd: $0.eof ? -1 : $0.fromChild, events: Int16(POLLIN), revents: 0) }
        let n = poll(&fds, nfds_t(fds.count), timeoutMillis)
        guard n > 0 else { return }
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        for i in fds.indices where fds[i].revents != 0 {
            while true {
                let r = buf.withUnsafeMutableBytes { read(children[i].fromChild, $0.baseAddress, 1 << 16) }
                if r > 0 { children[i].pending += buf[0..<r]; continue }
                if r == 0 { children[i].eof = true }
                else if errno != EAGAIN && errno != EINTR { children[i].eof = true }
                break
            }
            while let nl = children[i].pending.firstIndex(of: 0x0A) {
                let line = String(decoding: children[i].pending[..<nl], as: UTF8.self)
                children[i].pending.removeSubrange(...nl)
                guard let r = decodeWorkerReport(line) else { continue }
                if r.event == "ready" { children[i].ready = r } else { children[i].result = r }
            }
        }
    }

    /// Closes the workers' stdin (they stop on EOF) and reaps them; one that does not
    /// exit within 5 s is killed by its own PID.
    private func stopChildren() {
        for c in children { close(c.toChild) }
        let deadline = monotonicMicros() + 5_000_000
        for i in children.indices {
            var status: Int32 = 0
            while waitpid(children[i].pid, &status, WNOHANG) == 0 {
                if monotonicMicros() > deadline { kill(children[i].pid, SIGKILL); waitpid(children[i].pid, &status, 0); break }
                usleep(20_000)
            }
            close(children[i].fromChild)
        }
    }
}
