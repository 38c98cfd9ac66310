#!/usr/bin/env python3
"""City scale (issue 29): a server holding N open rides. Not a test: prints figures for BENCHMARKS.md.

    .venv/bin/python scripts/bench-city.py [--rides 100000] [--stores sqlite,postgres] [--window 10]
                                           [--bin .build/release/ridepush]

For each store, RidePush runs as `make run` starts it (JWT auth, a fresh store; PostgreSQL is
started by tests/pg.py in a temporary folder and stopped by PID), then:
1. `ridepush bench --transitions --open-rides N` starts N rides (an operator token: the
   per-rider cap does not apply) and leaves them open;
2. memory per open ride: the server's RSS after minus before, over N;
3. CPU per second of ticks: utime+stime over a window with the N rides open and nobody
   watching, minus the same window before any ride (the server's idle cost);
4. the operator feed: one `watch_all` client; bytes and time of the snapshot, bytes of a
   `fleet` frame, and the server's CPU per second with that operator minus without;
5. `GET /rides` paged through with limit=500: pages, rides seen, seconds;
6. restart: SIGTERM, then the same store again; seconds from exec to the first /healthz that
   is 200 and counts N riding rides (serving with them loaded), and the RSS then.
Every process started here is ended here, by PID; every wait is bounded."""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import websockets  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cpu_seconds, jwt_secret, load, ops_token, rss_kib, start_serve, stop  # noqa: E402



class Node:
    def __init__(self, bin_, store, secret):
        self.bin, self.store, self.secret = bin_, store, secret
        self.proc, self.port = None, None

    def start(self):
        t0 = time.monotonic()
        args = [self.bin, "serve", "--port", "0", "--store", self.store, "--auth", "jwt", "--jwt-secret-file", self.secret,
                "--control-rate", "1000000", "--max-connections-per-ip", "100000"]
        if not self.store.startswith("postgresql:"):
            args.append("--create-store")
        self.proc, self.port = start_serve(args)
        return t0

    def stop(self):
        stop(self.proc)

    def get(self, path, token=None, timeout=30):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path))
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def cpu_window(self, seconds):
        c0 = cpu_seconds(self.proc.pid)
        time.sleep(seconds)
        return (cpu_seconds(self.proc.pid) - c0) / seconds


async def watch_feed(url, token, seconds, node):
    async with websockets.connect(url, subprotocols=["ride.v1"], max_size=None, open_timeout=30) as ws:
        await ws.send(json.dumps({"type": "auth", "token": token}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert reply["type"] == "authenticated", reply
        t0 = time.monotonic()
        await ws.send(json.dumps({"type": "watch_all", "id": "w"}))
        snap_bytes, snap_frames, rides = 0, 0, 0
        while True:
            raw = await asyncio.wait_for(ws.recv(), 60)
            m = json.loads(raw)
            if m["type"] != "snapshot":
                continue
            snap_bytes += len(raw)
            snap_frames += 1
            rides += len(m["rides"])
            if not m["more"]:
                break
        snap_secs = time.monotonic() - t0
        fleet = []
        c0 = cpu_seconds(node.proc.pid)
        t1 = time.monotonic()
        while time.monotonic() - t1 < seconds:
            try:
                raw = await asyncio.wait_for(ws.recv(), 5)
            except asyncio.TimeoutError:
                break
            if raw.startswith('{"type":"fleet"'):
                fleet.append(len(raw))
        cpu = (cpu_seconds(node.proc.pid) - c0) / (time.monotonic() - t1)
        return {"snapshot_rides": rides, "snapshot_frames": snap_frames, "snapshot_bytes": snap_bytes,
                "snapshot_s": snap_secs, "fleet_frames": len(fleet), "fleet_bytes": max(fleet) if fleet else 0,
                "cpu_per_s": cpu}


def page_all(node, token):
    t0 = time.monotonic()
    cursor, pages, seen = None, 0, 0
    while True:
        status, body = node.get("/rides?limit=500" + ("&cursor=" + cursor if cursor else ""), token)
        if status != 200:
            raise RuntimeError("GET /rides: %d %s" % (status, body[:200]))
        d = json.loads(body)
        pages += 1
        seen += len(d["rides"])
        cursor = d["next"]
        if not cursor:
            break
    return pages, seen, time.monotonic() - t0


def wait_loaded(node, n, t0, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, body = node.get("/healthz", timeout=5)
            if status == 200 and json.loads(body)["rides"]["riding"] >= n:
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("not serving %d rides after %d s" % (n, timeout))


def run(args, name, store, secret, token):
    print("\n## %s: %d open rides  %s UTC  load average %s" % (name, args.rides, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), load()),
          flush=True)
    node = Node(args.bin, store, secret)
    node.start()
    try:
        time.sleep(2)
        rss0 = rss_kib(node.proc.pid)
        idle = node.cpu_window(args.window)
        r = subprocess.run([args.bin, "bench", "--transitions", "--open-rides", str(args.rides), "-n", "16", "--depth", "8",
                            "--url", "ws://127.0.0.1:%d/ws" % node.port, "--token", token, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
        if r.returncode != 0:
            raise RuntimeError("bench --open-rides failed: %s %s" % (r.stdout, r.stderr))
        opened = json.loads(r.stdout)
        time.sleep(3)
        rss1 = rss_kib(node.proc.pid)
        busy = node.cpu_window(args.window)
        feed = asyncio.run(watch_feed("ws://127.0.0.1:%d/ws" % node.port, token, args.window, node))
        pages, seen, page_secs = page_all(node, token)
        print("started          %d rides in %.1f s (%d/s, reply p99 %.1f ms)" % (opened["open_rides"], float(opened["seconds"]),
                                                                               opened["starts_per_s"], opened["p99_ms"]))
        print("memory           %.0f bytes per open ride (RSS %d -> %d KiB)" % ((rss1 - rss0) * 1024 / args.rides, rss0, rss1))
        print("ticks            %.1f ms of CPU per second with %d rides open, nobody watching (idle server %.1f ms/s; difference %.1f ms/s)"
              % (busy * 1000, args.rides, idle * 1000, (busy - idle) * 1000))
        print("operator feed    snapshot %d rides in %d frames, %.1f MB, %.2f s; fleet frame %.1f KB (%d frames in %d s); server CPU with one operator %.1f ms/s (%.1f ms/s over no operator)"
              % (feed["snapshot_rides"], feed["snapshot_frames"], feed["snapshot_bytes"] / 1e6, feed["snapshot_s"],
                 feed["fleet_bytes"] / 1e3, feed["fleet_frames"], args.window, feed["cpu_per_s"] * 1000,
                 (feed["cpu_per_s"] - busy) * 1000))
        print("GET /rides       %d rides in %d pages of 500, %.2f s (%.1f ms per page)" % (seen, pages, page_secs, page_secs / pages * 1000))
        node.stop()
        t0 = node.start()
        loaded = wait_loaded(node, args.rides, t0)
        print("restart          serving with %d rides loaded %.2f s after exec (RSS %d KiB)" % (args.rides, loaded, rss_kib(node.proc.pid)),
              flush=True)
    finally:
        node.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rides", type=int, default=100000)
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--bin", default=os.environ.get("RIDEPUSH_BIN", ".build/release/ridepush"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ridepush-city-")
    secret = jwt_secret(tmp)
    token = ops_token(args.bin, secret, ttl="6h")
    print("# %s, %d cores, %s" % (" ".join(os.uname()[0:3:2]), os.cpu_count(),
                                  subprocess.run([args.bin, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()))
    for store in args.stores.split(","):
        if store == "sqlite":
            run(args, "SQLite", os.path.join(tmp, "city.db"), secret, token)
        elif store == "postgres":
            from pg import Postgres
            pg = Postgres()
            try:
                pg.start()
                run(args, "PostgreSQL", pg.uri(pg.create_database()), secret, token)
            finally:
                pg.close()
        else:
            sys.exit("unknown store %s" % store)


if __name__ == "__main__":
    main()
