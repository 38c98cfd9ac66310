"""RidePushClient (the Swift SDK) against the real server: through a kill -9 and restart, a
start whose reply was lost in the crash, a token that expires mid-ride, and 1,000 clients in
one process. Drives `ridepush ride` (the CLI on the SDK) and `ridepush-sdk-probe` (a small
executable of the SDK that prints one JSON object per event)."""
import json
import os
import queue
import re
import socket
import subprocess
import threading
import time

from rp import BIN, ROOT, Client, Server
from test_security import ENV, jwt, now

PROBE = os.path.join(os.path.dirname(BIN), "ridepush-sdk-probe")


class Lines:
    """A child process whose stdout/stderr lines are read by threads into queues, with the
    monotonic time each arrived."""

    def __init__(self, cmd, env=None):
        e = dict(os.environ)
        e.pop("RIDEPUSH_TOKEN", None)
        e.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=ROOT)
        self.out = queue.Queue()
        self.err = []
        self.err_grew = threading.Condition()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.out.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self._err), daemon=True).start()

    def _err(self, item):
        with self.err_grew:
            self.err.append(item)
            self.err_grew.notify_all()

    def until_err(self, pred, timeout):
        """Waits (bounded) for a stderr line matching `pred`: stderr is read by its own thread,
        so a line written before a stdout line may still be on its way."""
        with self.err_grew:
            found = self.err_grew.wait_for(lambda: any(pred(l) for _, l in self.err), timeout)
        assert found, [l for _, l in self.err]

    @staticmethod
    def _pump(stream, put):
        for line in stream:
            put((time.monotonic(), line.rstrip("\n")))

    def next(self, timeout):
        return self.out.get(timeout=timeout)

    def until(self, pred, timeout, into=None):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no matching line in %ss; stderr: %r" % (timeout, [l for _, l in self.err][-5:])
            t, line = self.out.get(timeout=left)
            if into is not None:
                into.append((t, line))
            if pred(line):
                return t, line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def cli(*args, env=None, timeout=30):
    e = dict(os.environ)
    e.pop("RIDEPUSH_TOKEN", None)
    e.update(env or {})
    return subprocess.run([BIN, "ride", *args, "--lang", "en"], capture_output=True, text=True, env=e, timeout=timeout, cwd=ROOT)


SECONDS = re.compile(r"(?:(\d+)h )?(\d+)m (\d+)s")


def elapsed_of(line):
    """Elapsed seconds of a watch line: `r-1 riding 1m 02s · …` → 62."""
    m = SECONDS.search(line)
    assert m, line
    return int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + int(m.group(3))


def test_watch_through_kill9_and_restart_resumes_with_the_snapshot_and_elapsed_continues(tmp_path):
    store = str(tmp_path / "rides.db")
    srv = Server(store=store).start()
    port = srv.port
    probe = cli_watch = None
    try:
        assert cli("start", "--ride", "r-crash", "--url", srv.ws).returncode == 0
        probe = Lines([PROBE, "watch", srv.ws, "r-crash"])
        cli_watch = Lines([BIN, "ride", "watch", "r-crash", "--url", srv.ws, "--lang", "en"])
        events = []
        probe.until(lambda l: json.loads(l)["kind"] == "tick", 5, events)
        probe.until(lambda l: json.loads(l)["kind"] == "tick", 3, events)
        cli_watch.until(lambda l: "riding" in l, 5)
        before = [json.loads(l) for _, l in events if json.loads(l)["kind"] in ("state", "tick")]
        last_before = before[-1]["elapsed"]

        srv.kill9()
        killed = time.monotonic()
        time.sleep(2.0)  # down for 2 s: that time counts as riding
        srv = Server(store=store, port=port).start()

        after = []
        probe.until(lambda l: json.loads(l)["kind"] == "connected", 30, after)
        first = json.loads(probe.next(5)[1])
        assert first["kind"] == "state", first  # the fresh snapshot first
        assert first["state"] == "riding"
        assert first["elapsed"] >= last_before + 2, (first, last_before)
        assert first["elapsed"] <= last_before + 2 + (time.monotonic() - killed) + 1
        nxt = json.loads(probe.until(lambda l: json.loads(l)["kind"] == "tick", 3)[1])
        assert nxt["elapsed"] in (first["elapsed"], first["elapsed"] + 1)
        waits = [json.loads(l) for _, l in after if json.loads(l)["kind"] == "waiting"]
        assert waits and "1006" in waits[0]["why"], after

        # The CLI's watch kept going too, with the elapsed time continuing past the crash.
        lines = []
        cli_watch.until(lambda l: elapsed_of(l) >= last_before + 3, 30, lines)
        assert cli_watch.proc.poll() is None
        # stderr has its own reader thread, and in one CI run the "connected" line was not read yet
        # when stdout had passed the mark (after a backoff that had reached 3.1 s): wait for it.
        cli_watch.until_err(lambda l: l == "connected to " + srv.ws, 15)
        errs = [l for _, l in cli_watch.err]
        assert any(l.startswith("disconnected: closed by the server (1006)") for l in errs), errs
        seen = [elapsed_of(l) for _, l in lines]
        assert seen == sorted(seen), "never steps back: %r" % seen
    finally:
        for p in (probe, cli_watch):
            if p:
                p.stop()
        srv.stop()


class DropProxy:
    """TCP relay to the server that, on its first connection only, passes the server's
    upgrade response and then drops everything the server sends: a reply lost on the way."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._relay, args=(c, self.connections == 1), daemon=True).start()

    def _relay(self, c, lossy):
        try:
            u = socket.create_connection(("127.0.0.1", self.upstream), timeout=2)
        except OSError:
            c.close()
            return
        u.settimeout(None)

        def up():
            try:
                while True:
                    b = c.recv(65536)
                    if not b:
                        break
                    u.sendall(b)
            except OSError:
                pass
            for s in (u, c):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=up, daemon=True).start()
        head = b""
        passing = True
        try:
            while True:
                b = u.recv(65536)
                if not b:
                    break
                if lossy:
                    if passing:
                        head += b
                        end = head.find(b"\r\n\r\n")
                        if end >= 0:
                            c.sendall(head[:end + 4])
                            self.dropped += len(head) - end - 4
                            passing = False
                    else:
                        self.dropped += len(b)
                else:
                    c.sendall(b)
        except OSError:
            pass
        # shutdown, not only close: the other relay thread still sits in recv on these
        # sockets, and a plain close would send no FIN while it does.
        for s in (u, c):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.sock.close()


def test_a_start_whose_reply_was_lost_in_the_crash_is_retried_and_applied_once(tmp_path):
    store = str(tmp_path / "rides.db")
    srv = Server(store=store).start()
    port = srv.port
    proxy = DropProxy(port)
    start = None
    try:
        url = "ws://127.0.0.1:%d/ws" % proxy.port
        start = Lines([BIN, "ride", "start", "--ride", "r-lost", "--url", url, "--lang", "en", "--wait", "40"])
        deadline = time.monotonic() + 10
        while True:
            status, doc, _ = srv.get("/rides/r-lost")
            if status == 200:
                break
            assert time.monotonic() < deadline, "the start never reached the server"
            time.sleep(0.05)
        first_started_at = doc["started_at"]
        time.sleep(0.3)
        assert proxy.dropped > 0, "the reply was dropped"
        assert start.proc.poll() is None, "still waiting for its reply"

        srv.kill9()
        time.sleep(1.0)
        srv = Server(store=store, port=port).start()
        assert start.proc.wait(40) == 0, [l for _, l in start.err]
        line = start.next(1)[1]
        assert line.startswith("r-lost riding "), line
        assert proxy.connections >= 2
        status, doc, _ = srv.get("/rides/r-lost")
        assert status == 200 and doc["started_at"] == first_started_at, doc  # applied once
        # Applied once: a start with a new id for the same ride is a conflict.
        again = cli("start", "--ride", "r-lost", "--url", srv.ws)
        assert again.returncode == 1 and again.stderr.startswith("error conflict:"), again.stderr
    finally:
        if start:
            start.stop()
        proxy.close()
        srv.stop()


def test_a_token_that_expires_mid_ride_is_refreshed_and_the_watch_continues(tmp_path):
    with Server(auth="jwt", env=ENV) as srv:
        rider = jwt({"sub": "u1", "scope": "control", "exp": now() + 3600})
        assert cli("start", "--ride", "r-exp", "--url", srv.ws, "--token", rider).returncode == 0
        # Valid for about 5 s more: exp 25 s ago, and the server allows 30 s of leeway.
        short = jwt({"sub": "u1", "scope": "control", "exp": now() - 25})
        cut_at = time.monotonic() + 5
        renewed = tmp_path / "renewed.token"
        stale = tmp_path / "stale.token"
        renewed.write_text(short + "\n")
        stale.write_text(short + "\n")
        watch = Lines([BIN, "ride", "watch", "r-exp", "--url", srv.ws, "--token-file", str(renewed), "--lang", "en"])
        control = Lines([BIN, "ride", "watch", "r-exp", "--url", srv.ws, "--token-file", str(stale), "--lang", "en"])
        try:
            watch.until(lambda l: "riding" in l, 5)
            control.until(lambda l: "riding" in l, 5)
            # Another process renews the file; only `watch` reads the new token.
            renewed.write_text(jwt({"sub": "u1", "scope": "control", "exp": now() + 3600}) + "\n")
            lines = []
            t, line = watch.until(lambda l: time.monotonic() > cut_at + 4, 20, lines)
            assert watch.proc.poll() is None, [l for _, l in watch.err]
            assert "riding" in line
            seen = [elapsed_of(l) for _, l in lines]
            assert seen == sorted(seen) and seen[-1] >= seen[0] + 4, seen
            # The same expiry without a renewed token ends the other watch, saying what to do.
            assert control.proc.wait(15) == 1
            err = "\n".join(l for _, l in control.err)
            assert "token expired" in err and "--token TOKEN or RIDEPUSH_TOKEN" in err, err
        finally:
            watch.stop()
            control.stop()


def test_a_thousand_clients_in_one_process_each_watching_a_ride(tmp_path):
    n = 1000
    with Server("--control-rate", "100000", "--threads", "2") as srv:
        with Client(srv.ws) as c:
            for i in range(n):
                c.send({"type": "start", "id": "s%d" % i, "ride": "k-%d" % i})
            got = 0
            while got < n:
                m = c.recv(10)
                assert m["type"] == "state", m
                got += 1
        out = subprocess.run([PROBE, "many", srv.ws, "k", str(n), "3"], capture_output=True, text=True, timeout=180)
        rows = [json.loads(l) for l in out.stdout.splitlines()]
        result = [r for r in rows if r["kind"] == "result"][0]
        baseline = [r for r in rows if r["kind"] == "baseline"][0]
        print("\nSDK, %d clients in one process, each watching its own ride until 3 ticks: %s s; "
              "RSS %d kB (baseline %d kB, %s kB per client); threads %d; open files %d"
              % (n, result["seconds"], result["rss_kb"], baseline["rss_kb"], result["rss_kb_per_client"],
                 result["threads"], result["fds"]))
        assert [r for r in rows if r["kind"] == "error"] == []
        assert result["all_reached"] == 1 and result["reached"] == n
        # Bounded: one lws thread for every connection plus Swift's and Dispatch's pools,
        # however many clients; one socket each.
        assert result["threads"] <= 40, result
        assert n <= result["fds"] <= n + 40, result
        assert float(result["rss_kb_per_client"]) < 256, result
        status, health, _ = srv.get("/healthz")
        assert status == 200


def test_the_sdk_prints_nothing_unless_given_a_log_handler():
    """Issue 26: libwebsockets' banner ("N: LWS: 4.1.6-, loglevel 7") and notices never reach an
    app's stderr; with a handler, the client's own lines (and lws errors) go to the handler."""
    with Server() as srv:
        assert cli("start", "--ride", "r-quiet", "--url", srv.ws).returncode == 0
        quiet = Lines([PROBE, "watch", srv.ws, "r-quiet", "2.5"])
        logged = Lines([PROBE, "watch", srv.ws, "r-quiet", "2.5"], env={"RIDEPUSH_PROBE_LOG": "1"})
        try:
            for p in (quiet, logged):
                p.until(lambda l: json.loads(l)["kind"] == "tick", 5)
                assert p.proc.wait(10) == 0
            time.sleep(0.2)  # the stderr reader thread
            assert quiet.err == [], quiet.err
            errs = [l for _, l in logged.err]
            assert "log info connected to " + srv.ws in errs, errs
            assert all(l.startswith("log ") for l in errs), errs
            assert not any("LWS:" in l for l in errs), "lws notices stay off with a handler too: %r" % errs
        finally:
            quiet.stop()
            logged.stop()
        # Against a closed port the lws connection error reaches the handler, not stderr.
        url = "ws://127.0.0.1:%d/ws" % free_port()
        closed = Lines([PROBE, "watch", url, "r-x", "1.5"], env={"RIDEPUSH_PROBE_LOG": "1"})
        bare = Lines([PROBE, "watch", url, "r-x", "1.5"])
        try:
            assert closed.proc.wait(10) == 0 and bare.proc.wait(10) == 0
            time.sleep(0.2)
            assert bare.err == [], bare.err
            errs = [l for _, l in closed.err]
            assert any(l.startswith("log warning disconnected (cannotConnect(") for l in errs), errs
        finally:
            closed.stop()
            bare.stop()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
