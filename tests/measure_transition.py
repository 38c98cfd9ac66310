"""Measures what one ride transition costs (issue 4), not a pass/fail test:

  .venv/bin/python tests/measure_transition.py [--n 200] [--dir DIR]

1. pause/resume round trips over a real WebSocket to `ridepush serve --store FILE` (SQLite,
   WAL, synchronous=FULL: one fsync per transition before the reply), median and p90;
2. the same against `--store memory` (protocol cost without the store);
3. the store's append alone: the same SQL in one BEGIN IMMEDIATE … COMMIT on the same
   schema with the same pragmas, through Python's sqlite3 (the fsync included).
DIR (default: a temp dir under /tmp) decides which disk is measured."""
import argparse
import base64
import json
import os
import socket
import struct
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from rp import Client, Server  # noqa: E402


def summary(name, xs):
    xs = sorted(xs)
    ms = [x * 1000 for x in xs]
    print("%-46s n=%d median %.3f ms  p90 %.3f ms  min %.3f ms  max %.3f ms" % (
        name, len(ms), statistics.median(ms), ms[int(len(ms) * 0.9)], ms[0], ms[-1]))
    return statistics.median(ms)


def round_trips(store, n):
    with Server("--control-rate", "1000000", store=store) as srv, Client(srv.ws) as c:
        c.request({"type": "start", "ride": "m-1"})
        for _ in range(10):  # warm up
            c.request({"type": "pause", "ride": "m-1"})
            c.request({"type": "resume", "ride": "m-1"})
        out = []
        for i in range(n):
            cmd = "pause" if i % 2 == 0 else "resume"
            t = time.perf_counter()
            r = c.request({"type": cmd, "id": "m-%d-%d" % (os.getpid(), i), "ride": "m-1"})
            out.append(time.perf_counter() - t)
            assert r["type"] == "state", r
        return out


class RawWS:
    """A bare ride.v1 client on a plain socket, so the measurement controls every recv: it sets
    TCP_QUICKACK before each one (Linux), i.e. acknowledges at once instead of delaying the ACK.
    That takes Nagle stalls on the server's side out of the figure (see the report)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ride.v1\r\n\r\n"
                        % (port, key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.s.recv(4096)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert b" 101 " in head.split(b"\r\n")[0], head

    def send(self, msg):
        data = json.dumps(msg).encode()
        mask = os.urandom(4)
        hdr = bytes([0x81]) + (bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack("!H", len(data)))
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _need(self, n):
        while len(self.buf) < n:
            if hasattr(socket, "TCP_QUICKACK"):
                self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            chunk = self.s.recv(65536)
            assert chunk, "closed"
            self.buf += chunk

    def recv(self):
        self._need(2)
        n = self.buf[1] & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return json.loads(payload)

    def request(self, msg):
        self.send(msg)
        while True:
            m = self.recv()
            if m.get("id") == msg["id"]:
                return m


def quick_round_trips(store, n):
    with Server("--control-rate", "1000000", store=store) as srv:
        c = RawWS(srv.port)
        c.request({"type": "start", "id": "w0", "ride": "m-1"})
        out = []
        for i in range(n + 10):
            t = time.perf_counter()
            r = c.request({"type": "pause" if i % 2 == 0 else "resume", "id": "w%d" % (i + 1), "ride": "m-1"})
            if i >= 10:
                out.append(time.perf_counter() - t)
            assert r["type"] == "state", r
        c.s.close()
        return out


def pipelined(store, n):
    """n pause/resume sent at once on one connection: time to the last reply / n."""
    with Server("--control-rate", "1000000", store=store) as srv:
        c = RawWS(srv.port)
        c.request({"type": "start", "id": "p0", "ride": "m-1"})
        t = time.perf_counter()
        for i in range(n):
            c.send({"type": "pause" if i % 2 == 0 else "resume", "id": "p%d" % (i + 1), "ride": "m-1"})
        got = 0
        while got < n:
            if c.recv().get("id", "").startswith("p"):
                got += 1
        took = time.perf_counter() - t
        c.s.close()
        return took / n


def store_appends(path, n):
    # The server creates the schema; then the store's append transaction, statement by statement.
    with Server(store=path):
        pass
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA foreign_keys = ON")
    db.execute("INSERT INTO rides VALUES ('a-1', 'default', NULL, NULL, 0, NULL)")
    db.execute("INSERT INTO transitions VALUES ('a-1', 1, 'start', 0, NULL, NULL)")
    reply = b'{"type":"state","id":"x","ride":"a-1","state":"paused"' + b" " * 300 + b"}"
    out = []
    for i in range(n):
        t = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        rows = db.execute("""SELECT r.id, r.plan_id, r.owner, r.time_limit, t.kind, t.at, t.reason, t.metres
                             FROM rides r LEFT JOIN transitions t ON t.ride_id = r.id WHERE r.id = ? ORDER BY t.seq""",
                          ("a-1",)).fetchall()
        db.execute("INSERT INTO transitions (ride_id, seq, kind, at, reason, metres) VALUES (?, ?, ?, ?, NULL, NULL)",
                   ("a-1", len(rows) + 1, "pause" if i % 2 == 0 else "resume", i + 1))
        db.execute("INSERT INTO replies (scope, id, bytes, at) VALUES ('', ?, ?, ?)", ("s-%d" % i, reply, i))
        db.execute("COMMIT")
        out.append(time.perf_counter() - t)
    db.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="rp-measure-") as d:
        print("disk: %s" % d)
        sqlite_ms = summary("round trip, SQLite store, websockets client", round_trips(os.path.join(d, "rt.db"), a.n))
        mem_ms = summary("round trip, memory store, websockets client", round_trips("memory", a.n))
        quick_ms = summary("round trip, SQLite store, quick-ACK client", quick_round_trips(os.path.join(d, "q.db"), a.n))
        quick_mem = summary("round trip, memory store, quick-ACK client", quick_round_trips("memory", a.n))
        append_ms = summary("store append alone (BEGIN…COMMIT, fsync)", store_appends(os.path.join(d, "ap.db"), a.n))
        pipe = pipelined(os.path.join(d, "p.db"), a.n) * 1000
        pipe_mem = pipelined("memory", a.n) * 1000
        print("pipelined %d transitions on one connection: %.3f ms each (SQLite), %.3f ms each (memory)" % (a.n, pipe, pipe_mem))
        print("one transition with its fsync: %.3f ms median round trip (quick-ACK client; memory store %.3f ms), "
              "%.3f ms with the websockets client (memory %.3f ms); the durable append alone %.3f ms"
              % (quick_ms, quick_mem, sqlite_ms, mem_ms, append_ms))


if __name__ == "__main__":
    main()
