"""Several nodes on one PostgreSQL (issue 12), end to end: real `ridepush serve` processes on
a real PostgreSQL started by the tests (tests/pg.py). Every wait is bounded."""
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from pg import pg_db, postgres  # noqa: F401 (fixtures)
from rp import ROOT, Client, Server

FAST = ("--control-rate", "100000", "--max-subscriptions", "256")


def node(uri, *args):
    return Server(*FAST, *args, store=uri).start()


def journal(pg, db, ride):
    return [tuple(r) for r in pg.psql("SELECT seq, kind, at FROM ridepush.journal WHERE ride_id = '%s' ORDER BY seq" % ride, db)]


def health(srv):
    status, body, _ = srv.get("/healthz")
    return status, body


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("not within %.0fs: %s" % (timeout, what))
        time.sleep(0.05)


def ticks(client, ride):
    """Every tick of `ride` this client has received (left in its backlog by wait_for)."""
    return {m["at"]: m for m in client.backlog if m.get("type") == "tick" and m.get("ride") == ride}


def test_three_nodes_one_ride_every_watcher_sees_every_transition(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = node(uri), node(uri)
    time.sleep(1.1)  # C starts a second later: a per-process tick counter would differ from A's and B's
    c = node(uri)
    try:
        ctl = {n: Client(n.ws) for n in (a, b, c)}
        started = ctl[a].request({"type": "start", "ride": "r-trio"})
        assert (started["type"], started["state"]) == ("state", "riding")
        watchers = [Client(n.ws) for n in (a, b, c)]
        for w in watchers:
            m = w.request({"type": "subscribe", "ride": "r-trio"})
            assert (m["type"], m["state"], m["started_at"]) == ("state", "riding", started["started_at"])

        def everyone_sees(state, reply):
            pushed = [w.wait_for(lambda m: m.get("type") == "state" and m.get("state") == state, 5) for w in watchers]
            # The same ride with the same recorded instants everywhere (elapsed and fare of a
            # riding ride depend on when each node encoded its push, so only frozen ones compare).
            keys = ("ride", "state", "started_at", "ended_at", "plan") + (("elapsed", "paused", "fare") if state != "riding" else ())
            for p in pushed:
                assert {k: p.get(k) for k in keys} == {k: reply.get(k) for k in keys}
            return pushed

        time.sleep(2.2)
        paused = ctl[b].request({"type": "pause", "ride": "r-trio"})
        assert paused["state"] == "paused"
        everyone_sees("paused", paused)
        time.sleep(1.5)
        resumed = ctl[c].request({"type": "resume", "ride": "r-trio"})
        assert resumed["state"] == "riding"
        everyone_sees("riding", resumed)
        time.sleep(2.2)
        ended = ctl[a].request({"type": "end", "ride": "r-trio", "distance": 640})
        assert ended["state"] == "ended"
        pushes = everyone_sees("ended", ended)
        assert all(p["receipt"] == ended["receipt"] for p in pushes)

        # Ticks: the same second carries the same seq, elapsed, paused, fare and state on
        # every node (seq from the wall-clock second, the rest from the recorded instants).
        per_node = [ticks(w, "r-trio") for w in watchers]
        common = sorted(set(per_node[0]) & set(per_node[1]) & set(per_node[2]))
        assert len(common) >= 4, [sorted(t) for t in per_node]
        # A node encodes second S from the transitions it has heard of by S: one recorded just
        # before S on another node reaches it through PostgreSQL's NOTIFY (milliseconds, more on
        # a loaded machine), so the first second after a transition may still show the state
        # before it on a node that had not heard yet (seen once, with the machine at a load of
        # 8). Every other second must be the same everywhere.
        instants = [int(t) for _, _, t in journal(pg, db, "r-trio")]
        settled = [at for at in common if not any(t <= at < t + 1000 for t in instants)]
        assert len(settled) >= 2, (common, instants)
        for at in settled:
            views = [{k: t[at][k] for k in ("seq", "state", "elapsed", "paused", "fare")} for t in per_node]
            assert views[0] == views[1] == views[2], (at, views)
        assert {per_node[0][at]["state"] for at in common} == {"riding", "paused"}
        # One receipt: the journal holds exactly the four transitions.
        assert [k for _, k, _ in journal(pg, db, "r-trio")] == ["start", "pause", "resume", "end"]
        assert [int(x) for x, _, _ in journal(pg, db, "r-trio")] == [1, 2, 3, 4]
    finally:
        for n in (a, b, c):
            n.stop()


def test_two_nodes_ending_the_same_ride_at_once_100_times_exactly_one_end(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = node(uri), node(uri)
    try:
        ca, cb = Client(a.ws), Client(b.ws)
        wa, wb = Client(a.ws), Client(b.ws)
        outcomes = {"a": 0, "b": 0}
        for i in range(100):
            rid = "race-%03d" % i
            assert ca.request({"type": "start", "ride": rid})["state"] == "riding"
            for w in (wa, wb):
                assert w.request({"type": "subscribe", "ride": rid})["state"] == "riding"
            ia, ib = "ea-%d" % i, "eb-%d" % i
            # Both ends are on the wire before either reply is read.
            ca.send({"type": "end", "id": ia, "ride": rid})
            cb.send({"type": "end", "id": ib, "ride": rid})
            ra = ca.wait_for(lambda m: m.get("id") == ia, 5)
            rb = cb.wait_for(lambda m: m.get("id") == ib, 5)
            kinds = sorted([ra.get("state") or ra.get("code"), rb.get("state") or rb.get("code")])
            assert kinds == ["ended", "invalid_transition"], (rid, ra, rb)
            outcomes["a" if ra.get("state") == "ended" else "b"] += 1
            winner = ra if ra.get("state") == "ended" else rb
            for w in (wa, wb):
                m = w.wait_for(lambda m: m.get("type") == "state" and m.get("ride") == rid and m.get("state") == "ended", 5)
                assert m["receipt"] == winner["receipt"]
        # No second end was pushed anywhere: each watcher got exactly one ended state per ride.
        time.sleep(0.5)
        for w in (wa, wb):
            try:
                for _ in range(1000):
                    w.backlog.append(json.loads(w.ws.recv(timeout=0.3)))
            except TimeoutError:
                pass
            extra = [m for m in w.backlog if m.get("type") == "state" and m.get("state") == "ended"]
            assert extra == []
        rows = pg.psql("SELECT count(*) FILTER (WHERE kind = 'end'), count(DISTINCT ride_id) FROM ridepush.journal", db)
        assert rows == [["100", "100"]]
        print("races won: node A %(a)d, node B %(b)d" % outcomes)
    finally:
        a.stop()
        b.stop()


def test_a_time_limit_ends_the_ride_once_across_nodes(pg_db):
    """Both nodes hold the ride and both try the auto-end at the same second: one append
    wins, the other is refused and takes the winner's end; every watcher sees one end."""
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = node(uri), node(uri)
    try:
        ca = Client(a.ws)
        started = ca.request({"type": "start", "ride": "r-limit", "limit": 3})
        assert started["state"] == "riding"
        wait_until(lambda: b.get("/rides/r-limit")[1].get("state") == "riding", 5, "B holds the ride")
        watchers = [Client(a.ws), Client(b.ws)]
        for w in watchers:
            assert w.request({"type": "subscribe", "ride": "r-limit"})["state"] == "riding"
        ends = [w.wait_for(lambda m: m.get("type") == "state" and m.get("state") == "ended", 8) for w in watchers]
        assert [e["receipt"]["reason"] for e in ends] == ["time_limit", "time_limit"]
        assert ends[0]["ended_at"] == ends[1]["ended_at"] == started["started_at"] + 3000
        assert ends[0]["receipt"] == ends[1]["receipt"]
        time.sleep(1.5)
        for w in watchers:
            try:
                for _ in range(100):
                    w.backlog.append(json.loads(w.ws.recv(timeout=0.3)))
            except TimeoutError:
                pass
            assert [m for m in w.backlog if m.get("type") == "state" and m.get("state") == "ended"] == []
        assert [k for _, k, _ in journal(pg, db, "r-limit")] == ["start", "end"]
        for n in (a, b):
            assert not any("auto-end of ride r-limit not recorded" in line for line in n.lines), n.lines
    finally:
        a.stop()
        b.stop()


def test_listener_killed_transitions_made_meanwhile_still_reach_every_node(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = node(uri), node(uri)
    try:
        ca = Client(a.ws)
        wb = Client(b.ws)
        assert ca.request({"type": "start", "ride": "r-lost"})["state"] == "riding"
        assert wb.request({"type": "subscribe", "ride": "r-lost"})["state"] == "riding"
        # Kill both listeners and keep them out: new connections to the database are
        # refused, the nodes' store connections stay.
        pg.psql("ALTER DATABASE %s WITH ALLOW_CONNECTIONS false" % db)
        assert pg.terminate(db, "ridepush-listen") == 2
        wait_until(lambda: health(b)[0] == 503, 5, "node B degraded while its listener is gone")
        assert health(b)[1]["status"] == "degraded"
        t0 = time.monotonic()
        assert ca.request({"type": "pause", "ride": "r-lost"})["state"] == "paused"
        m = wb.wait_for(lambda m: m.get("type") == "state" and m.get("state") == "paused", 6)
        # No notification could reach B: the catch-up read (every 2 s) brought it.
        assert time.monotonic() - t0 < 5
        assert m["ride"] == "r-lost"
        pg.psql("ALTER DATABASE %s WITH ALLOW_CONNECTIONS true" % db)
        wait_until(lambda: health(b)[0] == 200 and health(a)[0] == 200, 10, "both nodes ok again")
        assert len(pg.psql("SELECT pid FROM pg_stat_activity WHERE datname = '%s' AND application_name = 'ridepush-listen'" % db)) == 2
        # Listening again: a transition reaches B at once, not at the next catch-up.
        t1 = time.monotonic()
        assert ca.request({"type": "resume", "ride": "r-lost"})["state"] == "riding"
        wb.wait_for(lambda m: m.get("type") == "state" and m.get("state") == "riding", 5)
        assert time.monotonic() - t1 < 1.5
    finally:
        pg.psql("ALTER DATABASE %s WITH ALLOW_CONNECTIONS true" % db)
        a.stop()
        b.stop()


def test_postgres_stopped_and_restarted_under_load_degraded_then_ok_nothing_acknowledged_lost(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = node(uri), node(uri)
    acked = {}        # request id -> the state reply
    unavailable = []  # (node, message) answered unavailable
    failures = []     # assertion failures inside the load threads
    lock = threading.Lock()
    stop = threading.Event()

    def load(srv, tag):
        try:
            run_load(srv, tag)
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            failures.append("%s: %r" % (tag, e))

    def run_load(srv, tag):
        c = Client(srv.ws)
        n = 0
        while not stop.is_set() and n < 2000:
            n += 1
            rid = "%s-%04d" % (tag, n)
            for kind in ("start", "end"):
                msg = {"type": kind, "ride": rid, "id": "%s-%s" % (kind, rid)}
                while not stop.is_set():
                    t = time.monotonic()
                    r = c.request(msg, timeout=10)
                    took = time.monotonic() - t
                    if r.get("type") == "state":
                        with lock:
                            acked[msg["id"]] = r
                        break
                    assert r.get("code") == "unavailable", r
                    assert took < 6, ("unavailable must come within a few seconds", took)
                    with lock:
                        unavailable.append((tag, msg["id"]))
                    time.sleep(0.2)  # retry with the same id
        c.close()

    workers = [threading.Thread(target=load, args=(s, t), daemon=True) for s, t in ((a, "a"), (b, "b"))]
    watcher = Client(a.ws)
    assert watcher.request({"type": "start", "ride": "w"})["state"] == "riding"
    assert watcher.request({"type": "subscribe", "ride": "w"})["state"] == "riding"
    try:
        for w in workers:
            w.start()
        time.sleep(2)
        pg.stop()
        wait_until(lambda: health(a)[0] == 503 and health(b)[0] == 503, 8, "both nodes degraded")
        assert health(a)[1]["status"] == "degraded"
        # Ticks go on from memory while the store is gone.
        seen = set()
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:
            m = watcher.wait_for(lambda m: m.get("type") == "tick" and m.get("ride") == "w", 3)
            seen.add(m["seq"])
        assert len(seen) >= 3
        status, text, _ = a.get("/metrics")
        assert "ridepush_store_up 0" in text
        time.sleep(1)
        pg.start()
        wait_until(lambda: health(a)[0] == 200 and health(b)[0] == 200, 15, "both nodes ok again")
        status, text, _ = a.get("/metrics")
        assert "ridepush_store_up 1" in text
        time.sleep(2)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    try:
        assert failures == []
        assert unavailable, "the load should have met PostgreSQL down"
        with lock:
            ids = dict(acked)
        # Every acknowledged transition is in the journal, exactly once, with the acknowledged instant.
        rows = pg.psql("SELECT ride_id, kind, at FROM ridepush.journal WHERE ride_id <> 'w' ORDER BY ride_id, seq", db)
        stored = {}
        for rid, kind, at in rows:
            assert (kind, rid) not in stored, ("twice", kind, rid)
            stored[(kind, rid)] = int(at)
        for rid_kind, reply in ids.items():
            kind, rid = rid_kind.split("-", 1)
            assert (kind, rid) in stored, ("acknowledged but missing", rid_kind)
            instant = reply["started_at"] if kind == "start" else reply["ended_at"]
            assert stored[(kind, rid)] == instant, (rid_kind, stored[(kind, rid)], instant)
        # Nothing in the journal that was not acknowledged, except a last request cut off by
        # the stop (its reply never read): at most one per worker.
        assert len(set(stored) - {tuple(k.split("-", 1)) for k in ids}) <= 2
    finally:
        a.stop()
        b.stop()


def test_a_newer_schema_is_refused_at_start_with_a_clear_message(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    n = node(uri)
    n.stop()
    pg.psql("INSERT INTO ridepush.schema_version (version) VALUES (99)", db)
    s = Server(*FAST, store=uri)
    with pytest.raises(RuntimeError) as e:
        s.start()
    assert "schema version 99 is newer than this RidePush supports" in str(e.value)
    assert s.proc.returncode not in (0, None)


def test_store_password_from_a_file_and_never_in_the_log(pg_db, tmp_path):
    pg, db = pg_db
    pg.psql("CREATE ROLE node_pw LOGIN PASSWORD 's3cret pw'; GRANT ALL ON DATABASE %s TO node_pw" % db, db)
    # Host connections of this role need the password (scram); the superuser stays trusted.
    with open(pg.data + "/pg_hba.conf") as f:
        hba = f.read()
    with open(pg.data + "/pg_hba.conf", "w") as f:
        f.write("host all node_pw 127.0.0.1/32 scram-sha-256\n" + hba)
    pg.psql("SELECT pg_reload_conf()")
    time.sleep(0.3)
    pw = tmp_path / "store-password"
    pw.write_text("s3cret pw\n")
    uri = "postgresql://node_pw:wrong-in-uri@127.0.0.1:%d/%s" % (pg.port, db)
    bad = Server(*FAST, store="postgresql://node_pw@127.0.0.1:%d/%s" % (pg.port, db))
    with pytest.raises(RuntimeError) as e:
        bad.start()
    assert "no password supplied" in str(e.value) or "password authentication failed" in str(e.value)
    n = node(uri, "--store-password-file", str(pw))
    try:
        c = Client(n.ws)
        assert c.request({"type": "start", "ride": "r-pw"})["state"] == "riding"
        assert "wrong-in-uri" not in "\n".join(n.lines)
        assert "postgresql://node_pw:***@127.0.0.1" in "\n".join(n.lines)
    finally:
        n.stop()


# ---------------------------------------------------------------------------------------
# A node killed behind nginx
# ---------------------------------------------------------------------------------------

SITE = os.path.join(ROOT, "deploy", "nginx", "ridepush-cluster.conf")


def render_cluster_site(node_ports, port, redirect_port, log_dir):
    """deploy/nginx/ridepush-cluster.conf with only machine-specific values swapped (each
    exactly as often as expected): the node ports (one to three; unused lines dropped), plain HTTP on loopback for the
    site (no certificate needed to test routing), the per-address cap (every watcher here
    comes from 127.0.0.1)."""
    text = open(SITE).read()
    swaps = [("server 127.0.0.1:%d max_fails" % p, "server 127.0.0.1:%d max_fails" % q, 1)
             for p, q in zip((8081, 8082, 8083), node_ports)] + [
        ("listen 443 ssl;", "listen 127.0.0.1:%d;" % port, 1),
        ("    listen [::]:443 ssl;\n", "", 1),
        ("listen 80;", "listen 127.0.0.1:%d;" % redirect_port, 1),
        ("    listen [::]:80;\n", "", 1),
        ("    ssl_certificate     /etc/ssl/ridepush/fullchain.pem;\n", "", 1),
        ("    ssl_certificate_key /etc/ssl/ridepush/privkey.pem;\n", "", 1),
        ("limit_conn ridepush_conn 256;", "limit_conn ridepush_conn 4096;", 1),
        ("/var/log/nginx/", str(log_dir) + "/", 3),
    ]
    for old, new, count in swaps:
        assert text.count(old) == count, "%r occurs %d times in %s" % (old, text.count(old), SITE)
        text = text.replace(old, new)
    # Fewer nodes than the site's three: the unused `server` lines go.
    for p in (8081, 8082, 8083)[len(node_ports):]:
        line = "    server 127.0.0.1:%d max_fails=0;\n" % p
        assert text.count(line) == 1, "%r occurs %d times in %s" % (line, text.count(line), SITE)
        text = text.replace(line, "")
    return text


class ClusterNginx:
    def __init__(self, tmp, node_ports):
        self.tmp = tmp
        self.port = free_port()
        logs, temp = tmp / "logs", tmp / "temp"
        logs.mkdir(parents=True, exist_ok=True)
        temp.mkdir(parents=True, exist_ok=True)
        (tmp / "site.conf").write_text(render_cluster_site(node_ports, self.port, free_port(), logs))
        (tmp / "nginx.conf").write_text("""
%(user)s
worker_processes 1;
worker_rlimit_nofile 8192;
pid %(tmp)s/nginx.pid;
error_log %(tmp)s/logs/error.log info;
events { worker_connections 4096; }
http {
    client_body_temp_path %(temp)s/body;
    proxy_temp_path %(temp)s/proxy;
    fastcgi_temp_path %(temp)s/fastcgi;
    uwsgi_temp_path %(temp)s/uwsgi;
    scgi_temp_path %(temp)s/scgi;
    include %(tmp)s/site.conf;
}
""" % {"user": "user root;" if os.geteuid() == 0 else "", "tmp": tmp, "temp": temp})
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(logs / "error.log"),
                                      "-g", "daemon off;"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until(lambda: self._listening() or self.proc.poll() is not None, 10, "nginx listening")
        assert self.proc.poll() is None, self.proc.stdout.read()

    def _listening(self):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kill9_of_a_node_with_watchers_they_reconnect_through_nginx_and_see_their_rides_unchanged(pg_db, tmp_path):
    pg, db = pg_db
    uri = pg.uri(db)
    nodes = [node(uri), node(uri), node(uri)]
    nginx = ClusterNginx(tmp_path, [n.port for n in nodes])
    victim = nodes[1]
    try:
        # 50 rides started on node 0; every fifth paused through the victim, acknowledged
        # just before it dies.
        ctl = Client(nodes[0].ws)
        rides = ["k-%02d" % i for i in range(50)]
        for rid in rides:
            assert ctl.request({"type": "start", "ride": rid})["state"] == "riding"
        on_victim = Client(victim.ws)
        paused = {}
        for rid in rides[::5]:
            r = on_victim.request({"type": "pause", "ride": rid})
            assert r["state"] == "paused"
            paused[rid] = r
        # Other nodes apply the pauses when the NOTIFY arrives (milliseconds later): the
        # watchers start once every node shows them.
        wait_until(lambda: all(n.get("/rides/%s" % rid)[1].get("state") == "paused" for n in nodes for rid in paused),
                   10, "every node shows the pauses")
        url = "ws://127.0.0.1:%d/ws" % nginx.port
        result = asyncio.run(watch_through_kill(url, rides, 500, victim))
        print("watchers: %(connected)d connected, %(dropped)d dropped by the kill, %(reconnected)d reconnected, %(ticking)d ticking after" % result)
        assert result["connected"] == 500
        # least_conn spread them; the victim held some of them.
        assert result["dropped"] >= 50, result
        assert result["reconnected"] == result["dropped"], result
        assert result["ticking"] == 500, result
        for rid, states in result["states"].items():
            # Before and after the kill, on whichever node: the same ride.
            for s in states:
                assert s["state"] == ("paused" if rid in paused else "riding"), (rid, s)
                assert s["started_at"] == result["states"][rid][0]["started_at"]
                if rid in paused:
                    assert s["elapsed"] == paused[rid]["elapsed"], (rid, s, paused[rid])
        # Nothing acknowledged is lost.
        for rid in rides:
            kinds = [k for _, k, _ in journal(pg, db, rid)]
            assert kinds == (["start", "pause"] if rid in paused else ["start"]), (rid, kinds)
    finally:
        nginx.stop()
        for n in nodes:
            if n.proc.poll() is None:
                n.stop()


async def watch_through_kill(url, rides, count, victim):
    """`count` watchers through nginx, one ride each (round robin over `rides`). Once all are
    subscribed, the victim node is killed with SIGKILL; each watcher whose connection drops
    reconnects through nginx and subscribes again; then every watcher must see a tick."""
    from websockets.asyncio.client import connect as aconnect
    from websockets.exceptions import ConnectionClosed

    states = {rid: [] for rid in rides}
    all_subscribed = asyncio.Event()
    counters = {"connected": 0, "dropped": 0, "reconnected": 0, "ticking": 0}
    subscribed = 0
    gate = asyncio.Semaphore(50)

    async def subscribe(ws, rid):
        await ws.send(json.dumps({"type": "subscribe", "id": "s", "ride": rid}))
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if m.get("id") == "s":
                assert m["type"] == "state", m
                states[rid].append(m)
                return

    async def one(i):
        nonlocal subscribed
        rid = rides[i % len(rides)]
        async with gate:
            ws = await aconnect(url, subprotocols=["ride.v1"], open_timeout=15)
            await subscribe(ws, rid)
        counters["connected"] += 1
        subscribed += 1
        if subscribed == count:
            all_subscribed.set()
        await all_subscribed.wait()
        try:
            deadline = time.monotonic() + 20
            dropped = False
            while time.monotonic() < deadline:
                try:
                    m = json.loads(await asyncio.wait_for(ws.recv(), 5))
                except ConnectionClosed:
                    dropped = True
                    counters["dropped"] += 1
                    for attempt in range(20):
                        try:
                            ws = await aconnect(url, subprotocols=["ride.v1"], open_timeout=10)
                            await subscribe(ws, rid)
                            counters["reconnected"] += 1
                            break
                        except (OSError, ConnectionClosed, asyncio.TimeoutError, Exception):  # noqa: BLE001 (nginx may still try the dead node)
                            await asyncio.sleep(0.2)
                    continue
                # A tick after the kill (3 s after it: the victim's watchers have moved).
                if m.get("type") == "tick" and m.get("ride") == rid and killed_at and time.monotonic() > killed_at + 3:
                    counters["ticking"] += 1
                    return dropped
        finally:
            await ws.close()

    killed_at = None
    tasks = [asyncio.create_task(one(i)) for i in range(count)]
    await asyncio.wait_for(all_subscribed.wait(), 120)
    victim.kill9()
    killed_at = time.monotonic()
    await asyncio.gather(*tasks, return_exceptions=False)
    counters["states"] = states
    return counters


def test_postgres_back_healthz_ok_within_5s_with_no_client_write(pg_db):
    """Issue 25, finding 4: a node whose last write failed probes the store itself."""
    pg, db = pg_db
    a = node(pg.uri(db))
    c = Client(a.ws)
    try:
        assert c.request({"type": "start", "id": "s1", "ride": "r-1"})["state"] == "riding"
        assert health(a)[0] == 200
        pg.stop()
        e = c.request({"type": "start", "id": "s2", "ride": "r-2"}, timeout=10)
        assert (e["type"], e["code"]) == ("error", "unavailable"), e
        status, body = wait_until(lambda: (lambda h: h if h[0] == 503 else None)(health(a)), 8, "degraded")
        assert body["status"] == "degraded" and body["store"] in ("failing", "unreachable"), body
        time.sleep(3)  # down a while: the probe keeps failing, and nothing else writes
        status, body = health(a)
        assert status == 503 and body["store"] in ("failing", "unreachable"), body
        pg.start()
        back = time.monotonic()
        status, body = wait_until(lambda: (lambda h: h if h[0] == 200 else None)(health(a)), 10, "ok again")
        took = time.monotonic() - back
        assert body["status"] == "ok" and body["store"] == "ok", body
        assert took <= 5, ("ok only %.1f s after PostgreSQL returned" % took, body)
        # The ride written before the outage is there; r-2 was never recorded.
        assert [r[0] for r in journal(pg, db, "r-1")] == ["1"] and journal(pg, db, "r-2") == []
    finally:
        c.close()
        a.stop()


def test_each_transition_on_the_other_node_at_once_is_never_refused(pg_db):
    """Read your own writes across nodes (issue 39, item 0): 50 rides, each transition sent to
    the other node as soon as the previous one is answered, with no wait for the first node's
    notification. A node whose view is behind reads the ride from the store and decides again:
    0 refusals, and every journal is the rider's sequence."""
    pg, db = pg_db
    a = node(pg.uri(db))
    try:
        b = node(pg.uri(db))
        try:
            with Client(a.ws) as ca, Client(b.ws) as cb:
                walk = [("start", "riding"), ("pause", "paused"), ("resume", "riding"), ("pause", "paused"),
                        ("resume", "riding"), ("end", "ended")]
                refused = []
                for i in range(50):
                    ride = "alt-%d" % i
                    clients = (ca, cb) if i % 2 == 0 else (cb, ca)
                    for n, (kind, state) in enumerate(walk):
                        answer = clients[n % 2].request({"type": kind, "ride": ride})
                        if answer.get("state") != state:
                            refused.append((ride, kind, answer))
                assert refused == [], refused[:5]
        finally:
            b.stop()
    finally:
        a.stop()
    kinds = pg.psql("SELECT string_agg(kind, ',' ORDER BY seq) FROM ridepush.journal WHERE ride_id LIKE 'alt-%' "
                    "GROUP BY ride_id", db)
    assert len(kinds) == 50
    assert {r[0] for r in kinds} == {"start,pause,resume,pause,resume,end"}, kinds[:3]
