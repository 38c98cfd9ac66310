import CLibPQ
import Foundation
import RideStore

/// How a PostgreSQL call failed, in the terms its caller acts on.
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Could not connect or authenticate (libpq's own words say which).
        case connect
        /// The connection broke during the call. For a COMMIT the outcome is unknown: it may
        /// have committed, so the caller must not assume "nothing applied" — it re-reads.
        case lost
        /// No answer within the deadline; the connection was closed (a server that is
        /// stopped or unreachable never answers, and TCP alone may not notice for minutes).
        case timeout
        /// PostgreSQL answered with an error; `sqlState` says which.
        case server
        /// A value PostgreSQL cannot hold (a NUL inside text).
        case value
    }

    public let kind: Kind
    /// The five-character SQLSTATE for `.server` (e.g. 23505 unique_violation).
    public let sqlState: String?
    public let message: String

    public init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }

    var isUniqueViolation: Bool { sqlState == "23505" }
}

/// A value bound to a `$n` parameter. Integers and text go in text format (the server parses
/// them as whatever type the statement gives the parameter); bytes go in binary format, so
/// they need no escaping.
enum PGValue {
    case int(Int64)
    case text(String)
    case bytes([UInt8])
    case null

    static func int(_ v: Int64?) -> PGValue { v.map { .int($0) } ?? .null }
    static func text(_ v: String?) -> PGValue { v.map { .text($0) } ?? .null }
}

/// A query's result, in text format. Owns the libpq result and frees it.
final class PGResult {
    private let res: OpaquePointer

    init(_ res: OpaquePointer) { self.res = res }
    deinit { PQclear(res) }

    var count: Int { Int(PQntuples(res)) }
    /// Rows touched by INSERT/UPDATE/DELETE.
    var affected: Int { Int(String(cString: PQcmdTuples(res))) ?? 0 }

    func isNull(_ row: Int, _ col: Int) -> Bool { PQgetisnull(res, Int32(row), Int32(col)) == 1 }

    func text(_ row: Int, _ col: Int) -> String {
        let n = Int(PQgetlength(res, Int32(row), Int32(col)))
        guard let p = PQgetvalue(res, Int32(row), Int32(col)) else { return "" }
        return p.withMemoryRebound(to: UInt8.self, capacity: n) {
            String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
        }
    }

    func optionalText(_ row: Int, _ col: Int) -> String? { isNull(row, col) ? nil : text(row, col) }

    func int(_ row: Int, _ col: Int) -> Int64? { isNull(row, col) ? nil : Int64(text(row, col)) }

    /// A bytea column in text format: `\x` and two hex digits a byte.
    func bytes(_ row: Int, _ col: Int) -> [UInt8]? {
        guard !isNull(row, col) else { return nil }
        let hex = Array(text(row, col).utf8)
        guard hex.count >= 2, hex[0] == UInt8(ascii: "\\"), hex[1] == UInt8(ascii: "x"), hex.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity((hex.count - 2) / 2)
        var i = 2
        while i < hex.count {
            guard let hi = nibble(hex[i]), let lo = nibble(hex[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// One `NOTIFY` received on a listening connection.
public struct PostgresNotification: Sendable, Equatable {
    public let channel: String
    public let payload: String
    /// The server process that sent it (tells a node's own notifications from others').
    public let senderPID: Int32
}

/// One libpq connection, driven through libpq's asynchronous API so every call has a
/// deadline: connect, send and wait all poll the socket with a timeout, and a call that runs
/// out of time closes the connection rather than block its thread. A server that is gone
/// (stopped, unplugged, SIGSTOPped) is therefore noticed within the deadline, not when TCP
/// gives up minutes later. Not thread-safe: one owner thread, like the stores.
final class PostgresConnection {
    let settings: PostgresSettings
    private var conn: OpaquePointer?
    /// Statement name per SQL text prepared on this session: a group's writes are the same
    /// few statements over and over, and parsing and planning each one again cost PostgreSQL
    /// about as much as running it (pgbench, 40 starts per transaction: 34–40 ms unprepared,
    /// 17–19 ms prepared). Session state, so a new connection starts empty; bounded.
    private var prepared: [String: String] = [:]
    static let maxPrepared = 16

    /// Connects within `settings.connectTimeoutMillis` and sets the session up.
    init(_ settings: PostgresSettings) throws(PostgresError) {
        self.settings = settings
        try connect()
    }

    deinit { close() }

    var isOpen: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// The server process id of this session (`pg_backend_pid()`), 0 when closed.
    var backendPID: Int32 { conn.map { PQbackendPID($0) } ?? 0 }

    /// Which server this session reached and which session it is, read once at connect:
    /// after a connection breaks during COMMIT, the store compares the server it reaches
    /// next with this one (the same postmaster: wait for the old session to end; another
    /// one, a promoted standby: the old session's transaction is decided there already).
    struct Identity: Equatable, Sendable {
        /// `pg_postmaster_start_time()` and the port: a restarted or promoted-elsewhere
        /// server differs in one of them.
        var server: String
        var pid: Int32
        /// `backend_start` of this session, so a reused PID is never mistaken for it.
        var backendStart: String
    }
    private(set) var identity = Identity(server: "", pid: 0, backendStart: "")

    /// Whether the session is still there, judged without waiting: a server that closed it
    /// while it was idle (a terminated backend, a shutdown, a primary that died and reset the
    /// socket) has left its last words and the end of the stream to read. Called between
    /// calls only; closes the connection when it is gone. Sending a group on such a session
    /// would lose it with its COMMIT, an outcome that then has to be read back, though
    /// nothing could have been applied.
    func stillThere() -> Bool {
        guard let c = conn, PQstatus(c) == CONNECTION_OK else { return false }
        // A few reads at most: the FATAL message and the end of the stream may take one each.
        for _ in 0..<4 {
            var p = pollfd(fd: PQsocket(c), events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 0) > 0 else { return true }
            guard PQconsumeInput(c) == 1, PQstatus(c) == CONNECTION_OK else {
                close()
                return false
            }
        }
        return true
    }

    func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// Runs SQL, which may hold several statements when `params` is empty (DDL, `SET`s).
    /// Returns the last statement's result; throws the first error. The deadline is the
    /// session's statement_timeout plus a margin, so a server that answers at all answers
    /// with its own clean 57014 error first and the connection stays usable.
    @discardableResult
    func query(_ sql: String, _ params: [PGValue] = [], timeoutMillis: Int? = nil) throws(PostgresError) -> PGResult {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMillis ?? settings.statementTimeoutMillis + 2_000)
        let c = try handle()
        if params.isEmpty {
            guard PQsendQuery(c, sql) == 1 else { throw lost("sending a query") }
        } else {
            try send(c, sql, params)
        }
        try flush(c, until: deadline)
        var first: PostgresError?
        var last: OpaquePointer?
        while true {
            while PQisBusy(c) == 1 {
                _ = try wait(c, Int16(POLLIN), until: deadline)
                guard PQconsumeInput(c) == 1 else {
                    if let last { PQclear(last) }
                    throw lost("reading a reply")
                }
            }
            guard let r = PQgetResult(c) else { break }
            switch PQresultStatus(r) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                if let last { PQclear(last) }
                last = r
            default:
                if first == nil { first = serverError(r) }
                PQclear(r)
            }
        }
        if PQstatus(c) != CONNECTION_OK {
            if let last { PQclear(last) }
            throw lost("during the query")
        }
        if let first {
            if let last { PQclear(last) }
            throw first
        }
        guard let last else { throw PostgresError(.server, "PostgreSQL returned no result") }
        return PGResult(last)
    }

    /// Runs `statements` in one round trip (libpq pipeline mode: all sent, then one sync) and
    /// returns their results in order. After an error PostgreSQL skips the rest; the first
    /// error is thrown (inside a transaction, the transaction is then aborted).
    func pipeline(_ statements: [(sql: String, params: [PGValue])], timeoutMillis: Int? = nil) throws(PostgresError) -> [PGResult] {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMillis ?? settings.statementTimeoutMillis + 2_000)
        let c = try handle()
        // Refused before anything is sent: a refusal halfway through would leave the session
        // in pipeline mode with half a request queued.
        for st in statements {
            for case .text(let s) in st.params where s.utf8.contains(0) {
                throw PostgresError(.value, "PostgreSQL text cannot hold a NUL character")
            }
        }
        guard PQenterPipelineMode(c) == 1 else { throw lost("entering pipeline mode") }
        // In order, what each sent message answers with: a statement's result, or (nil) the
        // result of preparing the SQL text named so.
        var replies: [String?] = []
        var preparing: [String: String] = [:]
        for st in statements {
            var name = prepared[st.sql] ?? preparing[st.sql]
            if name == nil, !st.params.isEmpty, prepared.count + preparing.count < Self.maxPrepared {
                let n = "ridepush_\(prepared.count + preparing.count + 1)"
                guard PQsendPrepare(c, n, st.sql, Int32(st.params.count), nil) == 1 else { throw lost("sending a query") }
                preparing[st.sql] = n
                replies.append(n)
                name = n
            }
            try send(c, st.sql, st.params, prepared: name)
            replies.append(nil)
        }
        guard PQpipelineSync(c) == 1 else { throw lost("sending a pipeline") }
        try flush(c, until: deadline)
        var results: [PGResult] = []
        var first: PostgresError?
        for preparedName in replies {
            var ok = false
            while let r = try nextResult(c, until: deadline) {  // a NULL ends each message's results
                switch PQresultStatus(r) {
                case PGRES_COMMAND_OK where preparedName != nil:
                    ok = true
                    PQclear(r)
                case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                    results.append(PGResult(r))
                case PGRES_PIPELINE_ABORTED:
                    PQclear(r)
                    if first == nil { first = PostgresError(.server, "statement skipped after an earlier error in the pipeline") }
                default:
                    if first == nil { first = serverError(r) }
                    PQclear(r)
                }
            }
            // Prepared statements outlive a rolled-back transaction; one that failed to
            // prepare (an aborted pipeline) is prepared again next time.
            if let n = preparedName, ok, let sql = preparing.first(where: { $0.value == n })?.key { prepared[sql] = n }
        }
        guard let sync = try nextResult(c, until: deadline) else { throw lost("reading a pipeline's end") }
        let status = PQresultStatus(sync)
        PQclear(sync)
        guard status == PGRES_PIPELINE_SYNC, PQexitPipelineMode(c) == 1 else { throw lost("leaving pipeline mode") }
        if let first { throw first }
        return results
    }

    private func nextResult(_ c: OpaquePointer, until deadline: ContinuousClock.Instant) throws(PostgresError) -> OpaquePointer? {
        while PQisBusy(c) == 1 {
            _ = try wait(c, Int16(POLLIN), until: deadline)
            guard PQconsumeInput(c) == 1 else { throw lost("reading a reply") }
        }
        return PQgetResult(c)
    }

    /// Notifications that have arrived, waiting up to `millis` for the first one. Reading
    /// also notices a connection the server closed (e.g. `pg_terminate_backend`).
    func notifications(waitingUpTo millis: Int) throws(PostgresError) -> [PostgresNotification] {
        let c = try handle()
        var out = drainNotifications(c)
        if !out.isEmpty { return out }
        var p = pollfd(fd: PQsocket(c), events: Int16(POLLIN), revents: 0)
        let n = poll(&p, 1, Int32(max(0, millis)))
        if n < 0 && errno != EINTR { throw lost("waiting for notifications (poll: \(String(cString: strerror(errno))))") }
        if n > 0 {
            guard PQconsumeInput(c) == 1, PQstatus(c) == CONNECTION_OK else { throw lost("waiting for notifications") }
            out = drainNotifications(c)
        }
        return out
    }

    // MARK: private

    private func handle() throws(PostgresError) -> OpaquePointer {
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            throw PostgresError(.lost, "not connected")
        }
        return conn
    }

    private func connect() throws(PostgresError) {
        // Order matters: libpq keeps the last value of a repeated keyword. Defaults come
        // first so the URI (expanded from `dbname`) overrides them; what must hold whatever
        // the URI says (UTF-8, the name, a password file's password) comes after it.
        var pairs: [(String, String)] = [
            ("connect_timeout", String(max(2, (settings.connectTimeoutMillis + 999) / 1000))),
            ("keepalives", "1"),
            ("keepalives_idle", "5"),
            ("keepalives_interval", "2"),
            ("keepalives_count", "2"),
            // Unacknowledged data (a request sent to a host that vanished) fails after this.
            ("tcp_user_timeout", String(settings.statementTimeoutMillis)),
            ("dbname", settings.uri),
            ("client_encoding", "UTF8"),
            // Ours, whatever the URI says: operators find a node's two sessions by it.
            ("application_name", settings.applicationName),
        ]
        if let password = settings.password { pairs.append(("password", password)) }
        let keys = pairs.map { strdup($0.0) }
        let values = pairs.map { strdup($0.1) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        var kp: [UnsafePointer<CChar>?] = keys.map { UnsafePointer($0) } + [nil]
        var vp: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) } + [nil]
        guard let c = PQconnectStartParams(&kp, &vp, 1) else {
            throw PostgresError(.connect, "out of memory starting a connection")
        }
        conn = c
        if PQstatus(c) == CONNECTION_BAD { throw failed("cannot connect") }
        // libpq applies connect_timeout to each host of a multi-host URI in turn, so the whole
        // attempt may take that long per host: a dead first host (a lost primary that does not
        // refuse, just drops packets) must not use up the time the next one needs.
        let deadline = ContinuousClock.now + .milliseconds(settings.connectTimeoutMillis * max(1, settings.hostCount))
        var state = PGRES_POLLING_WRITING
        loop: while true {
            switch state {
            case PGRES_POLLING_OK: break loop
            case PGRES_POLLING_FAILED: throw failed("cannot connect")
            case PGRES_POLLING_READING:
                do { _ = try wait(c, Int16(POLLIN), until: deadline) } catch { close(); throw timedOut(error, "connecting") }
            default:
                do { _ = try wait(c, Int16(POLLOUT), until: deadline) } catch { close(); throw timedOut(error, "connecting") }
            }
            state = PQconnectPoll(c)
        }
        guard PQsetnonblocking(c, 1) == 0 else { throw failed("cannot switch to non-blocking mode") }
        // synchronous_commit on: a COMMIT returns only once its WAL is flushed (and, with
        // synchronous standbys configured, confirmed by them), so nothing is acknowledged
        // before it is durable. The timeouts keep a stuck lock or a forgotten transaction
        // from holding a node's store thread.
        do {
            let r = try query("""
                SET synchronous_commit = on;
                SET statement_timeout = \(settings.statementTimeoutMillis);
                SET lock_timeout = \(settings.statementTimeoutMillis);
                SET idle_in_transaction_session_timeout = \(settings.statementTimeoutMillis * 2);
                SET client_min_messages = warning;
                SELECT pg_postmaster_start_time()::text || ' port ' || COALESCE(inet_server_port()::text, 'socket'),
                       pg_backend_pid(), (SELECT backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid());
                """, timeoutMillis: settings.connectTimeoutMillis)
            identity = Identity(server: r.text(0, 0), pid: Int32(r.int(0, 1) ?? 0), backendStart: r.optionalText(0, 2) ?? "")
        } catch {
            close()
            throw PostgresError(.connect, "connected but cannot set the session up: \(error.message)", sqlState: error.sqlState)
        }
    }

    private func send(_ c: OpaquePointer, _ sql: String, _ params: [PGValue], prepared name: String? = nil) throws(PostgresError) {
        var buffers: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        defer { buffers.forEach { $0?.deallocate() } }
        for p in params {
            switch p {
            case .null:
                buffers.append(nil); lengths.append(0); formats.append(0)
            case .int(let v):
                buffers.append(cString(Array(String(v).utf8))); lengths.append(0); formats.append(0)
            case .text(let s):
                let u = Array(s.utf8)
                if u.contains(0) { throw PostgresError(.value, "PostgreSQL text cannot hold a NUL character") }
                buffers.append(cString(u)); lengths.append(0); formats.append(0)
            case .bytes(let b):
                let buf = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, b.count))
                b.withUnsafeBytes { raw in
                    if let base = raw.baseAddress { UnsafeMutableRawPointer(buf).copyMemory(from: base, byteCount: b.count) }
                }
                buffers.append(buf); lengths.append(Int32(b.count)); formats.append(1)
            }
        }
        var values: [UnsafePointer<CChar>?] = buffers.map { $0.map { UnsafePointer($0) } }
        let ok = name.map { PQsendQueryPrepared(c, $0, Int32(params.count), &values, &lengths, &formats, 0) }
            ?? PQsendQueryParams(c, sql, Int32(params.count), nil, &values, &lengths, &formats, 0)
        guard ok == 1 else { throw lost("sending a query") }
    }

    private func cString(_ u: [UInt8]) -> UnsafeMutablePointer<CChar> {
        let buf = UnsafeMutablePointer<CChar>.allocate(capacity: u.count + 1)
        for (i, b) in u.enumerated() { buf[i] = CChar(bitPattern: b) }
        buf[u.count] = 0
        return buf
    }

    /// Pushes the whole request out (non-blocking mode may leave some of it buffered).
    private func flush(_ c: OpaquePointer, until deadline: ContinuousClock.Instant) throws(PostgresError) {
        while true {
            let r = PQflush(c)
            if r == 0 { return }
            if r < 0 { throw lost("sending a query") }
            let revents = try wait(c, Int16(POLLIN | POLLOUT), until: deadline)
            if revents & Int16(POLLIN) != 0, PQconsumeInput(c) != 1 { throw lost("sending a query") }
        }
    }

    /// Waits for the socket; on the deadline closes the connection and throws `.timeout`.
    private func wait(_ c: OpaquePointer, _ events: Int16, until deadline: ContinuousClock.Instant) throws(PostgresError) -> Int16 {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            let ms = left <= .zero ? 0 : Int32(min(Int64(Int32.max), left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1))
            if left <= .zero {
                close()
                throw PostgresError(.timeout, "no answer from PostgreSQL within the deadline; connection closed")
            }
            var p = pollfd(fd: PQsocket(c), events: events, revents: 0)
            let n = poll(&p, 1, ms)
            if n > 0 { return p.revents }
            if n < 0 && errno != EINTR {
                let why = String(cString: strerror(errno))
                close()
                throw PostgresError(.lost, "poll failed (\(why))")
            }
        }
    }

    private func drainNotifications(_ c: OpaquePointer) -> [PostgresNotification] {
        var out: [PostgresNotification] = []
        while let n = PQnotifies(c) {
            out.append(PostgresNotification(channel: String(cString: n.pointee.relname),
                                            payload: String(cString: n.pointee.extra),
                                            senderPID: n.pointee.be_pid))
            PQfreemem(n)
        }
        return out
    }

    private func libpqMessage() -> String {
        guard let conn, let m = PQerrorMessage(conn) else { return "connection closed" }
        let s = String(cString: m).trimmingCharacters(in: .whitespacesAndNewlines)
        return s.isEmpty ? "connection closed" : s
    }

    private func failed(_ what: String) -> PostgresError {
        let e = PostgresError(.connect, "\(what): \(libpqMessage())")
        close()
        return e
    }

    private func timedOut(_ e: PostgresError, _ what: String) -> PostgresError {
        e.kind == .timeout ? PostgresError(.timeout, "no answer within \(settings.connectTimeoutMillis) ms while \(what)") : e
    }

    private func lost(_ what: String) -> PostgresError {
        let e = PostgresError(.lost, "connection lost \(what): \(libpqMessage())")
        close()
        return e
    }

    private func serverError(_ r: OpaquePointer) -> PostgresError {
        let state = PQresultErrorField(r, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        var msg = PQresultErrorMessage(r).map { String(cString: $0) } ?? "error"
        msg = msg.trimmingCharacters(in: .whitespacesAndNewlines)
        return PostgresError(.server, msg, sqlState: state)
    }
}
