#!/usr/bin/env python3
"""What positions cost (issue 28). Not a test: prints one row for BENCHMARKS.md.

Starts `ridepush serve` on an SQLite store with JWT auth and MobilityData's Paris zones
(272 zones), starts R riding rides (an ops token, a GBFS vehicle type the zones name), then
every ride reports one position per second, walking at 18 km/h across the zones' box. Two
windows on the same rides: quiet (ticks only), then reporting. From the server's /proc and
/metrics over the reporting window:

  CPU per position   (server CPU in the reporting window − in the quiet one) / positions accepted
  zone lookups/s     ridepush_zone_lookups_total, all on the store worker (never the tick)
  checkpoints/s      ridepush_trace_checkpoints_total: ~R/30 expected (one per ride per 30 s)
  tick lateness      p50/p99 of ridepush_tick_lateness_seconds in each window, side by side

    .venv/bin/python scripts/bench-positions.py [--rides 10000] [--window 40] [--warmup 35]
                                                [--conns 8] [--bin .build/release/ridepush] [--json]
"""
import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import buckets, counter, cpu_seconds, jwt_secret, load, metrics, ops_token, quantile, rss_kib, start_serve, stop  # noqa: E402

PARIS = os.path.join(ROOT, "tests", "fixtures", "gbfs", "geofencing_zones.v3.0.json")


def paris_box():
    doc = json.load(open(PARIS, encoding="utf-8"))
    pts = [p for f in doc["data"]["geofencing_zones"]["features"] for poly in f["geometry"]["coordinates"]
           for ring in poly for p in ring]
    return min(p[1] for p in pts), min(p[0] for p in pts), max(p[1] for p in pts), max(p[0] for p in pts)


class Fleet:
    def __init__(self, url, rides, conns):
        self.url, self.conns = url, conns
        self.ids = ["p-%05d" % i for i in range(rides)]
        lat0, lon0, lat1, lon1 = paris_box()
        rnd = random.Random(28)
        # Each ride walks a straight line at 5 m/s (18 km/h) from a random point.
        self.where = {rid: [rnd.uniform(lat0, lat1), rnd.uniform(lon0, lon1), rnd.uniform(-1, 1), rnd.uniform(-1, 1)]
                      for rid in self.ids}
        self.sent = 0
        self.reporting = asyncio.Event()
        self.stopping = asyncio.Event()

    async def lane(self, k):
        mine = self.ids[k::self.conns]
        async with websockets.connect(self.url, max_size=None, max_queue=None) as ws:
            for at in range(0, len(mine), 200):  # in bursts: over 1,024 unread replies is a slow consumer
                burst = mine[at:at + 200]
                for rid in burst:
                    await ws.send(json.dumps({"type": "start", "id": "s" + rid, "ride": rid, "vehicle_type": "escooter_paris"}))
                left = len(burst)
                while left:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 60))
                    if m.get("id", "").startswith("s"):
                        assert m["type"] == "state", m
                        left -= 1
            drain = asyncio.create_task(self.drain(ws))
            await self.reporting.wait()
            nxt = time.monotonic()
            # Stamped by schedule, not by when the loop got round to it: a late round would
            # otherwise come under 1 s before the next and be dropped as too soon.
            base_ms = int(time.time() * 1000)
            round_ = 0
            while not self.stopping.is_set():
                now_ms = base_ms + 1000 * round_
                round_ += 1
                for rid in mine:
                    w = self.where[rid]
                    norm = (w[2] ** 2 + w[3] ** 2) ** 0.5 or 1
                    w[0] += 5 / 111_195 * w[2] / norm
                    w[1] += 5 / 73_200 * w[3] / norm
                    await ws.send('{"type":"position","ride":"%s","lat":%.6f,"lon":%.6f,"at":%d,"accuracy":5}'
                                  % (rid, w[0], w[1], now_ms))
                self.sent += len(mine)
                nxt += 1.0
                await asyncio.sleep(max(0.0, nxt - time.monotonic()))
            drain.cancel()

    async def drain(self, ws):
        while True:
            await ws.recv()  # ticks are not sent (nobody subscribes); errors would be read here


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rides", type=int, default=10000)
    ap.add_argument("--window", type=float, default=40)
    ap.add_argument("--warmup", type=float, default=35, help="reporting before the window: past the first 30 s checkpoints")
    ap.add_argument("--quiet", type=float, default=15)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "ridepush"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table row")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-positions-")
    secret = jwt_secret(d)
    token = ops_token(a.bin, secret)
    proc, port = start_serve([a.bin, "serve", "--host", "127.0.0.1", "--port", "0", "--store", os.path.join(d, "bench.db"),
                              "--create-store", "--auth", "jwt", "--jwt-secret-file", secret, "--zones", PARIS,
                              "--control-rate", "1000000", "--public", os.path.join(ROOT, "public")])
    try:
        fleet = Fleet("ws://127.0.0.1:%d/ws?token=%s" % (port, token), a.rides, a.conns)
        lanes = asyncio.gather(*(fleet.lane(k) for k in range(a.conns)))
        while counter(metrics(port), 'ridepush_rides{state="riding"}') < a.rides:
            await asyncio.sleep(0.5)
        # Quiet: the rides tick, nobody reports.
        m0, c0, t0 = metrics(port), cpu_seconds(proc.pid), time.monotonic()
        await asyncio.sleep(a.quiet)
        m1, c1, t1 = metrics(port), cpu_seconds(proc.pid), time.monotonic()
        quiet_cpu = (c1 - c0) / (t1 - t0)
        fleet.reporting.set()
        await asyncio.sleep(a.warmup)
        m2, c2, t2 = metrics(port), cpu_seconds(proc.pid), time.monotonic()
        await asyncio.sleep(a.window)
        m3, c3, t3 = metrics(port), cpu_seconds(proc.pid), time.monotonic()
        rss = rss_kib(proc.pid)
        fleet.stopping.set()
        await lanes
        secs = t3 - t2
        accepted = counter(m3, "ridepush_positions_accepted_total") - counter(m2, "ridepush_positions_accepted_total")
        dropped = sum(float(n) for n in re.findall(r'^ridepush_positions_dropped_total\{[^}]*\} (\d+)$', m3, re.M)) - \
            sum(float(n) for n in re.findall(r'^ridepush_positions_dropped_total\{[^}]*\} (\d+)$', m2, re.M))
        cpu = (c3 - c2) / secs
        lat = "ridepush_tick_lateness_seconds"
        out = {
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "rides": a.rides, "window_s": round(secs, 1),
            "positions_per_s": round(accepted / secs), "dropped_per_s": round(dropped / secs, 1),
            "server_cpu_ms_per_s": round(cpu * 1000, 1), "quiet_cpu_ms_per_s": round(quiet_cpu * 1000, 1),
            "cpu_us_per_position": round((cpu - quiet_cpu) / (accepted / secs) * 1e6, 2) if accepted else None,
            "zone_lookups_per_s": round((counter(m3, "ridepush_zone_lookups_total") - counter(m2, "ridepush_zone_lookups_total")) / secs),
            "checkpoints_per_s": round((counter(m3, "ridepush_trace_checkpoints_total") - counter(m2, "ridepush_trace_checkpoints_total")) / secs, 1),
            "store_commits_per_s": round((counter(m3, "ridepush_store_commits_total") - counter(m2, "ridepush_store_commits_total")) / secs, 1),
            "lateness_quiet_ms": [quantile(buckets(m0, lat), buckets(m1, lat), q) for q in (0.5, 0.99)],
            "lateness_reporting_ms": [quantile(buckets(m2, lat), buckets(m3, lat), q) for q in (0.5, 0.99)],
            "rss_mib": round(rss / 1024, 1), "load": load(), "client_sent": fleet.sent,
        }
        if a.json:
            print(json.dumps(out))
        else:
            print("| %(date)s | %(rides)d | %(positions_per_s)d | %(cpu_us_per_position)s µs | %(zone_lookups_per_s)d | "
                  "%(checkpoints_per_s)s | %(lateness_quiet_ms)s → %(lateness_reporting_ms)s | %(server_cpu_ms_per_s)s "
                  "(quiet %(quiet_cpu_ms_per_s)s) | %(rss_mib)s MiB | %(load)s |" % out)
    finally:
        stop(proc)


if __name__ == "__main__":
    asyncio.run(main())
