"""The soak (issue 15); prints figures, not a pass/fail test (a short run of it is
tests/test_soak.py):

  swift build -c release
  RIDEPUSH_BIN=$PWD/.build/release/ridepush .venv/bin/python tests/measure_soak.py \
      [--clients 2000] [--rate 200] [--seconds 600] [--rides 200]

A real server (SQLite store in a temporary folder, tokens on, JSON log) gets RIDES rides
started first; then clients connect at RATE per second for SECONDS, each subscribes to one
ride (every tenth to two), reads its state and ticks for CLIENTS / RATE seconds and closes, so
about CLIENTS are connected at any time and RATE x SECONDS connect in all. A warm-up of the
same churn for --warmup seconds comes first, then the baseline: the server's RSS and open
descriptors (/proc/PID) once every client of the warm-up has closed. Both are sampled every
--every seconds, and again at the end once every client has closed. Error and warn lines of
the server's log are counted (and the first ones printed). Targets: RSS back within 5 % of the
baseline, descriptors back to the baseline, no error line.

Bounded: at most RATE x SECONDS connections, each at most its lifetime plus 20 s; the whole
run at most SECONDS + warm-up + a minute."""
import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from rp import Server  # noqa: E402

from websockets.asyncio.client import connect  # noqa: E402  (the control connection only)

SECRET = "soak-secret-for-ridepush-0123456789-abcdef"


def token(sub, ops=False):
    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    now = int(time.time())
    claims = {"sub": sub, "scope": "control", "exp": now + 6 * 3600, "iat": now}
    if ops:
        claims["ops"] = True
    head = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(claims, separators=(",", ":")).encode())
    return head + "." + b64(hmac.new(SECRET.encode(), head.encode(), hashlib.sha256).digest())


def proc_figures(pid):
    """(RSS in KiB, open descriptors) of a process, from /proc."""
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def log_levels(lines):
    """The server's JSON log lines at error and at warn."""
    errors, warns = [], []
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            level = json.loads(line).get("level")
        except ValueError:
            errors.append(line)  # a half-written line is worth a look
            continue
        if level == "error":
            errors.append(line)
        elif level == "warn":
            warns.append(line)
    return errors, warns


def ws_frame(opcode, payload):
    """A masked client frame (payloads here are small)."""
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def read_frame(reader):
    """(opcode, payload) of one server frame (unmasked, never fragmented by RidePush)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(await reader.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await reader.readexactly(8), "big")
    return b0 & 0x0F, await reader.readexactly(n)


class Churn:
    """Clients that connect at `rate` per second, subscribe, read for `lifetime` s, close.
    A minimal WebSocket client on asyncio streams: websockets' asyncio client left thousands
    of sockets in CLOSE-WAIT at this rate (the server had closed them), which is the client's
    leak, not the server's; here every socket is closed in a finally."""

    def __init__(self, host, port, target, rides, lifetime):
        self.host, self.port, self.target = host, port, target
        self.rides, self.lifetime = rides, lifetime
        self.open = 0
        self.connected = 0
        self.ticks = 0
        self.failures = {}

    def fail(self, why):
        self.failures[why] = self.failures.get(why, 0) + 1

    async def client(self, k):
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 10)
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ride.v1\r\n\r\n"
                          % (self.target, self.host, self.port, key)).encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
            if not head.startswith(b"HTTP/1.1 101 ") or accept not in head:
                return self.fail("upgrade refused: " + head.split(b"\r\n")[0].decode("latin-1"))
            self.connected += 1
            self.open += 1
            try:
                wanted = [self.rides[k % len(self.rides)]]
                if k % 10 == 0:
                    wanted.append(self.rides[(k * 7 + 3) % len(self.rides)])
                for i, ride in enumerate(wanted):
                    writer.write(ws_frame(1, json.dumps({"type": "subscribe", "ride": ride, "id": "s%d" % i}).encode()))
                states = 0
                try:
                    # One deadline for the whole read (a wait_for per frame is a task each).
                    async with asyncio.timeout(self.lifetime):
                        while True:
                            op, payload = await read_frame(reader)
                            if op == 9:
                                writer.write(ws_frame(10, payload))
                                continue
                            if op != 1:
                                return self.fail("opcode %d from the server" % op)
                            if payload.startswith(b'{"type":"tick"'):
                                self.ticks += 1
                                continue
                            t = json.loads(payload).get("type")
                            if t != "state":
                                return self.fail("unexpected %s" % t)
                            states += 1
                except TimeoutError:
                    pass
                if states < len(wanted):
                    return self.fail("subscription not answered")
                # The closing handshake: our close, then the server's (and its TCP close).
                writer.write(ws_frame(8, (1000).to_bytes(2, "big")))
                async with asyncio.timeout(5):
                    while (await read_frame(reader))[0] != 8:
                        pass
            finally:
                self.open -= 1
        except Exception as e:  # counted by kind, printed at the end
            self.fail(type(e).__name__)
        finally:
            if writer is not None:
                writer.close()

    async def run(self, rate, seconds, on_second=None):
        """Starts rate x seconds clients on schedule; returns when every one has finished."""
        total = int(rate * seconds)
        start = time.monotonic()
        tasks = []
        for k in range(total):
            delay = start + k / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self.client(k)))
            if on_second and k % rate == 0:
                on_second(k // rate)
        done, pending = await asyncio.wait(tasks, timeout=self.lifetime + 20)
        for t in pending:
            t.cancel()
        if pending:
            self.failures["still open after lifetime + 20 s"] = len(pending)
        return total, time.monotonic() - start


async def settle(pid, baseline_fds, limit=20.0):
    """Waits (bounded) for the server to close what the clients closed."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if baseline_fds is not None and proc_figures(pid)[1] <= baseline_fds:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(5)  # the last closes and frees, and the server's heap trim (every 2 s)
    return proc_figures(pid)


async def soak(server, clients, rate, seconds, rides, warmup, every, out=print):
    """Runs the churn against `server` (started); returns the figures as a dict."""
    pid = server.proc.pid
    tok = token("soak")
    target = "/ws?token=" + tok
    ride_ids = ["soak-%d" % i for i in range(rides)]
    # The rides are started with an operator's token of the same rider (so the clients' token
    # may watch them): --max-open-rides-per-rider does not cap operators.
    ops_url = server.ws + "?token=" + token("soak", ops=True)
    async with connect(ops_url, subprotocols=["ride.v1"], open_timeout=10, ping_interval=None) as ctl:
        for i, r in enumerate(ride_ids):
            if i and i % 15 == 0:
                await asyncio.sleep(1.05)  # within --control-rate's default 20 per second
            await ctl.send(json.dumps({"type": "start", "ride": r, "id": r}))
            while True:
                m = json.loads(await asyncio.wait_for(ctl.recv(), 10))
                if m.get("id") == r:
                    assert m["type"] == "state", m
                    break
    lifetime = clients / rate
    started = await settle(pid, None, 0)
    out("started: %d rides; RSS %d KiB, %d fds" % (rides, started[0], started[1]))
    if warmup > 0:
        w = Churn("127.0.0.1", server.port, target, ride_ids, lifetime)
        n, took = await w.run(rate, warmup)
        out("warm-up: %d clients in %.1f s, failures %s" % (n, took, w.failures or "none"))
    base = await settle(pid, started[1])
    out("baseline: RSS %d KiB, %d fds" % base)
    samples = [(0, base[0], base[1], 0)]
    churn = Churn("127.0.0.1", server.port, target, ride_ids, lifetime)
    t0 = time.monotonic()

    def sample(second):
        if second > 0 and second % every == 0:
            rss, fds = proc_figures(pid)
            samples.append((second, rss, fds, churn.open))
            out("t=%4d s  RSS %7d KiB  fds %5d  clients open %5d  connected so far %d" % (second, rss, fds, churn.open, churn.connected))
    n, took = await churn.run(rate, seconds, sample)
    final = await settle(pid, base[1])
    errors, warns = log_levels(server.lines)
    return {
        "clients": clients, "rate": rate, "seconds": seconds, "rides": rides, "lifetime": lifetime,
        "launched": n, "connected": churn.connected, "ticks": churn.ticks, "failures": churn.failures,
        "took": took, "elapsed": time.monotonic() - t0,
        "started": started, "baseline": base, "final": final, "samples": samples,
        "peak_rss": max(s[1] for s in samples), "peak_fds": max(s[2] for s in samples),
        "errors": errors, "warns": warns,
    }


def report(r, out=print):
    (b_rss, b_fds), (f_rss, f_fds) = r["baseline"], r["final"]
    out("")
    out("clients: %d launched at %d/s over %.1f s (%d connected, %d ticks read), ~%d open at once (lifetime %.0f s)"
        % (r["launched"], r["rate"], r["took"], r["connected"], r["ticks"], r["clients"], r["lifetime"]))
    out("client failures: %s" % (r["failures"] or "none"))
    out("RSS: baseline %d KiB, peak %d KiB, end %d KiB (%+.1f %%)" % (b_rss, r["peak_rss"], f_rss, 100.0 * (f_rss - b_rss) / b_rss))
    out("fds: baseline %d, peak %d, end %d (%+d)" % (b_fds, r["peak_fds"], f_fds, f_fds - b_fds))
    out("server log: %d error lines, %d warn lines" % (len(r["errors"]), len(r["warns"])))
    for line in (r["errors"] + r["warns"])[:10]:
        out("  " + line[:300])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=2000, help="connected at once (lifetime = clients / rate)")
    ap.add_argument("--rate", type=int, default=200, help="connections per second")
    ap.add_argument("--seconds", type=int, default=600, help="length of the churn (at most 3600)")
    ap.add_argument("--rides", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20, help="seconds of the same churn before the baseline")
    ap.add_argument("--every", type=int, default=30, help="seconds between samples")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    assert 0 < a.seconds <= 3600 and 0 < a.rate <= 2000 and 0 < a.clients <= 10000
    extra = ["--log-format", "json", "--max-connections-per-ip", str(max(4096, 2 * a.clients))]
    if a.threads:
        extra += ["--threads", str(a.threads)]
    with tempfile.TemporaryDirectory() as d, \
            Server(*extra, store=os.path.join(d, "soak.db"), auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}) as srv:
        print("server pid %d, binary %s, %s" % (srv.proc.pid, os.environ.get("RIDEPUSH_BIN", "(default)"), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
        r = asyncio.run(soak(srv, a.clients, a.rate, a.seconds, a.rides, a.warmup, a.every))
        report(r)


if __name__ == "__main__":
    main()
