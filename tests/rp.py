"""Shared helpers for the integration tests: start the real `ridepush` binary on a free
port and talk ride.v1 to it over real sockets. Every wait is bounded."""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
import warnings

from websockets.sync.client import connect

BIN = os.environ.get("RIDEPUSH_BIN", os.path.join(os.path.dirname(__file__), "..", ".build", "debug", "ridepush"))
OUT = os.environ.get("RIDEPUSH_OUT", os.path.join(os.path.dirname(__file__), "..", "test-output"))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SERVING = re.compile(r"serving (https?)://([0-9.]+):(\d+)/")

# With RIDEPUSH_CHECK_SCHEMA=1 (make integration sets it) every message a Client receives is
# validated against docs/asyncapi.yaml; imported only then, so the helpers work without it.
if os.environ.get("RIDEPUSH_CHECK_SCHEMA") == "1":
    import contract
    _check = contract.check_server
else:
    def _check(msg):
        pass


def _decode(frame):
    msg = json.loads(frame)
    _check(msg)
    return msg


class Server:
    """One `ridepush serve` process. `args` are extra flags; the port is chosen by the
    server (--port 0) and read back from its 'serving' line."""

    def __init__(self, *args, store="memory", auth="none", env=None, port=0, public=None, popen_kwargs=None,
                 create_store=True):
        self.args = list(args)
        # A store file the test names is made if missing (serve refuses a new file without it).
        if create_store and store != "memory":
            self.args.append("--create-store")
        self.popen_kwargs = popen_kwargs or {}  # e.g. preexec_fn to lower the file limit
        self.store = store
        self.auth = auth
        self.env = env
        self.port = port
        self.public = public or os.path.join(ROOT, "public")
        self.proc = None
        self.lines = []
        self.scheme = "http"

    def start(self, timeout=15):
        cmd = [BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port),
               "--public", self.public, "--store", self.store]
        if self.auth is not None:
            cmd += ["--auth", self.auth]
        cmd += self.args
        env = dict(os.environ)
        # No drain unless a test asks (--drain-seconds, test_drain.py): every test's teardown
        # SIGTERMs a server that may still hold its clients, and 10 s of trickle each would
        # only slow the suite down.
        env.setdefault("RIDEPUSH_DRAIN_SECONDS", "0")
        if self.env:
            env.update(self.env)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, cwd=ROOT, **self.popen_kwargs)
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                m = SERVING.search(line)
                if m and not ready.is_set():
                    self.scheme, self.port = m.group(1), int(m.group(3))
                    ready.set()
        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.is_set():
            if self.proc.poll() is not None:
                time.sleep(0.1)
                raise RuntimeError("server exited with %s:\n%s" % (self.proc.returncode, "\n".join(self.lines)))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start in %ss:\n%s" % (timeout, "\n".join(self.lines)))
            ready.wait(0.05)
        return self

    @property
    def http(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    @property
    def ws(self):
        return "%s://127.0.0.1:%d/ws" % ("wss" if self.scheme == "https" else "ws", self.port)

    def stop(self, timeout=10):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode if self.proc else None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)

    def get(self, path, headers=None):
        """(status, parsed JSON or text, headers) of a GET."""
        req = urllib.request.Request(self.http + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                body, status, hdrs = r.read(), r.status, r.headers
        except urllib.error.HTTPError as e:
            body, status, hdrs = e.read(), e.code, e.headers
        ctype = hdrs.get("Content-Type", "")
        data = json.loads(body) if "json" in ctype else body.decode("utf-8", "replace")
        return status, data, hdrs

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Client:
    """A ride.v1 client: send dicts, receive dicts, with bounded waits."""

    def __init__(self, url, subprotocols=("ride.v1",), **kw):
        protocols = list(subprotocols) if subprotocols else None
        try:
            self.ws = connect(url, subprotocols=protocols, open_timeout=5, close_timeout=2, **kw)
        except TimeoutError:
            # websockets 13's threading client over TLS sometimes never sends its upgrade
            # request on a loaded machine: the server has finished TLS and waits (seen with
            # ss: client sent only ClientHello + Finished). curl and websockets' asyncio
            # client showed no such stall against the same server, so retry once, loudly.
            if not url.startswith("wss:"):
                raise
            warnings.warn("wss handshake to %s timed out once; retrying" % url)
            self.ws = connect(url, subprotocols=protocols, open_timeout=5, close_timeout=2, **kw)
        self.backlog = []

    def send(self, msg):
        self.ws.send(msg if isinstance(msg, (str, bytes)) else json.dumps(msg))

    def recv(self, timeout=3.0):
        if self.backlog:
            return self.backlog.pop(0)
        return _decode(self.ws.recv(timeout=timeout))

    def request(self, msg, timeout=3.0):
        """Send and return the reply carrying the same id (other messages are kept)."""
        msg = dict(msg)
        msg.setdefault("id", "q%d" % time.monotonic_ns())
        self.send(msg)
        return self.wait_for(lambda m: m.get("id") == msg["id"], timeout)

    def wait_for(self, pred, timeout=3.0):
        for i, m in enumerate(self.backlog):
            if pred(m):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching message in %.1fs (backlog %r)" % (timeout, self.backlog[-5:]))
            m = _decode(self.ws.recv(timeout=left))
            if pred(m):
                return m
            self.backlog.append(m)

    def close(self):
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
