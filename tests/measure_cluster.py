"""Measures the multi-node store (issue 12); prints figures, not a pass/fail test:

  RIDEPUSH_BIN=.build/release/ridepush .venv/bin/python tests/measure_cluster.py \\
      [--only fanout,roundtrip,crossnode,transitions] [--subscribers 10000] [--window 20] [--n 300]

Every part runs in this one invocation, against one PostgreSQL 15 started by tests/pg.py
(fsync on, synchronous_commit on), each part on a fresh database:
1. fanout: 4 nodes on one database, each with SUBSCRIBERS subscribers (SUBSCRIBERS/2 rides,
   the same rides on every node, started by whichever node's bench gets there first), one
   `ridepush bench --pid NODE` process per node running at once: CPU per delivered tick per
   node, tick latency p50/p99, missed ticks; then 4 nodes with SUBSCRIBERS/4 each (the same
   total as one node, so what 4 nodes as such cost shows apart from 4 times the work on this
   machine), and the same with 4 unrelated memory-store nodes (no cluster); then one node alone with SUBSCRIBERS subscribers, same bench flags, for the ratio;
2. roundtrip: pause/resume over a real WebSocket, one request in flight, on PostgreSQL and on
   SQLite (WAL, synchronous=FULL): median and p99;
3. crossnode: 4 nodes; a transition sent to node A -> the `state` push on a watcher of node D,
   timed on one clock (the watcher reads in its own thread), p50/p99;
4. transitions: native `ridepush bench --transitions` against one node, then two, then four
   nodes at once (one bench each; `--nodes`), with PostgreSQL's CPU, commits and WAL fsyncs
   over the run, and per durable transition PostgreSQL's CPU, WAL records and bytes, rows
   written per table and the nodes' own CPU; SQLite for reference (`--no-sqlite`: none).
   `--pg-statements`: PostgreSQL runs with pg_stat_statements (track=all) and the run prints
   its time per statement kind.
The load average is printed beside every part. Every process started here is ended here, by
PID; every wait is bounded."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from pg import Postgres  # noqa: E402
from rp import BIN, Client, Server  # noqa: E402

FAST = ("--control-rate", "1000000")
MANY = ("--max-connections-per-ip", "20000")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def stamp(part):
    print("\n## %s  %s UTC  load average %s" % (part, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), load()),
          flush=True)


def show(name, secs):
    ms = [s * 1000 for s in secs]
    print("%-58s n=%d median %.2f ms  p99 %.2f ms  max %.2f ms" % (name, len(ms), statistics.median(ms), pct(ms, 0.99),
                                                                 max(ms)), flush=True)


def metric(srv, name):
    status, text, _ = srv.get("/metrics")
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


# 1. fan-out


def bench_procs(nodes, subscribers, window, ramp, out_dir, tag, warmup=5):
    """One `ridepush bench` per node, all at once; returns their parsed JSON results. The
    bench counts a connection as open at its handshake, and on PostgreSQL a node is still
    committing the bench's starts (and answering the subscriptions waiting on them) for some
    seconds after that: `warmup` seconds pass before the window, so those are not counted as
    missed ticks."""
    procs = []
    for i, srv in enumerate(nodes):
        path = os.path.join(out_dir, "%s-%d.json" % (tag, i))
        err = open(path + ".err", "w")
        cmd = [BIN, "bench", "--url", srv.ws, "-n", str(subscribers), "-r", str(subscribers // 2),
               "--duration", str(window), "--ramp", str(ramp), "--connect-timeout", "180", "--warmup", str(warmup),
               "--pid", str(srv.proc.pid), "--json"]
        procs.append((subprocess.Popen(cmd, stdout=open(path, "w"), stderr=err), path, cmd))
    results = []
    for p, path, cmd in procs:
        try:
            p.wait(window + warmup + 180 + 60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
        try:
            with open(path) as f:
                results.append(json.load(f))
        except (OSError, ValueError):
            with open(path + ".err") as f:
                results.append({"error": "bench exited %s: %s" % (p.returncode, f.read()[-500:])})
    print("bench command (per node): " + " ".join(procs[0][2]).replace(nodes[0].ws, "ws://127.0.0.1:PORT/ws")
          .replace("--pid %d" % nodes[0].proc.pid, "--pid NODE_PID"))
    return results


def fanout_row(label, r):
    if "error" in r:
        print("%-12s %s" % (label, r["error"]))
        return None
    s = r.get("server") or {}
    lat = r["latency_ms"]
    print("%-12s connected %5d failed %4d  ticks %7d  p50 %6.1f ms  p99 %7.1f ms  missed %d (%d in window)  "
          "CPU/tick %6.2f µs (%5.1f %% of a core)  RSS/sub %.2f KiB  errors %s  window %s..%s"
          % (label, r["connected"], r["failed"], r["ticks_received"], lat["p50"] or 0, lat["p99"] or 0,
             r["missed_ticks"], r["missed_in_window"], s.get("cpu_us_per_tick") or 0, s.get("cpu_percent") or 0,
             s.get("rss_kib_per_subscriber") or 0, r.get("errors"), r.get("window_start_ms"), r.get("window_end_ms")),
          flush=True)
    return s.get("cpu_us_per_tick")


def four_nodes(pg, per_node, window, ramp, out_dir, tag, shared=True):
    """4 nodes on one fresh database (or, not `shared`, 4 unrelated nodes each with its own
    memory store), `per_node` subscribers on each; the per-node CPU/tick."""
    if shared:
        stamp("fanout: 4 nodes x %d subscribers on one PostgreSQL" % per_node)
        uri = pg.uri(pg.create_database())
    else:
        stamp("fanout: 4 separate nodes x %d subscribers, --store memory (no cluster)" % per_node)
        uri = "memory"
    nodes = [Server(*MANY, store=uri) for _ in range(4)]
    try:
        for s in nodes:
            s.start(timeout=30)
        results = bench_procs(nodes, per_node, window, ramp, out_dir, tag)
        print("load average after: %s" % load())
        cpus = [fanout_row("node %s" % "ABCD"[i], r) for i, r in enumerate(results)]
        for i, s in enumerate(nodes):
            print("node %s: ticks coalesced %s, store up %s, listener reconnects %s" % (
                "ABCD"[i], metric(s, "ridepush_ticks_coalesced_total"),
                metric(s, "ridepush_store_up"), metric(s, "ridepush_cluster_listener_reconnects_total")))
        starts = [r.get("window_start_ms") for r in results if "error" not in r]
        ends = [r.get("window_end_ms") for r in results if "error" not in r]
        if len(starts) == 4 and all(starts) and all(ends):
            print("windows overlap for %.1f s of %d s" % ((min(ends) - max(starts)) / 1000, window))
        return cpus
    finally:
        for s in nodes:
            s.stop()


def fanout(pg, subscribers, window, ramp, out_dir):
    cpus = four_nodes(pg, subscribers, window, ramp, out_dir, "fanout4")
    # The same total as one node alone, spread over 4 nodes: whether 4 nodes as such (the
    # cluster feed, 4 processes) cost anything, apart from 4 times the ticks on 2 cores.
    split = four_nodes(pg, subscribers // 4, window, ramp // 4 or 1, out_dir, "fanout4split")
    # And the same 4 processes without a cluster: what is the cluster's, what is 4 processes'.
    apart = four_nodes(pg, subscribers // 4, window, ramp // 4 or 1, out_dir, "fanout4memory", shared=False)
    stamp("fanout: one node alone x %d subscribers on PostgreSQL" % subscribers)
    alone = Server(*MANY, store=pg.uri(pg.create_database()))
    try:
        alone.start(timeout=30)
        one = bench_procs([alone], subscribers, window, ramp, out_dir, "fanout1")
        print("load average after: %s" % load())
        solo = fanout_row("alone", one[0])
    finally:
        alone.stop()
    for name, cs in (("4 x %d" % subscribers, cpus), ("4 x %d" % (subscribers // 4), split),
                     ("4 x %d, memory stores" % (subscribers // 4), apart)):
        good = [c for c in cs if c]
        if solo and good:
            print("CPU per delivered tick, each node of %s / one node alone x %d: %s" % (
                name, subscribers, "  ".join("%.2f×" % (c / solo) for c in good)), flush=True)


# 2. round trip


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


def roundtrip(pg, n):
    stamp("roundtrip: one request in flight")
    show("round trip, PostgreSQL", round_trips(pg.uri(pg.create_database()), n))
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        show("round trip, SQLite (WAL, synchronous=FULL)", round_trips(os.path.join(d, "m.db"), n))
    print("load average after: %s" % load())


# 3. cross-node push


class Watcher:
    """Reads one connection in its own thread and timestamps every `state` push on arrival,
    so the time a push reaches node D is not the time the main thread got round to it."""

    def __init__(self, url, ride):
        self.c = Client(url)
        self.c.request({"type": "subscribe", "ride": ride})
        self.states = []  # (perf_counter, state)
        self.cv = threading.Condition()
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                m = json.loads(self.c.ws.recv(timeout=0.5))
            except TimeoutError:
                continue
            except Exception:
                return
            if m.get("type") == "state":
                with self.cv:
                    self.states.append((time.perf_counter(), m.get("state")))
                    self.cv.notify_all()

    def after(self, k, want, timeout):
        """The arrival time of the first `want` push at index >= k."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for t, s in self.states[k:]:
                    if s == want:
                        return t
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no %s push on the watcher in %.0f s" % (want, timeout))
                self.cv.wait(left)

    def close(self):
        self.stop = True
        self.t.join(2)
        self.c.close()


def crossnode(pg, n):
    stamp("crossnode: 4 nodes, transition sent to A -> state on a watcher of D")
    uri = pg.uri(pg.create_database())
    nodes = [Server(*FAST, store=uri) for _ in range(4)]
    try:
        for s in nodes:
            s.start(timeout=30)
        with Client(nodes[0].ws) as ca:
            ca.request({"type": "start", "ride": "x-1"})
            # D learns of the ride through the NOTIFY or the catch-up read (2 s): wait for it.
            deadline = time.monotonic() + 10
            while True:
                try:
                    w = Watcher(nodes[3].ws, "x-1")
                    break
                except AssertionError:
                    raise
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            ack, push, gap = [], [], []
            try:
                for i in range(n):
                    kind = "pause" if i % 2 == 0 else "resume"
                    want = "paused" if kind == "pause" else "riding"
                    with w.cv:
                        k = len(w.states)
                    t0 = time.perf_counter()
                    r = ca.request({"type": kind, "ride": "x-1"}, timeout=10)
                    t1 = time.perf_counter()
                    assert r["type"] == "state", r
                    t2 = w.after(k, want, 10)
                    ack.append(t1 - t0)
                    push.append(t2 - t0)
                    gap.append(t2 - t1)
            finally:
                w.close()
        show("sent to A -> ack on A", ack)
        show("sent to A -> state on D's watcher", push)
        show("ack on A -> state on D (negative: D first)", gap)
        late = sum(1 for x in push if x > 1.0)
        print("pushes on D later than 1 s after the send: %d of %d (catch-up read every 2 s)" % (late, len(push)))
        print("load average after: %s" % load())
    finally:
        for s in nodes:
            s.stop()


# 4. durable transitions/s


# The bench's request ids are the same in every bench process ("lane.cycle.s"), and replies
# are kept per (rider, id): two benches as one anonymous rider would collide on every id, so
# every bench process here is its own rider (a control token of its own).
SECRET = "measure-cluster-" + "k" * 32


def signed_server(store):
    # No per-rider cap: each bench is one rider with 64 × 2 rides in flight (the default cap of
    # 5 open rides turned nearly every start into a `too_many_rides` error, not a transition).
    return Server(*FAST, "--max-open-rides-per-rider", "1000000", store=store, auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET})


def token(rider):
    r = subprocess.run([BIN, "token", "--control", "--sub", rider, "--ttl", "1h"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30, env=dict(os.environ, RIDEPUSH_JWT_SECRET=SECRET))
    if r.returncode != 0:
        raise RuntimeError("ridepush token: " + r.stderr)
    return r.stdout.strip()


def transitions_bench(srv, conns, depth, seconds, disk, tag):
    cmd = [BIN, "bench", "--transitions", "--url", srv.ws, "-n", str(conns), "--depth", str(depth),
           "--duration", str(seconds), "--disk", disk, "--token", token("bench-" + tag.replace(" ", "-"))]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), cmd, tag


def finish(p, seconds):
    proc, cmd, tag = p
    try:
        out, _ = proc.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=5)
    print("[%s] %s" % (tag, " ".join(cmd[:-1] + ["CONTROL_TOKEN"])))
    for line in out.splitlines():
        print("[%s] %s" % (tag, line))
    for line in out.splitlines():
        if "durable transitions/s" in line:
            return float(line.split()[2])
    return None


def proc_ticks(pid, children=False):
    """utime + stime of `pid` in clock ticks (with `children`: + the reaped children's)."""
    with open("/proc/%d/stat" % pid) as f:
        f_ = f.read().rsplit(")", 1)[1].split()
    return int(f_[11]) + int(f_[12]) + ((int(f_[13]) + int(f_[14])) if children else 0)


def pg_cpu_ticks(pg):
    """CPU (clock ticks) of the postmaster and every process it forked, live or exited: the
    postmaster's own utime + stime, its reaped children's (cutime + cstime, so a backend that
    exited when its node stopped still counts), and every live child's utime + stime."""
    root = pg.proc.pid
    total = proc_ticks(root, children=True)
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == root:
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                f_ = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f_[1]) == root:
            total += int(f_[11]) + int(f_[12])
    return total


def machine_busy():
    """(busy, total) clock ticks of every core so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


TABLES = ("rides", "journal", "replies", "webhook_outbox", "traces")


def pg_counters(pg, db):
    """What PostgreSQL has done so far: commits of `db`, WAL fsyncs, records, full-page images,
    bytes (pg_current_wal_lsn, exact), journal entries (count(*), exact) and per table rows
    inserted / updated / HOT-updated (statistics: read once the nodes' backends have exited,
    which flushes them)."""
    c = pg.psql("SELECT xact_commit FROM pg_stat_database WHERE datname = '%s'" % db)[0][0]
    w = pg.psql("SELECT wal_sync, wal_records, wal_fpi, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_wal")[0]
    out = {"commits": int(c), "syncs": int(w[0]), "records": int(w[1]), "fpi": int(w[2]), "bytes": int(float(w[3]))}
    try:
        out["entries"] = int(pg.psql("SELECT count(*) FROM ridepush.journal", db=db)[0][0])
        for row in pg.psql("SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                           "WHERE schemaname = 'ridepush'", db=db):
            out["ins." + row[0]], out["upd." + row[0]], out["hot." + row[0]] = int(row[1]), int(row[2]), int(row[3])
        for row in pg.psql("SELECT t.relname, count(*) FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid "
                           "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = 'ridepush' GROUP BY 1", db=db):
            out["idx." + row[0]] = int(row[1])
    except RuntimeError:
        out["entries"] = 0
    return out


def statements_report(pg, db, transitions):
    """With --pg-statements: PostgreSQL's time per statement kind (plan + execute, per
    durable transition), the top ones."""
    rows = pg.psql("SELECT calls, total_plan_time, total_exec_time, rows, wal_records, "
                   "regexp_replace(left(query, 110), '\\s+', ' ', 'g') FROM pg_stat_statements s "
                   "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '%s' "
                   "ORDER BY total_plan_time + total_exec_time DESC LIMIT 12" % db, db=db)
    total = pg.psql("SELECT sum(total_plan_time), sum(total_exec_time), sum(calls) FROM pg_stat_statements s "
                    "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '%s'" % db, db=db)[0]
    t = max(1, transitions)
    print("pg_stat_statements (track=all), per durable transition: plan %.1f µs + execute %.1f µs over %.2f statements"
          % (1000 * float(total[0] or 0) / t, 1000 * float(total[1] or 0) / t, int(total[2] or 0) / t))
    for calls, plan, ex, nrows, wal, q in rows:
        print("  %8d calls  plan %6.1f µs/tr  exec %6.1f µs/tr  WAL rec %5.2f/tr  %s"
              % (int(calls), 1000 * float(plan) / t, 1000 * float(ex) / t, int(wal) / t, q))


def pg_nodes(pg, n, conns, depth, seconds, statements=False):
    """n nodes on one fresh database, one bench each at once: their rates, and what PostgreSQL
    did in the meantime (CPU, commits, WAL), and the nodes' own CPU, per durable transition."""
    db = pg.create_database()
    uri = pg.uri(db)
    if statements:
        pg.psql("CREATE EXTENSION pg_stat_statements", db=db)
    nodes = [signed_server(uri) for _ in range(n)]
    hz = os.sysconf("SC_CLK_TCK")
    try:
        for s in nodes:
            s.start(timeout=30)
        if statements:
            pg.psql("SELECT pg_stat_statements_reset()", db=db)
        time.sleep(1.2)  # the nodes' startup statistics flushed before the first reading
        c0, t0, m0 = pg_counters(pg, db), pg_cpu_ticks(pg), machine_busy()
        n0 = [proc_ticks(s.proc.pid) for s in nodes]
        w0 = time.monotonic()
        runs = [transitions_bench(s, conns, depth, seconds, pg.dir, "pg node %d of %d" % (i + 1, n))
                for i, s in enumerate(nodes)]
        rates = [finish(p, seconds) for p in runs]
        wall = time.monotonic() - w0
        n1 = [proc_ticks(s.proc.pid) for s in nodes]
        m1 = machine_busy()
    finally:
        for s in nodes:
            s.stop()
    time.sleep(1.2)  # the exited backends' statistics are flushed; their CPU is the postmaster's cutime
    c1, t1 = pg_counters(pg, db), pg_cpu_ticks(pg)
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    done = d["entries"]
    tr = max(1, done)
    us = 1e6 / hz
    print("PostgreSQL during %d node(s) (%.1f s incl. ramp): CPU %.0f %% of a core; %d commits (%.0f/s), "
          "%.1f transitions per commit; %d WAL fsyncs (%.0f/s); %.1f WAL records per transition; "
          "whole machine busy %.0f %% of %d cores; load %s"
          % (n, wall, 100.0 * (t1 - t0) / hz / wall, d["commits"], d["commits"] / wall, done / max(1, d["commits"]),
             d["syncs"], d["syncs"] / wall, d["records"] / tr, 100.0 * (m1[0] - m0[0]) / max(1, m1[1] - m0[1]),
             os.cpu_count(), load()))
    rows = "  ".join("%s +%.2f ins %.2f upd (%.2f HOT) [%d idx]" % (t, d.get("ins." + t, 0) / tr, d.get("upd." + t, 0) / tr,
                                                                   d.get("hot." + t, 0) / tr, c1.get("idx." + t, 0))
                     for t in TABLES if d.get("ins." + t, 0) or d.get("upd." + t, 0))
    print("per durable transition (%d journal entries written, %d nodes): PostgreSQL CPU %.0f µs; WAL %.2f records, "
          "%.0f bytes, %.3f full-page images; nodes' CPU %.0f µs; rows: %s"
          % (done, n, (t1 - t0) * us / tr, d["records"] / tr, d["bytes"] / tr, d["fpi"] / tr,
             sum(b - a for a, b in zip(n0, n1)) * us / tr, rows), flush=True)
    if statements:
        statements_report(pg, db, done)
    return rates


def transitions(pg, conns, depth, seconds, node_counts, statements=False, sqlite=True):
    stamp("transitions: native bench, group commit")
    results = {}
    for n in node_counts:
        results[n] = pg_nodes(pg, n, conns, depth, seconds, statements)
        print("load average after: %s" % load())
    lite = None
    if sqlite:
        with tempfile.TemporaryDirectory(dir="/tmp") as d:
            s = signed_server(os.path.join(d, "t.db"))
            try:
                s.start(timeout=30)
                lite = finish(transitions_bench(s, conns, depth, seconds, d, "sqlite one node"), seconds)
            finally:
                s.stop()
        print("load average after: %s" % load())
    for n, rates in results.items():
        if all(rates):
            print("PostgreSQL, %d node(s) at once: %s = %.0f/s" % (n, " + ".join("%.0f" % r for r in rates), sum(rates)))
    one = (results.get(1) or [None])[0]
    if one and lite:
        print("PostgreSQL one node / SQLite one node: %.2f×" % (one / lite))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="fanout,roundtrip,crossnode,transitions")
    ap.add_argument("--subscribers", type=int, default=10000)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--ramp", type=int, default=1000, help="connects/s per bench process")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--nodes", default="1,2,4", help="transitions: node counts, each a run of its own")
    ap.add_argument("--no-sqlite", action="store_true", help="transitions: skip the SQLite reference run")
    ap.add_argument("--pg-statements", action="store_true",
                    help="transitions: load pg_stat_statements (track=all) and print PostgreSQL's time per statement")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "bench-output"))
    a = ap.parse_args()
    parts = a.only.split(",")
    os.makedirs(a.out, exist_ok=True)
    print("# %s  %s, %d cores, binary %s" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                              " ".join(os.uname()[i] for i in (0, 2, 4)), os.cpu_count(), BIN))
    pg = Postgres().start(settings=("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all")
                          if a.pg_statements else ())
    try:
        if "fanout" in parts:
            fanout(pg, a.subscribers, a.window, a.ramp, a.out)
        if "roundtrip" in parts:
            roundtrip(pg, a.n)
        if "crossnode" in parts:
            crossnode(pg, a.n)
        if "transitions" in parts:
            transitions(pg, a.conns, a.depth, a.seconds, [int(x) for x in a.nodes.split(",")], a.pg_statements,
                        not a.no_sqlite)
    finally:
        pg.close()


if __name__ == "__main__":
    main()
