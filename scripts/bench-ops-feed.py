#!/usr/bin/env python3
"""What the operator feed costs (issue 14). Not a test: prints figures for BENCHMARKS.md.

Starts `ridepush serve --store memory --auth none`, starts R rides, then measures the
server's CPU (utime+stime from /proc/PID/stat) over a window with 0, 1 and W operators
watching (`watch_all`), each reading every `fleet` frame. The difference from the
0-watcher window is the feed's cost: the 1-watcher window holds the once-per-tick encode
plus one write, the W-watcher window adds W-1 more writes.

    .venv/bin/python scripts/bench-ops-feed.py [--rides 10000] [--watchers 20] [--window 15]
                                                [--bin .build/release/ridepush]
"""
import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time

import websockets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import cpu_seconds, rss_kib  # noqa: E402

SERVING = re.compile(r"serving http://127.0.0.1:(\d+)/")


async def start_rides(url, n, conns=4):
    async def one(k):
        async with websockets.connect(url, max_size=None) as ws:
            ids = ["b-%d-%05d" % (k, i) for i in range(k, n, conns)]
            # In bursts: a client with over 1,024 unread replies is closed as a slow consumer.
            for at in range(0, len(ids), 200):
                burst = ids[at:at + 200]
                for rid in burst:
                    await ws.send(json.dumps({"type": "start", "id": rid, "ride": rid}))
                left = len(burst)
                while left:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    if m.get("type") == "state":
                        left -= 1
    await asyncio.gather(*(one(k) for k in range(conns)))


class Watcher:
    def __init__(self):
        self.frames = 0
        self.bytes = 0
        self.seqs = []
        self.rows = 0

    async def run(self, url, stop):
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "watch_all", "id": "w"}))
            while not stop.is_set():
                try:
                    text = await asyncio.wait_for(ws.recv(), 0.5)
                except asyncio.TimeoutError:
                    continue
                if text.startswith('{"type":"fleet"'):
                    self.frames += 1
                    self.bytes += len(text)
                    # seq and the row count without parsing the whole frame every time
                    self.seqs.append(int(text[text.index('"seq":') + 6:text.index(',', text.index('"seq":'))]))
                    if self.frames == 1:
                        self.rows = len(json.loads(text)["rows"])


async def window(url, pid, watchers, seconds):
    stop = asyncio.Event()
    ws = [Watcher() for _ in range(watchers)]
    tasks = [asyncio.create_task(w.run(url, stop)) for w in ws]
    await asyncio.sleep(3)  # connected, snapshot read, a few frames in
    for w in ws:
        w.frames, w.bytes, w.seqs = 0, 0, []
    c0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    c1, t1 = cpu_seconds(pid), time.monotonic()
    got = [(w.frames, w.bytes, w.seqs, w.rows) for w in ws]
    rss = rss_kib(pid)
    stop.set()
    await asyncio.gather(*tasks)
    return (c1 - c0) / (t1 - t0), t1 - t0, got, rss


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rides", type=int, default=10000)
    ap.add_argument("--watchers", type=int, default=20)
    ap.add_argument("--window", type=float, default=15)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", ".build", "release", "ridepush"))
    a = ap.parse_args()
    cmd = [a.bin, "serve", "--host", "127.0.0.1", "--port", "0", "--store", "memory", "--auth", "none",
           "--control-rate", "1000000", "--public", os.path.join(os.path.dirname(__file__), "..", "public")]
    if a.threads:
        cmd += ["--threads", str(a.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        deadline = time.monotonic() + 15
        while port is None and time.monotonic() < deadline:
            m = SERVING.search(proc.stdout.readline())
            if m:
                port = int(m.group(1))
        if port is None:
            sys.exit("server did not start")
        url = "ws://127.0.0.1:%d/ws" % port
        await start_rides(url, a.rides)
        print("# %s, %d cores; %d rides, %s threads, window %.0f s" % (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), os.cpu_count(), a.rides, a.threads or "default", a.window))
        base = None
        for n in (0, 1, a.watchers):
            cpu, secs, got, rss = await window(url, proc.pid, n, a.window)
            if base is None:
                base = cpu
                print("0 watchers: server CPU %.1f ms/s (the rides' own ticking), RSS %.1f MiB" % (cpu * 1000, rss / 1024))
                continue
            frames = sum(g[0] for g in got)
            nbytes = sum(g[1] for g in got)
            gaps = sum(sum(1 for x, y in zip(g[2], g[2][1:]) if y != x + 1) for g in got)
            per_frame = nbytes / frames if frames else 0
            rows = got[0][3]
            extra = (cpu - base) * 1000
            print("%d watcher%s: server CPU %.1f ms/s, feed %.1f ms/s (%.2f ms/s per watcher); %.2f frames/s per watcher, "
                  "%d seq gaps; %.0f bytes per frame = %.1f bytes per ride per second; RSS %.1f MiB"
                  % (n, "" if n == 1 else "s", cpu * 1000, extra, extra / n, frames / secs / n, gaps, per_frame,
                     per_frame / rows if rows else 0, rss / 1024))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
