"""`ridepush backup` (issue 39, item 3) against the real binary: a copy of a live server's
SQLite store taken while a client keeps making transitions, restored into a new folder and
served by a second server, holds every ride acknowledged before the backup began, with its
receipt and its recorded replies. Every loop and wait is bounded."""
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

from rp import BIN, Server
from test_security import ENV, control
from test_server_api import post
from test_webhooks import SECRET as WEBHOOK_SECRET

# Ended rides written straight into the file before the server serves it: a store big enough
# that the copy takes many steps (and ticks) while the walker commits.
SEEDED = 100_000
# Nothing listens there: every delivery fails and stays owed in the outbox the backup copies.
DEAD_WEBHOOK = "http://127.0.0.1:9/hook"

LATENESS = re.compile(r'^ridepush_tick_lateness_seconds_bucket\{le="([^"]+)"\} (\d+)$', re.M)


def lateness_buckets(srv):
    """{le: cumulative count} of the tick lateness histogram on /metrics."""
    status, text, _ = srv.get("/metrics")
    assert status == 200
    return {le: int(n) for le, n in LATENESS.findall(text)}


def ride_doc(srv, ride, rider):
    status, doc, _ = srv.get("/rides/%s?journal=1" % ride, headers={"Authorization": "Bearer " + control(rider)})
    return status, doc


class Walker(threading.Thread):
    """Walks rides through start, pause, resume, end over the server API, one request after
    another, recording each acknowledged answer with the moment it arrived. Stops after
    `limit` requests or when told."""

    STEPS = [("pause", None), ("resume", None), ("end", {"distance": 700})]

    def __init__(self, srv, limit=600):
        super().__init__(daemon=True)
        self.srv, self.limit = srv, limit
        self.acks = []  # (monotonic time acknowledged, ride, rider, verb, key, status, body)
        self.stop = threading.Event()
        self.failures = []

    def run(self):
        n = 0
        while n < self.limit and not self.stop.is_set():
            ride, rider = "bk-walk-%d" % n, "walker-%d" % n
            token = control(rider)
            requests = [("start", "/v1/rides", {"rider": rider, "ride": ride})] + \
                [(verb, "/v1/rides/%s/%s" % (ride, verb), body) for verb, body in self.STEPS]
            for verb, path, body in requests:
                key = "%s-%s" % (ride, verb)
                status, answer, _ = post(self.srv, path, body, key=key, token=token)
                n += 1
                if status not in (200, 201):
                    self.failures.append((ride, verb, status, answer))
                    return
                self.acks.append((time.monotonic(), ride, rider, verb, key, status, answer))
                if self.stop.is_set() or n >= self.limit:
                    return


def seed(store):
    """SEEDED ended rides (owner "seed") in the store's own tables, as the server writes them."""
    db = sqlite3.connect(store)
    try:
        plan = db.execute("SELECT plan_id FROM rides LIMIT 1").fetchone()[0]
        base = db.execute("SELECT COALESCE(MAX(n), 0) FROM rides").fetchone()[0]
        t = 1_700_000_000_000
        with db:
            db.executemany("INSERT INTO rides (n, id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)"
                           " VALUES (?, ?, ?, 'seed', NULL, ?, ?, 2, 'ended')",
                           ((base + i + 1, "bk-seed-%d" % i, plan, t + i, t + i + 60_000) for i in range(SEEDED)))
            db.executemany("INSERT INTO transitions (ride, seq, kind, at, reason, metres) VALUES (?, ?, ?, ?, ?, ?)",
                           ((base + i // 2 + 1, 1 + i % 2, ("start", "end")[i % 2], t + i // 2 + 60_000 * (i % 2),
                             (None, "rider")[i % 2], (None, 500)[i % 2]) for i in range(2 * SEEDED)))
    finally:
        db.close()


def test_a_backup_under_load_restores_every_acknowledged_ride_with_its_receipt(tmp_path):
    live, backups, restored = tmp_path / "live", tmp_path / "backups", tmp_path / "restored"
    for d in (live, backups, restored):
        d.mkdir()
    store = str(live / "rides.db")
    secret = tmp_path / "webhook.secret"
    secret.write_text(WEBHOOK_SECRET)
    webhooks = ("--webhook", DEAD_WEBHOOK, "--webhook-secret-file", str(secret))
    with Server(*webhooks, store=store, auth="jwt", env=ENV) as first:
        assert post(first, "/v1/rides", {"rider": "seed", "ride": "bk-first"}, token=control("seed"))[0] == 201
    seed(store)
    with Server(*webhooks, store=store, auth="jwt", env=ENV) as srv:
        # Rides settled before the load: ended ones carry a receipt, open ones tick.
        settled = {}
        for i in range(30):
            ride, rider = "bk-settled-%d" % i, "settled-%d" % i
            status, body, _ = post(srv, "/v1/rides", {"rider": rider, "ride": ride}, key=ride + "-start", token=control(rider))
            assert status == 201, body
            if i % 2 == 0:
                status, body, _ = post(srv, "/v1/rides/%s/end" % ride, {"distance": 100 + i}, key=ride + "-end", token=control(rider))
                assert status == 200, body
            settled[ride] = (rider, json.loads(body))

        walker = Walker(srv)
        walker.start()
        # Let the load run before the backup begins, so rides are mid-walk when it does.
        deadline = time.monotonic() + 10
        while len(walker.acks) < 40 and time.monotonic() < deadline and walker.is_alive():
            time.sleep(0.02)
        assert len(walker.acks) >= 40, walker.failures
        lateness_before = lateness_buckets(srv)
        began = time.monotonic()
        # Small steps: the copy is made of many steps while the walker's commits go on.
        out = subprocess.run([BIN, "backup", "--store", store, "--to", str(backups / "rides.db"), "--pages", "8"],
                             capture_output=True, text=True, timeout=60)
        finished = time.monotonic()
        lateness_after = lateness_buckets(srv)
        # A little load after the backup: what it acknowledges may be missing from the copy.
        deadline = time.monotonic() + 5
        n_at_end = len(walker.acks)
        while len(walker.acks) < n_at_end + 8 and time.monotonic() < deadline and walker.is_alive():
            time.sleep(0.02)
        walker.stop.set()
        walker.join(15)
        assert not walker.is_alive()
        assert not walker.failures, walker.failures
    print("\n" + out.stdout.strip())
    assert out.returncode == 0, out.stderr
    during = [a for a in walker.acks if began <= a[0] <= finished]
    print("backup took %.2f s with the CLI's start; %d transitions acknowledged during it, %d before, %d in all"
          % (finished - began, len(during), sum(1 for a in walker.acks if a[0] < began), len(walker.acks)))
    deltas = {le: lateness_after.get(le, 0) - lateness_before.get(le, 0) for le in lateness_after}
    print("tick lateness during the backup (ticks per bucket, cumulative):", deltas)
    assert not [f for f in os.listdir(backups) if f != "rides.db"], "no partial file or -wal left beside the copy"

    # Restore into a new folder: the one file is the whole store.
    shutil.copy(backups / "rides.db", restored / "rides.db")
    acked_before = [a for a in walker.acks if a[0] < began]
    with Server(store=str(restored / "rides.db"), auth="jwt", env=ENV, create_store=False) as again:
        status, doc = ride_doc(again, "bk-seed-%d" % (SEEDED - 1), "seed")
        assert (status, doc["state"]) == (200, "ended"), doc
        for ride, (rider, answer) in settled.items():
            status, doc = ride_doc(again, ride, rider)
            assert status == 200, (ride, doc)
            assert doc["state"] == answer["state"], (ride, doc)
            if answer["state"] == "ended":
                assert doc["receipt"] == answer["receipt"], (ride, doc)
        # Every walker transition acknowledged before the backup began is in the copy's
        # journal, and its recorded reply answers a retry with the same bytes.
        for _, ride, rider, verb, key, status, answer in acked_before:
            got, doc = ride_doc(again, ride, rider)
            assert got == 200, (ride, verb, doc)
            kinds = [e["event"] for e in doc["journal"]]
            assert verb in kinds, (ride, verb, doc["journal"])
            if verb == "end":
                assert doc["receipt"] == json.loads(answer)["receipt"], (ride, doc)
            path = "/v1/rides" if verb == "start" else "/v1/rides/%s/%s" % (ride, verb)
            body = {"rider": rider, "ride": ride} if verb == "start" else dict(Walker.STEPS)[verb]
            replay = post(again, path, body, key=key, token=control(rider))
            assert replay[:2] == (status, answer), (ride, verb, replay[:2])
    # The webhook deliveries owed for them came with the copy (nothing could deliver them).
    db = sqlite3.connect("file:%s?mode=ro" % (backups / "rides.db"), uri=True)
    try:
        owed = set(db.execute("SELECT ride, type FROM webhook_outbox UNION SELECT ride, type FROM webhook_dead"))
        seeded = db.execute("SELECT COUNT(*) FROM rides WHERE owner = 'seed'").fetchone()[0]
    finally:
        db.close()
    types = {"start": "ride.started", "pause": "ride.paused", "resume": "ride.resumed", "end": "ride.ended"}
    missing = [(ride, verb) for _, ride, _, verb, *_ in acked_before if (ride, types[verb]) not in owed]
    assert not missing, missing[:5]
    assert seeded == SEEDED + 1
    print("restored: %d settled rides and %d walker transitions acknowledged before the backup, all there"
          % (len(settled), len(acked_before)))


def test_refusals_exit_with_their_own_status_and_leave_the_destination_alone(tmp_path):
    store, to = tmp_path / "rides.db", tmp_path / "copy.db"

    def backup(*extra):
        return subprocess.run([BIN, "backup", *extra], capture_output=True, text=True, timeout=30,
                              env={k: v for k, v in os.environ.items() if not k.startswith("RIDEPUSH_")})
    r = backup("--store", str(store), "--to", str(to))
    assert (r.returncode, r.stdout) == (4, "") and "no store at" in r.stderr, r.stderr
    store.write_text("a shopping list, not a database\n")
    r = backup("--store", str(store), "--to", str(to))
    assert r.returncode == 4 and "not a RidePush store" in r.stderr, r.stderr
    store.unlink()
    with Server(store=str(store)) as srv:
        assert post(srv, "/v1/rides", {"rider": "alice", "ride": "bk-one"})[0] == 201
        to.write_text("yesterday's backup")
        r = backup("--store", str(store), "--to", str(to))
        assert r.returncode == 3 and "--force" in r.stderr, r.stderr
        assert to.read_text() == "yesterday's backup"
        r = backup("--store", str(store), "--to", str(store), "--force")
        assert r.returncode == 3 and "the store itself" in r.stderr, r.stderr
        r = backup("--store", str(store), "--to", str(to), "--force")
        assert r.returncode == 0 and "1 rides (1 open)" in r.stdout, r.stdout + r.stderr
    r = backup("--store", "postgresql://ridepush@db/ridepush", "--to", str(to))
    assert r.returncode == 2 and "pg_dump" in r.stderr, r.stderr
    r = backup("--store", str(store))
    assert r.returncode == 2 and "--to FILE" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []


def test_a_copy_that_cannot_be_written_fails_leaving_the_old_backup_and_no_partial_file(tmp_path):
    store, to = tmp_path / "rides.db", tmp_path / "copy.db"
    with Server(store=str(store)) as srv:
        for i in range(40):
            assert post(srv, "/v1/rides", {"rider": "r%d" % i, "ride": "bk-big-%d" % i})[0] == 201
    to.write_text("yesterday's backup")

    def small_files():
        # A file size limit below the store's size: the copy's writes fail as on a full disk
        # (EFBIG rather than ENOSPC), and SIGXFSZ ignored so the write returns the error.
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, 32 * 1024))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    assert store.stat().st_size > 32 * 1024
    r = subprocess.run([BIN, "backup", "--store", str(store), "--to", str(to), "--force"], capture_output=True,
                       text=True, timeout=30, preexec_fn=small_files)
    assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
    print("\n" + r.stderr.strip())
    assert to.read_text() == "yesterday's backup"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy.db")) == ["copy.db"]
