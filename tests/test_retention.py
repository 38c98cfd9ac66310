"""`--retain-ended DAYS` (issue 39, item 4) against the real binary: an SQLite store seeded
with rides ended 10, 100 and 400 days ago and open ones (one started 400 days ago) is served
with `--retain-ended 90`. The 100- and 400-day rides go, in batches, with their journal,
replies, traces and given-up webhook deliveries; the others stay; a watched open ride ticks
every second meanwhile; the file is smaller afterwards. Every loop and wait is bounded."""
import os
import re
import sqlite3
import time

from rp import Client, Server

DAY = 86_400_000
# More old rides than one batch (500) holds: the purge runs several batches, a tick apart.
OLD_PER_AGE = 1_200
RECENT = 20
PURGED = re.compile(r'^ridepush_retention_purged_total\{kind="([a-z_]+)"\} (\d+)$', re.M)
LATENESS = re.compile(r'^ridepush_tick_lateness_seconds_bucket\{le="([^"]+)"\} (\d+)$', re.M)


def metrics(srv):
    status, text, _ = srv.get("/metrics")
    assert status == 200
    return text


def seed(store, plan):
    """Rides as the server writes them, straight into its tables: OLD_PER_AGE ended 400 and
    100 days ago and RECENT ended 10 days ago (each with a reply, a trace checkpoint and a given-up
    delivery, and every hundredth one delivery still owed), and two open rides, one started 400
    days ago. Returns how many deliveries are owed."""
    now = int(time.time() * 1000)
    db = sqlite3.connect(store)
    try:
        with db:
            n = db.execute("SELECT COALESCE(MAX(n), 0) FROM rides").fetchone()[0]
            rides = []
            for age, count in ((400, OLD_PER_AGE), (100, OLD_PER_AGE), (10, RECENT)):
                for i in range(count):
                    n += 1
                    ended = now - age * DAY + i
                    rides.append((n, "ret-%d-%d" % (age, i), ended - 600_000, ended))
            db.executemany("INSERT INTO rides (n, id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)"
                           " VALUES (?, ?, ?, NULL, NULL, ?, ?, 2, 'ended')", ((r[0], r[1], plan, r[2], r[3]) for r in rides))
            db.executemany("INSERT INTO transitions (ride, seq, kind, at, reason, metres) VALUES (?, 1, 'start', ?, NULL, NULL)",
                           ((r[0], r[2]) for r in rides))
            db.executemany("INSERT INTO transitions (ride, seq, kind, at, reason, metres) VALUES (?, 2, 'end', ?, 'rider', 900)",
                           ((r[0], r[3]) for r in rides))
            db.executemany("INSERT INTO traces (ride, metres, lat, lon, at, accuracy, received_at) VALUES (?, 900, '52.52', '13.405', ?, '5', ?)",
                           ((r[0], r[3], r[3]) for r in rides))
            db.executemany("INSERT INTO replies (scope, id, bytes, at, request) VALUES ('', ?, ?, ?, ?)",
                           (("end-" + r[1], b"x" * 200, r[3], "end " + r[1]) for r in rides))
            body = b'{"type":"ride.ended","location":{"lat":52.52,"lon":13.405}}'
            db.executemany("INSERT INTO webhook_dead (seq, event_id, type, ride, endpoint, created, body, attempts, last_result, died_at)"
                           " VALUES (?, ?, 'ride.ended', ?, 'http://127.0.0.1:9/hook', ?, ?, 9, 'timeout', ?)",
                           ((r[0], "evt-" + r[1], r[1], r[3], body, r[3]) for r in rides))
            db.executemany("INSERT INTO webhook_outbox (event_id, type, ride, endpoint, created, body, attempts, next_attempt_at)"
                           " VALUES (?, 'ride.ended', ?, 'http://127.0.0.1:9/hook', ?, ?, 0, ?)",
                           (("owed-" + r[1], r[1], r[3], body, r[3]) for r in rides[::100]))
            for rid, started in (("ret-open-400", now - 400 * DAY), ("ret-open-new", now - 60_000)):
                n += 1
                db.execute("INSERT INTO rides (n, id, plan_id, owner, time_limit, started_at, ended_at, last_seq, state)"
                           " VALUES (?, ?, ?, NULL, NULL, ?, NULL, 1, 'riding')", (n, rid, plan, started))
                db.execute("INSERT INTO transitions (ride, seq, kind, at) VALUES (?, 1, 'start', ?)", (n, started))
            # A reply of the last minute: neither the prune nor the purge takes it.
            db.execute("INSERT INTO replies (scope, id, bytes, at, request) VALUES ('', 'start-new', x'7b7d', ?, 'start ret-open-new')",
                       (now - 60_000,))
        owed = db.execute("SELECT COUNT(*) FROM webhook_outbox").fetchone()[0]
    finally:
        db.close()
    return owed


def test_retain_ended_purges_only_rides_ended_before_the_window_while_ticks_go_on(tmp_path):
    store = str(tmp_path / "rides.db")
    with Server(store=store) as first:
        status, plans, _ = first.get("/plans")
        assert status == 200
    plan = plans["data"]["plans"][0]["plan_id"]
    owed = seed(store, plan)
    assert not os.path.exists(store + "-wal")
    before = os.path.getsize(store)

    with Server("--retain-ended", "90", store=store, create_store=False) as srv, Client(srv.ws) as watcher:
        assert watcher.request({"type": "subscribe", "ride": "ret-open-400"})["state"] == "riding"
        arrivals = []
        # Replies: the hourly prune, submitted just before the first batch, already forgets every
        # reply older than a day, so the purge finds none left (the store tests count them).
        expected = {"rides": 2 * OLD_PER_AGE, "journal_entries": 4 * OLD_PER_AGE, "replies": 0,
                    "traces": 2 * OLD_PER_AGE, "outbox_rows": 2 * OLD_PER_AGE}
        purged = {}
        # The first tick schedules the first batch; full batches ask for one more a tick.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = watcher.recv(timeout=3)
            if m["type"] == "tick" and m["ride"] == "ret-open-400":
                arrivals.append(time.monotonic())
            purged = {k: int(v) for k, v in PURGED.findall(metrics(srv))}
            if purged == expected and len(arrivals) >= 3:
                break
        assert purged == expected, purged
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        print("\n%d ticks of the watched ride while %d rides were purged; longest gap %.2f s"
              % (len(arrivals), purged["rides"], max(gaps)))
        assert len(arrivals) >= 3 and max(gaps) < 2.0, gaps
        text = metrics(srv)
        lateness = {le: int(c) for le, c in LATENESS.findall(text)}
        print("tick lateness (cumulative ticks per bucket):", lateness)
        assert lateness["0.5"] == lateness["+Inf"], "a tick over half a second late: %r" % lateness

        for age in (400, 100):
            for i in (0, OLD_PER_AGE - 1):
                assert srv.get("/rides/ret-%d-%d" % (age, i))[0] == 404, (age, i)
        for i in (0, RECENT - 1):
            status, doc, _ = srv.get("/rides/ret-10-%d" % i)
            assert (status, doc["state"]) == (200, "ended"), doc
        for rid in ("ret-open-400", "ret-open-new"):
            status, doc, _ = srv.get("/rides/" + rid)
            assert (status, doc["state"]) == (200, "riding"), doc
    after = os.path.getsize(store)
    db = sqlite3.connect("file:%s?mode=ro" % store, uri=True)
    try:
        left = {t: db.execute("SELECT COUNT(*) FROM %s" % t).fetchone()[0]
                for t in ("rides", "transitions", "traces", "replies", "webhook_dead", "webhook_outbox")}
        auto_vacuum = db.execute("PRAGMA auto_vacuum").fetchone()[0]
    finally:
        db.close()
    print("store file %d bytes before, %d after; rows left %r" % (before, after, left))
    assert left == {"rides": RECENT + 2, "transitions": 2 * RECENT + 2, "traces": RECENT, "replies": 1,
                    "webhook_dead": RECENT, "webhook_outbox": owed}, left
    assert auto_vacuum == 2
    assert after < before / 2, (before, after)
