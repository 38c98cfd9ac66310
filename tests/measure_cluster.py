"""Measures the multi-node store (issue 12); prints figures, not a pass/fail test:

  RIDEPUSH_BIN=.build/release/ridepush .venv/bin/python tests/measure_cluster.py [--n 300] [--seconds 5]

1. transition round trip (pause/resume over a real WebSocket, one request in flight) on
   PostgreSQL and on SQLite (WAL, synchronous=FULL), median and p99;
2. cross-node push latency: a transition acknowledged by node A to the `state` push on a
   watcher connected to node B (both on one PostgreSQL), p50 and p99;
3. sustained durable transitions/s on PostgreSQL with group commit: C connections each
   keeping K start/end requests in flight for S seconds.
PostgreSQL is started by tests/pg.py (fsync on, synchronous_commit on)."""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from pg import Postgres  # noqa: E402
from rp import Client, Server  # noqa: E402

FAST = ("--control-rate", "1000000")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def show(name, secs):
    ms = [s * 1000 for s in secs]
    print("%-52s n=%d median %.2f ms  p99 %.2f ms" % (name, len(ms), statistics.median(ms), pct(ms, 0.99)))


def round_trips(store, n):
    with Server(*FAST, store=store) as srv, Client(srv.ws) as c:
        c.request({"type": "start", "ride": "m-1"})
        out = []
        for i in range(n):
            kind = "pause" if i % 2 == 0 else "resume"
            t = time.perf_counter()
            r = c.request({"type": kind, "ride": "m-1"})
            out.append(time.perf_counter() - t)
            assert r["type"] == "state", r
        return out


def cross_node(uri, n):
    with Server(*FAST, store=uri) as a, Server(*FAST, store=uri) as b, Client(a.ws) as ca, Client(b.ws) as wb:
        ca.request({"type": "start", "ride": "x-1"})
        wb.request({"type": "subscribe", "ride": "x-1"})
        out = []
        for i in range(n):
            kind = "pause" if i % 2 == 0 else "resume"
            want = "paused" if kind == "pause" else "riding"
            ca.request({"type": kind, "ride": "x-1"})
            t = time.perf_counter()  # from the acknowledgement on A
            wb.wait_for(lambda m: m.get("type") == "state" and m.get("state") == want, 5)
            out.append(time.perf_counter() - t)
        return out


def throughput(uri, conns, inflight, seconds):
    with Server(*FAST, store=uri) as srv:
        done = [0] * conns
        stop = time.monotonic() + seconds

        def run(k):
            c = Client(srv.ws)
            n = 0
            pending = {}
            while time.monotonic() < stop:
                while len(pending) < inflight:
                    n += 1
                    rid = "t%d-%d" % (k, n)
                    mid = "s-%s" % rid
                    c.send({"type": "start", "ride": rid, "id": mid})
                    pending[mid] = rid
                m = c.recv(timeout=10)
                mid = m.get("id")
                if mid in pending:
                    rid = pending.pop(mid)
                    assert m.get("type") == "state", m
                    done[k] += 1
                    if mid.startswith("s-"):
                        e = "e-" + rid
                        c.send({"type": "end", "ride": rid, "id": e})
                        pending[e] = rid
            c.close()

        ts = [threading.Thread(target=run, args=(k,)) for k in range(conns)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join(seconds + 30)
        took = time.monotonic() - t0
        return sum(done), took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=4)
    a = ap.parse_args()
    pg = Postgres().start()
    try:
        show("round trip, PostgreSQL", round_trips(pg.uri(pg.create_database()), a.n))
        with tempfile.TemporaryDirectory(dir="/tmp") as d:
            show("round trip, SQLite (WAL, synchronous=FULL)", round_trips(os.path.join(d, "m.db"), a.n))
        show("cross-node push (ack on A -> state on B's watcher)", cross_node(pg.uri(pg.create_database()), a.n // 2))
        n, took = throughput(pg.uri(pg.create_database()), a.conns, a.inflight, a.seconds)
        print("durable transitions/s, PostgreSQL, %d conns x %d in flight: %d in %.1f s = %.0f/s"
              % (a.conns, a.inflight, n, took, n / took))
    finally:
        pg.close()


if __name__ == "__main__":
    main()
