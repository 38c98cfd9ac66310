"""Rides that survive (issue 4), end to end: the real `ridepush serve` on real SQLite files,
killed with SIGKILL and started again, exactly-once retries, reading rides, startup errors,
a storage failure during a request. Every wait is bounded; the only waiting is for the tick
clock (whole seconds)."""
import contextlib
import errno
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import time

import pytest

from rp import BIN, ROOT, Client, Server

PUBLIC = os.path.join(ROOT, "public")
# Tests send bursts of control messages (50 starts, 50 ends); the per-connection control
# rate limit is not what is tested here.
FAST = ("--control-rate", "100000")


def now_ms():
    return time.time_ns() // 1_000_000


def serve(store, port=0):
    return Server(*FAST, store=str(store), port=port).start()


def fare_lines(elapsed, paused):
    """The default plan's receipt: 500 unlock + 180 per completed riding minute; a pause line
    (free) whenever there was a pause."""
    m = elapsed // 60
    lines = [{"label": "unlock", "amount": 500}, {"label": "riding", "minutes": m, "amount": 180 * m}]
    if paused > 0:
        lines.append({"label": "pause", "minutes": paused // 60, "amount": 0})
    return 500 + 180 * m, lines


class Track:
    """What the test itself recorded about one ride: the instants from the replies (`at` of the
    pause/resume/end reply is the recorded transition's instant). Expected elapsed and paused
    are computed from these and the wall clock, never taken from the server."""

    def __init__(self, rid, started_at):
        self.rid = rid
        self.started = started_at
        self.pauses = []  # [pause_at, resume_at or None]
        self.ended_at = None
        self.frozen = None  # elapsed (s) the pause reply reported
        self.receipt = None

    @property
    def state(self):
        if self.ended_at is not None:
            return "ended"
        return "paused" if self.pauses and self.pauses[-1][1] is None else "riding"

    def paused_ms(self, t):
        end = self.ended_at if self.ended_at is not None else t
        return sum((r if r is not None else end) - p for p, r in self.pauses)

    def riding_ms(self, t):
        end = self.ended_at if self.ended_at is not None else t
        return end - self.started - self.paused_ms(t)

    def shift(self, ms):
        """The ride's instants moved `ms` into the past (see `time_travel`)."""
        self.started -= ms
        self.pauses = [[p - ms, None if r is None else r - ms] for p, r in self.pauses]


def check_state(tr, m, t_send, t_recv, where):
    """One state/tick message of a live ride against the test's own record and the clock."""
    assert m["ride"] == tr.rid, where
    assert m["state"] == tr.state, (where, tr.rid, m)
    at = m["at"]
    assert t_send - 50 <= at <= t_recv + 50, (where, "server clock", at, t_send, t_recv)
    if "started_at" in m:
        assert m["started_at"] == tr.started, (where, tr.rid, m)
    # Exact, from the recorded instants at the message's own instant...
    assert m["elapsed"] == tr.riding_ms(at) // 1000, (where, tr.rid, m, tr.riding_ms(at))
    assert m["paused"] == tr.paused_ms(at) // 1000, (where, tr.rid, m, tr.paused_ms(at))
    # ...and within one second of what the wall clock says now.
    assert abs(tr.riding_ms(t_recv) / 1000 - m["elapsed"]) <= 1.0 + (t_recv - t_send) / 1000, (where, tr.rid, m)
    if tr.state == "paused":
        assert m["elapsed"] == tr.frozen, (where, "elapsed frozen at the pause", tr.rid, m, tr.frozen)
    assert m["fare"] == 500 + 180 * (m["elapsed"] // 60), (where, tr.rid, m)


def timed_request(client, msg, timeout=5.0):
    t0 = now_ms()
    r = client.request(msg, timeout=timeout)
    return r, t0, now_ms()


def time_travel(path, shifts):
    """Moves each ride's recorded instants `shifts[rid]` ms into the past while the server is
    dead: exactly as if the outage had lasted that much longer for that ride (riding rides gain
    riding time, paused rides gain paused time). Lets one test bill whole minutes without
    waiting minutes. Done through SQLite itself, like any other client of the file."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        for rid, ms in shifts.items():
            db.execute("UPDATE rides SET started_at = started_at - ? WHERE id = ?", (ms, rid))
            db.execute("UPDATE transitions SET at = at - ? WHERE ride = (SELECT n FROM rides WHERE id = ?)", (ms, rid))
        db.execute("COMMIT")
    finally:
        db.close()


# ----------------------------------------------------------------------------------------
# 1. kill -9, several times, 50 rides

def test_crash_recovery_50_rides_over_repeated_kill9(tmp_path):
    path = str(tmp_path / "rides.db")
    rng = random.Random(4)
    n, cycles = 50, 3
    tracks = {}
    seq = [0]

    def rid_q(prefix):
        seq[0] += 1
        return "%s-%d" % (prefix, seq[0])

    def control(c, cmd, tr):
        r, t0, t1 = timed_request(c, {"type": cmd, "id": rid_q(cmd), "ride": tr.rid})
        assert r["type"] == "state", r
        if cmd == "pause":
            tr.pauses.append([r["at"], None])
            tr.frozen = r["elapsed"]
        elif cmd == "resume":
            tr.pauses[-1][1] = r["at"]
            tr.frozen = None
        elif cmd == "end":
            tr.ended_at = r["ended_at"]
            assert r["ended_at"] == r["at"]
            tr.receipt = r["receipt"]
        check_state(tr, r, t0, t1, cmd)
        return r

    srv = serve(path)
    port = srv.port
    lost_total = 0
    try:
        with Client(srv.ws) as c:
            for i in range(n):
                rid = "crash-%02d" % i
                r, t0, t1 = timed_request(c, {"type": "start", "id": rid_q("start"), "ride": rid})
                assert r["type"] == "state" and r["state"] == "riding", r
                tracks[rid] = Track(rid, r["started_at"])
                check_state(tracks[rid], r, t0, t1, "start")
            for i, rid in enumerate(sorted(tracks)):
                if i % 3 == 0:
                    control(c, "pause", tracks[rid])
        counts = {"riding": sum(t.state == "riding" for t in tracks.values()),
                  "paused": sum(t.state == "paused" for t in tracks.values())}
        assert counts == {"riding": 33, "paused": 17}

        for cycle in range(1, cycles + 1):
            time.sleep(0.3)  # let some riding time pass before the crash
            srv.kill9()
            assert srv.proc.returncode == -9
            if cycle == 2:
                # A long outage for some rides: 0-4 minutes (+ up to 25 s) more.
                shifts = {rid: (i % 5) * 60_000 + i * 500 for i, rid in enumerate(sorted(tracks))}
                time_travel(path, shifts)
                for rid, ms in shifts.items():
                    tracks[rid].shift(ms)
            time.sleep(0.2)  # the outage
            srv = serve(path, port=port)  # a redeploy: same file, same port

            status, health, _ = srv.get("/healthz")
            assert status == 200
            assert health["rides"]["riding"] == sum(t.state == "riding" for t in tracks.values())
            assert health["rides"]["paused"] == sum(t.state == "paused" for t in tracks.values())

            # Subscribe to all 50 from 5 connections (at most 32 subscriptions each).
            ids = sorted(tracks)
            groups = [ids[k::5] for k in range(5)]
            clients = [Client(srv.ws) for _ in groups]
            lost = 0
            try:
                for cl, group in zip(clients, groups):
                    for rid in group:
                        st, t0, t1 = timed_request(cl, {"type": "subscribe", "ride": rid})
                        if st["type"] == "error":
                            assert st["code"] == "ride_not_found", st
                            lost += 1
                            continue
                        assert st["type"] == "state", st
                        check_state(tracks[rid], st, t0, t1, "cycle %d subscribe" % cycle)
                # Every ride keeps ticking after the restart with the right numbers.
                for cl, group in zip(clients, groups):
                    want = set(group)
                    deadline = time.monotonic() + 3.5
                    while want:
                        assert time.monotonic() < deadline, ("no tick after restart for", sorted(want))
                        t0 = now_ms()
                        m = cl.wait_for(lambda m: m["type"] == "tick", timeout=3)
                        t1 = now_ms()
                        if m["ride"] in want:
                            # A tick may have sat in the socket buffer: allow from its own instant.
                            check_state(tracks[m["ride"]], m, min(t0, m["at"]), t1, "cycle %d tick" % cycle)
                            want.discard(m["ride"])
                lost_total += lost
                print("kill -9 cycle %d: %d rides recovered, %d lost (%d riding, %d paused)" % (
                    cycle, n - lost, lost, sum(t.state == "riding" for t in tracks.values()),
                    sum(t.state == "paused" for t in tracks.values())))
                assert lost == 0

                # Some transitions before the next crash: resume about half of the paused
                # ones, pause about a quarter of the riding ones.
                dev = clients[0]
                changed = []
                for rid in ids:
                    tr = tracks[rid]
                    if tr.state == "paused" and rng.random() < 0.5:
                        changed.append((rid, control(dev, "resume", tr)))
                    elif tr.state == "riding" and rng.random() < 0.25:
                        changed.append((rid, control(dev, "pause", tr)))
                assert changed
                # The subscribers on the other connections got each transition pushed.
                for rid, reply in changed:
                    k = ids.index(rid) % 5
                    if k == 0:
                        continue  # the requester's own connection gets the reply, not a push
                    push = clients[k].wait_for(lambda m: m["type"] == "state" and m["ride"] == rid, timeout=3)
                    assert push["state"] == reply["state"] and push["at"] == reply["at"] and "id" not in push, (push, reply)
            finally:
                for cl in clients:
                    cl.close()

        # Finally end them all and check every receipt, before and after one more crash.
        with Client(srv.ws) as c:
            for rid in sorted(tracks):
                r = control(c, "end", tracks[rid])
                tr = tracks[rid]
                rc = r["receipt"]
                el, pa = tr.riding_ms(tr.ended_at) // 1000, tr.paused_ms(tr.ended_at) // 1000
                fare, lines = fare_lines(el, pa)
                assert (rc["elapsed"], rc["paused"], rc["fare"], rc["currency"], rc["reason"]) == \
                    (el, pa, fare, "KRW", "rider"), (rid, rc)
                assert (rc["started_at"], rc["ended_at"]) == (tr.started, tr.ended_at)
                assert rc["lines"] == lines, (rid, rc)
                assert r["fare"] == fare
        fares = sorted({t.receipt["fare"] for t in tracks.values()})
        assert len(fares) >= 4 and fares[-1] >= 500 + 180 * 4, fares  # whole minutes were billed
        srv.kill9()
        srv = serve(path, port=port)
        status, health, _ = srv.get("/healthz")
        assert (health["rides"]["riding"], health["rides"]["paused"]) == (0, 0)
        for rid, tr in tracks.items():
            status, doc, _ = srv.get("/rides/" + rid)
            assert status == 200 and doc["state"] == "ended", (rid, status, doc)
            assert doc["receipt"] == tr.receipt, rid
        print("rides lost over %d kill -9 cycles: %d (of %d)" % (cycles, lost_total, n))
        assert lost_total == 0
    finally:
        srv.stop()


def test_kill9_mid_burst_every_acknowledged_transition_survives(tmp_path):
    """Durable before the reply: 1000 starts, each followed by a pause, pipelined on one
    connection; kill -9 while they are being applied. After the restart every reply the client
    got is in the file, and retrying every request (same ids) applies each exactly once."""
    path = str(tmp_path / "rides.db")
    n = 1000
    srv = serve(path)
    port = srv.port
    try:
        c = Client(srv.ws)
        for i in range(n):
            c.send({"type": "start", "id": "bs-%d" % i, "ride": "burst-%04d" % i})
            c.send({"type": "pause", "id": "bp-%d" % i, "ride": "burst-%04d" % i})
        first = c.recv(timeout=5)
        acked = {first["id"]: first}
        # Killed after a tenth of the replies, not after a fixed time: a store fast enough to
        # answer all 2,000 within any fixed window would make the kill land after the burst.
        until = time.monotonic() + 5
        with contextlib.suppress(TimeoutError):
            while len(acked) < n // 5 and (left := until - time.monotonic()) > 0:
                m = c.recv(timeout=left)
                acked[m["id"]] = m
        srv.kill9()
        with contextlib.suppress(Exception):
            while True:  # replies already on their way were sent, so they count as told
                m = c.recv(timeout=0.5)
                acked[m["id"]] = m
        with contextlib.suppress(Exception):
            c.close()
        assert all(m["type"] == "state" for m in acked.values()), [m for m in acked.values() if m["type"] != "state"][:3]
        assert 0 < len(acked) < 2 * n, "the kill did not land mid-burst"

        srv = serve(path, port=port)
        stored = {}
        for i in range(n):
            status, doc, _ = srv.get("/rides/burst-%04d" % i)
            assert status in (200, 404), (status, doc)
            if status == 200:
                stored[i] = doc
        lost = 0
        for rid, m in acked.items():
            i = int(rid.split("-")[1])
            if i not in stored:
                lost += 1
                continue
            assert stored[i]["started_at"] == m["started_at"], (rid, "a different start", stored[i], m)
            if rid.startswith("bp-"):
                assert stored[i]["state"] == "paused" and stored[i]["elapsed"] == m["elapsed"], (rid, stored[i], m)
        print("mid-burst kill -9: %d of %d replies received, %d rides on file, %d acknowledged lost"
              % (len(acked), 2 * n, len(stored), lost))
        assert lost == 0

        # Retry everything with the same ids: told replies come back byte-for-byte equal in
        # content, unrecorded ones are applied now, and nothing is applied twice.
        replies = {}
        with Client(srv.ws) as c:
            # Pipelined in the original order, 200 in flight at a time (the server closes a
            # connection that leaves 1024 replies unread).
            for w in range(0, n, 100):
                for i in range(w, min(n, w + 100)):
                    c.send({"type": "start", "id": "bs-%d" % i, "ride": "burst-%04d" % i})
                    c.send({"type": "pause", "id": "bp-%d" % i, "ride": "burst-%04d" % i})
                while len(replies) < 2 * min(n, w + 100):
                    m = c.recv(timeout=10)
                    replies[m.get("id")] = m
        for i in range(n):
            for q in ("bs-%d" % i, "bp-%d" % i):
                r = replies[q]
                assert r["type"] == "state", (q, r)
                if q in acked:
                    assert r == acked[q], (q, r, acked[q])
                if i in stored:
                    assert r["started_at"] == stored[i]["started_at"], (q, "started twice", r, stored[i])
        _, health, _ = srv.get("/healthz")
        assert (health["rides"]["riding"], health["rides"]["paused"]) == (0, n)
    finally:
        srv.stop()


# ----------------------------------------------------------------------------------------
# 2. exactly-once control

def raw_request(client, msg, timeout=3.0):
    """Sends `msg` and returns the raw text of the reply carrying its id (other frames dropped)."""
    client.send(msg)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "no reply to %r" % (msg,)
        text = client.ws.recv(timeout=left)
        if json.loads(text).get("id") == msg["id"]:
            return text


def test_retried_start_and_end_apply_once_with_the_same_reply_even_after_a_crash(tmp_path):
    path = str(tmp_path / "rides.db")
    srv = serve(path)
    try:
        a, b = Client(srv.ws), Client(srv.ws)
        start = {"type": "start", "id": "start-once", "ride": "r-once"}
        first = raw_request(a, start)
        time.sleep(0.05)  # a retry comes later: a re-applied start would get a new started_at
        again = raw_request(b, start)
        assert again == first
        st = json.loads(first)
        assert (st["type"], st["ride"], st["state"]) == ("state", "r-once", "riding")
        # A start without a ride id: the server picks one, and the retry gets the same one.
        anon = {"type": "start", "id": "start-anon"}
        anon1 = raw_request(a, anon)
        anon2 = raw_request(b, anon)
        assert anon1 == anon2 and json.loads(anon1)["ride"].startswith("r-")
        # One ride: a new request to start it is a conflict, and /healthz counts two rides.
        dup = a.request({"type": "start", "id": "start-other", "ride": "r-once"})
        assert dup["type"] == "error" and dup["code"] == "conflict"
        _, health, _ = srv.get("/healthz")
        assert health["rides"]["riding"] == 2

        end = {"type": "end", "id": "end-once", "ride": "r-once"}
        e1 = raw_request(a, end)
        time.sleep(0.05)
        e2 = raw_request(b, end)
        assert e1 == e2
        ended = json.loads(e1)
        assert ended["state"] == "ended" and ended["receipt"]["fare"] == 500
        # Applied once: a different end request finds it already ended.
        other = b.request({"type": "end", "id": "end-other", "ride": "r-once"})
        assert other["type"] == "error" and other["code"] == "invalid_transition"
        a.close()
        b.close()

        # The replies are durable: after kill -9 the same retries get the same bytes.
        srv.kill9()
        srv = serve(path, port=srv.port)
        with Client(srv.ws) as c:
            assert raw_request(c, start) == first
            assert raw_request(c, end) == e1
            assert raw_request(c, anon) == anon1
        status, doc, _ = srv.get("/rides/r-once")
        assert status == 200 and doc["ended_at"] == ended["ended_at"] and doc["receipt"] == ended["receipt"]
        _, health, _ = srv.get("/healthz")
        assert health["rides"]["riding"] == 1  # the anonymous one; r-once stays ended
    finally:
        srv.stop()


# ----------------------------------------------------------------------------------------
# 3. reading rides

def test_get_ride_over_http_and_ws(tmp_path):
    path = str(tmp_path / "rides.db")
    srv = serve(path)
    try:
        with Client(srv.ws) as c:
            started = c.request({"type": "start", "ride": "r-read"})
            status, doc, h = srv.get("/rides/r-read")
            assert status == 200 and "application/json" in h["Content-Type"]
            assert (doc["ride"], doc["state"], doc["started_at"], doc["ended_at"]) == \
                ("r-read", "riding", started["started_at"], None)
            assert "receipt" not in doc and doc["fare"] == 500 and doc["currency"] == "KRW"

            status, doc, h = srv.get("/rides/no-such-ride")
            assert status == 404 and "application/json" in h["Content-Type"]
            assert doc["error"]["code"] == "ride_not_found" and doc["error"]["message"]

            # `get` answers with a state message and does not subscribe: no ticks follow.
            got = c.request({"type": "get", "id": "g1", "ride": "r-read"})
            assert got["type"] == "state" and got["id"] == "g1" and got["ride"] == "r-read" and got["state"] == "riding"
            with pytest.raises(TimeoutError):
                c.wait_for(lambda m: m["type"] == "tick", timeout=2.3)  # two tick instants pass
            missing = c.request({"type": "get", "id": "g2", "ride": "no-such-ride"})
            assert missing["type"] == "error" and missing["code"] == "ride_not_found"

            ended = c.request({"type": "end", "ride": "r-read"})
            status, doc, _ = srv.get("/rides/r-read")
            assert status == 200 and doc["state"] == "ended" and doc["receipt"] == ended["receipt"]
            assert doc["receipt"]["lines"][0] == {"label": "unlock", "amount": 500}
        # Ended rides keep their receipts across a crash (loaded from the file on demand).
        srv.kill9()
        srv = serve(path)
        status, doc, _ = srv.get("/rides/r-read")
        assert status == 200 and doc["receipt"] == ended["receipt"]
        with Client(srv.ws) as c:
            got = c.request({"type": "get", "ride": "r-read"})
            assert got["state"] == "ended" and got["receipt"] == ended["receipt"]
    finally:
        srv.stop()


# ----------------------------------------------------------------------------------------
# 4. startup errors and migrations

def run_serve(store, timeout=15):
    """Runs `ridepush serve --store STORE` expecting it to refuse to start."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--public", PUBLIC,
                            "--auth", "none", "--store", str(store)],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail("serve --store %s did not exit in %ss (it should refuse the store): %s" % (store, timeout, e.stdout))
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


@contextlib.contextmanager
def mounted_tmpfs(where, *options):
    """A small tmpfs of our own (needs CAP_SYS_ADMIN); skips the test where mount is not allowed."""
    os.makedirs(where, exist_ok=True)
    try:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
                           capture_output=True, text=True, timeout=10)
        why = p.stderr.strip() if p.returncode != 0 else None
    except (OSError, subprocess.TimeoutExpired) as e:
        why = str(e)
    if why is not None:
        pytest.skip("cannot mount a tmpfs here (%s): no honest way to make a full or read-only disk "
                    "(root ignores file permissions; other users cannot mount)" % why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


V1_SQL = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
CREATE TABLE rides (
    id TEXT PRIMARY KEY NOT NULL, plan_id TEXT NOT NULL, owner TEXT, time_limit INTEGER,
    started_at INTEGER NOT NULL, ended_at INTEGER
) WITHOUT ROWID;
CREATE INDEX rides_open ON rides (id) WHERE ended_at IS NULL;
CREATE TABLE transitions (
    ride_id TEXT NOT NULL REFERENCES rides (id), seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('start', 'pause', 'resume', 'end')),
    at INTEGER NOT NULL, reason TEXT, metres INTEGER,
    PRIMARY KEY (ride_id, seq)
) WITHOUT ROWID;
"""  # Schema.swift migration 1, as files made by RidePush version 1 have it


def make_v1(path, rides):
    """A version-1 store (no replies table), journal mode DELETE as an old tool might leave it."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(V1_SQL)
    db.execute("INSERT INTO schema_version VALUES (1, ?)", (int(time.time()) - 86400,))
    for rid, journal in rides.items():
        ended = next((at for kind, at, *_ in journal if kind == "end"), None)
        db.execute("INSERT INTO rides VALUES (?, 'default', NULL, NULL, ?, ?)", (rid, journal[0][1], ended))
        for seq, (kind, at, *rest) in enumerate(journal, 1):
            reason, metres = (rest + [None, None])[:2]
            db.execute("INSERT INTO transitions VALUES (?, ?, ?, ?, ?, ?)", (rid, seq, kind, at, reason, metres))
    db.close()


def test_startup_refuses_bad_stores_with_a_message_naming_the_path(tmp_path):
    cases = {}
    cases["missing directory"] = tmp_path / "no" / "such" / "dir" / "rides.db"
    cases["a directory"] = tmp_path
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(random.Random(1).randbytes(64 * 1024))
    cases["garbage"] = garbage
    text = tmp_path / "notes.db"
    text.write_text("this is not a database\n" * 200)
    cases["text file"] = text
    foreign = tmp_path / "foreign.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()
    cases["someone else's SQLite database"] = foreign

    # A file from a newer RidePush: made by this one, then stamped with a higher version.
    newer = tmp_path / "newer.db"
    srv = serve(newer)
    with Client(srv.ws) as c:
        c.request({"type": "start", "ride": "r-future"})
    srv.stop()
    db = sqlite3.connect(newer)
    db.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)")
    db.commit()
    db.close()
    cases["newer schema"] = newer
    digest = hashlib.sha256(newer.read_bytes()).hexdigest()

    # A RidePush store whose header is fine but whose pages are damaged (a bad disk, a torn copy).
    damaged = tmp_path / "damaged.db"
    srv = serve(damaged)
    with Client(srv.ws) as c:
        for i in range(300):
            c.send({"type": "start", "id": "d-%d" % i, "ride": "damaged-%03d-%s" % (i, "x" * 40)})
        for _ in range(300):
            assert c.recv(timeout=10)["type"] == "state"
    srv.stop()  # SIGTERM: checkpointed into the main file
    data = bytearray(damaged.read_bytes())
    assert len(data) >= 8 * 4096, len(data)
    rng = random.Random(3)
    for page in range(2, len(data) // 4096):
        data[page * 4096 + 100:page * 4096 + 300] = rng.randbytes(200)
    damaged.write_bytes(bytes(data))
    cases["damaged pages"] = damaged

    for what, store in cases.items():
        before = sorted(os.listdir(store.parent)) if store.parent.exists() else None
        rc, out, took = run_serve(store)
        assert rc != 0, (what, out)
        assert str(store) in out, (what, "the message names the path", out)
        assert "serving" not in out, (what, out)
        assert took < 10, (what, took)
        print("%-32s exit %d in %.2fs: %s" % (what, rc, took, out.strip().splitlines()[-1]))
        if what == "missing directory":
            assert not store.parent.exists()
    assert "newer" in run_serve(newer)[1]
    assert hashlib.sha256(newer.read_bytes()).hexdigest() == digest, "a newer file is refused untouched"
    for bad in (garbage, text):
        assert "not a database" in run_serve(bad)[1] or "corrupt" in run_serve(bad)[1].lower()


def test_startup_refuses_a_read_only_location(tmp_path):
    # Root ignores file permissions, so the honest unwritable place is a read-only mount.
    with mounted_tmpfs(tmp_path / "ro", "size=1m", "ro") as ro:
        rc, out, took = run_serve(ro / "rides.db")
        assert rc != 0 and str(ro / "rides.db") in out and took < 10, out
        print("read-only mount: exit %d: %s" % (rc, out.strip().splitlines()[-1]))


def test_a_version_1_file_is_upgraded_and_its_rides_load(tmp_path):
    path = str(tmp_path / "v1.db")
    t = now_ms()
    make_v1(path, {
        "v1-riding": [("start", t - 125_000)],
        "v1-paused": [("start", t - 300_000), ("pause", t - 200_000)],
        "v1-resumed": [("start", t - 400_000), ("pause", t - 350_000), ("resume", t - 250_000)],
        "v1-ended": [("start", t - 900_000), ("end", t - 700_000, "rider", 1200)],
    })
    srv = serve(path)
    try:
        tr = {"v1-riding": Track("v1-riding", t - 125_000), "v1-paused": Track("v1-paused", t - 300_000),
              "v1-resumed": Track("v1-resumed", t - 400_000)}
        tr["v1-paused"].pauses = [[t - 200_000, None]]
        tr["v1-paused"].frozen = 100
        tr["v1-resumed"].pauses = [[t - 350_000, t - 250_000]]
        with Client(srv.ws) as c:
            for rid, track in tr.items():
                st, t0, t1 = timed_request(c, {"type": "subscribe", "ride": rid})
                check_state(track, st, t0, t1, "v1 " + rid)
            status, doc, _ = srv.get("/rides/v1-ended")
            assert status == 200 and doc["state"] == "ended"
            assert (doc["receipt"]["elapsed"], doc["receipt"]["fare"], doc["receipt"]["distance"]) == (200, 500 + 180 * 3, 1200)
            # The upgraded file does exactly-once control (version 2's replies table).
            s1 = raw_request(c, {"type": "start", "id": "v1-new", "ride": "v1-new"})
            assert raw_request(c, {"type": "start", "id": "v1-new", "ride": "v1-new"}) == s1
    finally:
        srv.stop()
    db = sqlite3.connect(path)
    versions = [v for (v,) in db.execute("SELECT version FROM schema_version ORDER BY version")]
    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    db.close()
    assert versions == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] and "replies" in tables and "webhook_outbox" in tables and "push_targets" in tables and "webhook_events" in tables and mode == "wal"


# ----------------------------------------------------------------------------------------
# 5. storage failure during a request

def fill(directory):
    """Fills the filesystem holding `directory`; returns the filler's path."""
    filler = os.path.join(directory, "filler")
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 4096, 512, 1):
            while True:
                try:
                    f.write(b"\0" * size)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    return filler


def test_disk_full_answers_unavailable_keeps_the_connection_and_loses_nothing(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "size=2m") as small:
        path = str(small / "rides.db")
        srv = serve(path)
        try:
            c = Client(srv.ws)
            before = c.request({"type": "start", "id": "full-0", "ride": "r-before"})
            assert before["type"] == "state"
            filler = fill(str(small))

            # The disk is full: the start is refused for this one request, and not made.
            st = c.request({"type": "start", "id": "full-1", "ride": "r-during"})
            assert st["type"] == "error" and st["code"] == "unavailable" and st["id"] == "full-1", st
            assert path in st["message"], st
            pa = c.request({"type": "pause", "id": "full-2", "ride": "r-before"})
            assert pa["type"] == "error" and pa["code"] == "unavailable", pa
            # The connection stays open and the server stays up; reads still answer.
            got = c.request({"type": "get", "ride": "r-before"})
            assert got["type"] == "state" and got["state"] == "riding", got
            assert srv.get("/rides/r-during")[0] == 404
            assert srv.proc.poll() is None
            print("disk full: %s" % st["message"])

            # Space again: the same retries now apply (nothing was recorded for them before).
            os.unlink(filler)
            st = c.request({"type": "start", "id": "full-1", "ride": "r-during"})
            assert st["type"] == "state" and st["ride"] == "r-during", st
            pa = c.request({"type": "pause", "id": "full-2", "ride": "r-before"})
            assert pa["type"] == "state" and pa["state"] == "paused", pa
            c.close()
            # Nothing lost: both rides survive a crash in the states last told.
            srv.kill9()
            srv = serve(path)
            for rid, state in (("r-before", "paused"), ("r-during", "riding")):
                status, doc, _ = srv.get("/rides/" + rid)
                assert status == 200 and doc["state"] == state, (rid, doc)
            assert srv.get("/rides/r-before")[1]["elapsed"] == pa["elapsed"]
        finally:
            srv.stop()


# ----------------------------------------------------------------------------------------
# 6. a disk stuck in its log sync (issue 25, finding 4)

def syncstall_shim(tmp_path):
    """The LD_PRELOAD shim that blocks fsync/fdatasync of one file while a gate file exists."""
    so = tmp_path / "syncstall.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    os.path.join(ROOT, "tests", "shims", "syncstall.c"), "-ldl"], check=True, timeout=60)
    return so


def healthz(srv):
    status, body, _ = srv.get("/healthz")
    return status, body


def test_healthz_is_degraded_naming_the_store_while_its_log_sync_hangs_then_ok(tmp_path):
    so = syncstall_shim(tmp_path)
    gate = tmp_path / "frozen"
    env = {"LD_PRELOAD": str(so), "SYNCSTALL_SUFFIX": "/rides.db-wal", "SYNCSTALL_FILE": str(gate)}
    with Server(*FAST, store=str(tmp_path / "rides.db"), env=env) as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "id": "s1", "ride": "r-1"})["state"] == "riding"
        status, body = healthz(srv)
        assert (status, body["store"]) == (200, "ok"), body
        gate.touch()
        frozen_at = time.monotonic()
        c.send({"type": "start", "id": "s2", "ride": "r-2"})
        # The reply waits for the sync: the disk really is stuck under the real fdatasync.
        with pytest.raises(TimeoutError):
            c.wait_for(lambda m: m.get("id") == "s2", 2)
        status, body = healthz(srv)
        assert (status, body["store"]) == (200, "ok"), body  # in flight 2 s: under the 5 s bound
        deadline = frozen_at + 9
        while True:
            status, body = healthz(srv)
            if status == 503:
                break
            assert time.monotonic() < deadline, ("still %d after 9 s of a stuck sync" % status, body)
            time.sleep(0.2)
        assert time.monotonic() - frozen_at >= 5, "degraded before the 5 s bound"
        assert body["status"] == "degraded" and body["store"] == "stalled", body
        assert body["last_tick_age_ms"] <= 5000, body  # ticks go on: only the store is at fault
        ages = body["store_ages_ms"]
        assert ages["sync_in_flight"] > 5000 and ages["commit_in_flight"] is None, ages
        gate.unlink()
        assert c.wait_for(lambda m: m.get("id") == "s2", 5)["state"] == "riding"
        status, body = healthz(srv)
        assert (status, body["status"], body["store"]) == (200, "ok", "ok"), body
        assert body["store_ages_ms"]["sync_in_flight"] is None, body


def test_a_full_disk_freed_makes_healthz_ok_again_with_no_client_write(tmp_path):
    # The server probes a failing store itself (a read and room to write), so freeing the
    # disk is enough: no request has to succeed first.
    with mounted_tmpfs(tmp_path / "small", "size=2m") as small:
        with Server(*FAST, store=str(small / "rides.db")) as srv, Client(srv.ws) as c:
            assert c.request({"type": "start", "ride": "r-1"})["type"] == "state"
            filler = fill(str(small))
            e = c.request({"type": "start", "ride": "r-2"})
            assert (e["type"], e["code"]) == ("error", "unavailable"), e
            time.sleep(2)  # probes meanwhile: the disk is still full, so still failing
            status, body = healthz(srv)
            assert (status, body["status"], body["store"]) == (503, "degraded", "failing"), body
            os.unlink(filler)
            freed = time.monotonic()
            while True:
                status, body = healthz(srv)
                if status == 200:
                    break
                assert time.monotonic() - freed < 5, ("still degraded 5 s after the disk was freed", body)
                time.sleep(0.1)
            assert body["store"] == "ok", body
