#!/usr/bin/env python3
"""What device pushes cost (issue 38). Not a test: prints one row for BENCHMARKS.md.

Starts the APNs, Google OAuth and FCM stand-ins (tests/pushstandins.py, TLS with a private CA) in
a child process of their own (its CPU is measured apart, and its GIL is not the load's), then
`ridepush serve` as `make run` does (SQLite, JWT) with the --apns-* / --fcm-* flags and
--outbound-ca-file. Starts R rides over ride.v1 control connections (an ops token), registers one
APNs `liveactivity` target per ride, waits for the R registration pushes, and measures a quiet
window (ticks and fare pushes only). Then, for the window, each ride pauses and resumes once a
minute (the pause at i/R of the minute, the resume 30 s after), spread evenly over the minute.

  CPU per push        server CPU in the window / pushes the stand-in answered in it (the
                      transitions' own commits are in that CPU: it is the cost of a paused ride
                      reaching the lock screen); also net of the quiet window's rate
  requests per conn   pushes the stand-in got / distinct HTTP/2 connections they came on
  commit -> receipt   from the control client's `state` reply (the commit was acknowledged) to
                      the stand-in answering the push carrying that transition (same ride, state
                      and `at`), p50/p99/max; also from the transition's own `at`
  tick lateness       p50/p99/max of (arrival - tick `at`) at a subscriber of a few watched rides,
                      and the server's ridepush_tick_lateness_seconds histogram, quiet and loaded
  lost / duplicated   transitions acknowledged in the window without exactly one accepted push

    .venv/bin/python scripts/bench-push.py [--rides 10000] [--window 120] [--quiet 10]
                                           [--period 60] [--conns 8] [--watched 5] [--bin .build/release/ridepush] [--json]
"""
import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import buckets, counter, cpu_seconds, jwt_secret, load, metrics, ops_token, quantile, rss_kib, start_serve, stop  # noqa: E402

BURST = 200        # replies a lane waits for before sending more: over 1,024 unread is a slow consumer


def token_for(ride):
    return hashlib.sha256(ride.encode()).hexdigest()   # 32 bytes of hex, as APNs tokens are


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


# ---- the stand-ins' process ---------------------------------------------------------------------

def standin_main(directory, streams):
    """Runs the stand-ins; a line on stdin is a command: `count`, `dump PATH`, `stop`."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import h2.settings
    import pushstandins as P
    # h2 advertises 100 concurrent streams; api.push.apple.com allows more on one connection, and
    # a sender with a backlog opens another connection per 100 (each a thread and two descriptors
    # in the stand-in: past 1,024 its select() fails).
    init = P._H2Conn.__init__

    def more_streams(self, *args):
        init(self, *args)
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: self.conn.DEFAULT_MAX_HEADER_LIST_SIZE})
    P._H2Conn.__init__ = more_streams
    with P.PushStandIns(directory) as s:
        print(json.dumps({"args": s.server_args()}), flush=True)
        for line in sys.stdin:
            cmd = line.split()
            if not cmd or cmd[0] == "stop":
                break
            if cmd[0] == "count":
                print(len(s.apns.log.snapshot()), flush=True)
            elif cmd[0] == "dump":
                with open(cmd[1], "w") as f:
                    for r in s.apns.requests:
                        cs = r.content_state or {}
                        f.write(json.dumps({"at": r.at, "conn": r.conn, "http": r.http, "token": r.token,
                                            "status": r.status, "priority": r.priority, "event": r.event,
                                            "ride": cs.get("ride"), "state": cs.get("state"), "cs_at": cs.get("at")}) + "\n")
                print("done", flush=True)


class StandIns:
    def __init__(self, directory, streams):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--standin", directory,
                                      "--standin-streams", str(streams)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the stand-ins exited: rc %s" % self.proc.wait(10))
        self.args = json.loads(line)["args"]

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def count(self):
        return int(self.ask("count"))

    def records(self, path):
        assert self.ask("dump " + path) == "done"
        with open(path) as f:
            return [json.loads(line) for line in f]

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)


# ---- the rides ------------------------------------------------------------------------------------

class Fleet:
    def __init__(self, url, rides, conns, window, period):
        self.url, self.conns, self.window, self.period = url, conns, window, period
        self.ids = ["b-%05d" % i for i in range(rides)]
        self.index = {rid: i for i, rid in enumerate(self.ids)}
        self.replies = {}            # id -> (time the reply arrived, the reply)
        self.sent = {}               # id -> time sent
        self.errors = []
        self.ready = self.started = 0
        self.go = asyncio.Event()
        self.t0 = None               # time.time() at the window's start

    async def wait_replies(self, ids, timeout):
        deadline = time.monotonic() + timeout
        while any(i not in self.replies for i in ids):
            if time.monotonic() > deadline:
                raise RuntimeError("%d replies missing after %ss" % (sum(i not in self.replies for i in ids), timeout))
            await asyncio.sleep(0.01)

    async def read(self, ws):
        async for raw in ws:
            now = time.time()
            m = json.loads(raw)
            if "id" in m:
                self.replies[m["id"]] = (now, m)
            if m.get("type") in ("error", "bad_request", "forbidden", "conflict", "rate_limited") or "error" in m:
                self.errors.append(m)

    async def setup(self, ws, mine):
        for at in range(0, len(mine), BURST):
            burst = mine[at:at + BURST]
            for rid in burst:
                await ws.send(json.dumps({"type": "start", "id": "s" + rid, "ride": rid}))
            await self.wait_replies(["s" + r for r in burst], 120)
        self.started += 1
        for at in range(0, len(mine), BURST):
            burst = mine[at:at + BURST]
            for rid in burst:
                await ws.send(json.dumps({"type": "register_push", "id": "g" + rid, "platform": "apns",
                                          "kind": "liveactivity", "ride": rid, "token": token_for(rid)}))
            await self.wait_replies(["g" + r for r in burst], 300)
        bad = [self.replies[i][1] for i in ["s" + r for r in mine] + ["g" + r for r in mine]
               if self.replies[i][1]["type"] not in ("state", "push_registered")]
        if bad:
            raise RuntimeError("setup refused: %r" % bad[:3])

    async def lane(self, k):
        import websockets
        mine = self.ids[k::self.conns]
        # No client pings: a server too busy to answer one for 20 s is measured (the setup's
        # replies, the watched ticks), not hung up on.
        async with websockets.connect(self.url, max_size=None, max_queue=None, ping_interval=None) as ws:
            reader = asyncio.create_task(self.read(ws))
            await self.setup(ws, mine)
            self.ready += 1
            await self.go.wait()
            # Ride i pauses at i/R of each period (a minute) and resumes half a period later:
            # 2R/period transitions a second, evenly spread.
            n, p = len(self.ids), self.period
            plan = []
            for rid in mine:
                off = p * self.index[rid] / n
                for minute in range(int(self.window // p) + 1):
                    for cmd, extra in (("pause", 0.0), ("resume", p / 2)):
                        t = off + p * minute + extra
                        if t < self.window:
                            plan.append((t, cmd, rid, minute))
            plan.sort()
            for t, cmd, rid, minute in plan:                     # bounded: at most 2 per ride per minute
                delay = self.t0 + t - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                qid = "%s%s-%d" % (cmd[0], rid, minute)
                self.sent[qid] = time.time()
                await ws.send(json.dumps({"type": cmd, "id": qid, "ride": rid}))
            mine_set = set(mine)
            try:
                await self.wait_replies([q for q in self.sent if q[1:].rsplit("-", 1)[0] in mine_set], 60)
            finally:
                reader.cancel()


async def watch(url, rides, ticks, stopping):
    """Subscribes to a few rides; records each tick's lateness (arrival - its `at`) and arrival time."""
    import websockets
    async with websockets.connect(url, max_size=None, max_queue=None) as ws:
        for rid in rides:
            await ws.send(json.dumps({"type": "subscribe", "ride": rid}))
        while not stopping.is_set():
            try:
                raw = await asyncio.wait_for(ws.recv(), 1)
            except asyncio.TimeoutError:
                continue
            now = time.time()
            m = json.loads(raw)
            if m.get("type") == "tick" and "at" in m:
                ticks.append((now, (now - m["at"] / 1000) * 1000))


# ---- the run ----------------------------------------------------------------------------------------

async def run(a):
    d = tempfile.mkdtemp(prefix="bench-push-")
    secret = jwt_secret(d)
    token = ops_token(a.bin, secret)
    for k in ("NO_PROXY", "no_proxy"):   # a proxy in the environment must not catch the stand-ins
        os.environ[k] = ",".join(x for x in (os.environ.get(k), "127.0.0.1", "localhost") if x)
    standins = StandIns(os.path.join(d, "push"), a.standin_streams)
    proc = None
    try:
        proc, port = start_serve([a.bin, "serve", "--host", "127.0.0.1", "--port", "0", "--store", os.path.join(d, "bench.db"),
                                  "--create-store", "--auth", "jwt", "--jwt-secret-file", secret,
                                  "--control-rate", "1000000", "--public", os.path.join(ROOT, "public")] + standins.args)
        url = "ws://127.0.0.1:%d/ws?token=%s" % (port, token)
        fleet = Fleet(url, a.rides, a.conns, a.window, a.period)
        lanes = asyncio.gather(*(fleet.lane(k) for k in range(a.conns)))
        t_setup = time.monotonic()
        said = False
        while fleet.ready < a.conns:
            if fleet.started == a.conns and not said:
                said = True
                log("%d rides started in %.1f s" % (a.rides, time.monotonic() - t_setup))
            if lanes.done():
                await lanes           # raises what failed
            if time.monotonic() - t_setup > 60 + a.rides / 20:
                raise RuntimeError("setup not done in time: %d of %d lanes" % (fleet.ready, a.conns))
            await asyncio.sleep(0.2)
        setup_s = time.monotonic() - t_setup
        log("%d rides started and registered in %.1f s" % (a.rides, setup_s))
        # Every registration is pushed at once: wait for the R of them (bounded) before measuring.
        deadline = time.monotonic() + 60 + a.rides / 50
        while standins.count() < a.rides and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        registered_pushes = standins.count()
        log("%d registration pushes at the stand-in %.1f s later" % (registered_pushes, time.monotonic() - t_setup - setup_s))
        watched = [fleet.ids[i * len(fleet.ids) // a.watched] for i in range(a.watched)] if a.watched else []
        ticks, stopping = [], asyncio.Event()
        watcher = asyncio.create_task(watch(url, watched, ticks, stopping)) if watched else None
        await asyncio.sleep(1.5)  # the watcher's subscriptions answered
        lat = "ridepush_tick_lateness_seconds"
        # Quiet: ticks and fare pushes only.
        mq0, cq0, sq0, tq0, wq0 = metrics(port), cpu_seconds(proc.pid), cpu_seconds(standins.proc.pid), time.time(), time.monotonic()
        await asyncio.sleep(a.quiet)
        mq1, cq1, sq1, tq1, wq1 = metrics(port), cpu_seconds(proc.pid), cpu_seconds(standins.proc.pid), time.time(), time.monotonic()
        # The window: pauses and resumes.
        m0, c0, s0, l0, w0 = metrics(port), cpu_seconds(proc.pid), cpu_seconds(standins.proc.pid), cpu_seconds(os.getpid()), time.monotonic()
        fleet.t0 = time.time()
        fleet.go.set()
        log("window: %d s of pauses and resumes" % a.window)
        await asyncio.sleep(a.window)
        m1, c1, s1, l1, w1 = metrics(port), cpu_seconds(proc.pid), cpu_seconds(standins.proc.pid), cpu_seconds(os.getpid()), time.monotonic()
        t1 = time.time()
        rss = rss_kib(proc.pid)
        await asyncio.wait_for(lanes, 120)
        # The last transitions' pushes: wait until the stand-in has had nothing new for 3 s (at most 60 s).
        last, still, deadline = -1, time.monotonic(), time.monotonic() + 60
        while time.monotonic() < deadline:
            n = standins.count()
            if n != last:
                last, still = n, time.monotonic()
            elif time.monotonic() - still > 3:
                break
            await asyncio.sleep(0.5)
        stopping.set()
        if watcher:
            await asyncio.wait_for(watcher, 10)
        records = standins.records(os.path.join(d, "apns.jsonl"))
    finally:
        stop(proc)
        standins.stop()

    t0, secs, quiet_s = fleet.t0, w1 - w0, wq1 - wq0
    in_window = [r for r in records if t0 <= r["at"] < t1]
    in_quiet = [r for r in records if tq0 <= r["at"] < tq1]
    ok = [r for r in in_window if r["status"] == 200]
    # Each acknowledged transition against the accepted pushes carrying it.
    by_key = {}
    for r in records:
        if r["status"] == 200 and r["priority"] == 10:
            by_key.setdefault((r["ride"], r["state"], r["cs_at"]), []).append(r["at"])
    from_reply, from_at, lost, dup, refused = [], [], 0, 0, 0
    for qid, t_sent in fleet.sent.items():
        got = fleet.replies.get(qid)
        if not got or got[1].get("type") != "state":
            refused += 1
            continue
        t_reply, st = got
        hits = by_key.get((st["ride"], st["state"], st["at"]), [])
        if not hits:
            lost += 1
            continue
        dup += len(hits) > 1
        from_reply.append((hits[0] - t_reply) * 1000)
        from_at.append((hits[0] - st["at"] / 1000) * 1000)
    conns = {r["conn"] for r in in_window}
    tick_window = [x for t, x in ticks if t0 <= t < t1]
    tick_quiet = [x for t, x in ticks if tq0 <= t < tq1]
    cpu = (c1 - c0) / secs
    quiet_cpu = (cq1 - cq0) / quiet_s
    pushes_per_s = len(ok) / secs
    quiet_pushes_per_s = len([r for r in in_quiet if r["status"] == 200]) / quiet_s
    extra = pushes_per_s - quiet_pushes_per_s
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "rides": a.rides, "period_s": a.period, "window_s": round(secs, 1),
        "setup_s": round(setup_s, 1), "registration_pushes": registered_pushes,
        "transitions_sent": len(fleet.sent), "transitions_acknowledged": len(fleet.sent) - refused,
        "pushes_in_window": len(ok), "pushes_per_s": round(pushes_per_s, 1),
        "priority10_in_window": sum(r["priority"] == 10 for r in ok), "priority5_in_window": sum(r["priority"] == 5 for r in ok),
        "not_200_in_window": len(in_window) - len(ok),
        "server_cpu_ms_per_s": round(cpu * 1000, 1), "quiet_cpu_ms_per_s": round(quiet_cpu * 1000, 1),
        "quiet_pushes_per_s": round(quiet_pushes_per_s, 1),
        "cpu_us_per_push": round(cpu / pushes_per_s * 1e6, 1) if pushes_per_s else None,
        "cpu_us_per_push_net": round((cpu - quiet_cpu) / extra * 1e6, 1) if extra > 0 else None,
        "http2_connections": len(conns), "requests_per_connection": round(len(in_window) / len(conns), 1) if conns else None,
        "http_versions": sorted({r["http"] for r in records}), "standin_streams": a.standin_streams,
        "commit_to_receipt_ms": [pct(from_reply, 0.5), pct(from_reply, 0.99), pct(from_reply, 1.0)],
        "at_to_receipt_ms": [pct(from_at, 0.5), pct(from_at, 0.99), pct(from_at, 1.0)],
        "lost": lost, "duplicated": dup, "refused": refused, "client_errors": len(fleet.errors),
        "watched": len(watched), "watched_ticks": len(tick_window),
        "tick_lateness_watched_ms": [pct(tick_window, 0.5), pct(tick_window, 0.99), pct(tick_window, 1.0)],
        "tick_lateness_watched_quiet_ms": [pct(tick_quiet, 0.5), pct(tick_quiet, 0.99), pct(tick_quiet, 1.0)],
        "tick_lateness_server_ms": [quantile(buckets(m0, lat), buckets(m1, lat), q) for q in (0.5, 0.99, 1.0)],
        "tick_lateness_server_quiet_ms": [quantile(buckets(mq0, lat), buckets(mq1, lat), q) for q in (0.5, 0.99, 1.0)],
        "standin_cpu_ms_per_s": round((s1 - s0) / secs * 1000, 1), "standin_quiet_cpu_ms_per_s": round((sq1 - sq0) / quiet_s * 1000, 1),
        "client_cpu_ms_per_s": round((l1 - l0) / secs * 1000, 1),
        "store_commits_per_s": round((counter(m1, "ridepush_store_commits_total") - counter(m0, "ridepush_store_commits_total")) / secs, 1),
        "rss_mib": round(rss / 1024, 1), "load": load(),
    }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rides", type=int, default=10000)
    ap.add_argument("--window", type=float, default=120, help="seconds of pauses and resumes measured")
    ap.add_argument("--period", type=float, default=60, help="seconds between a ride's pauses (a minute)")
    ap.add_argument("--quiet", type=float, default=10, help="seconds measured before it: ticks and fare pushes only")
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--watched", type=int, default=5, help="rides a subscriber watches for tick lateness")
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "ridepush"))
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table row")
    ap.add_argument("--standin-streams", type=int, default=1000,
                    help="concurrent streams the APNs stand-in allows on one HTTP/2 connection (h2's default: 100)")
    ap.add_argument("--standin", metavar="DIR", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.standin:
        return standin_main(a.standin, a.standin_streams)
    out = asyncio.run(run(a))
    if a.json:
        print(json.dumps(out))
    else:
        print("| %(date)s | %(rides)d | %(pushes_per_s)s (p10 %(priority10_in_window)d, p5 %(priority5_in_window)d) | "
              "%(cpu_us_per_push)s µs (net %(cpu_us_per_push_net)s) | %(requests_per_connection)s on %(http2_connections)d | "
              "%(commit_to_receipt_ms)s | %(tick_lateness_watched_ms)s (server %(tick_lateness_server_ms)s) | "
              "lost %(lost)d dup %(duplicated)d | stand-in %(standin_cpu_ms_per_s)s ms/s | %(load)s |" % out)


if __name__ == "__main__":
    main()
