"""The operator feed and listing (issue 14) against the real server over real sockets:
watch_all for ops tokens only, the snapshot, one multiplexed `fleet` frame per second per
operator whatever the ride count, transitions in commit order, unwatch_all, and
GET /rides paging that visits every ride once while rides start and end. Every wait is
bounded."""
import json
import os
import tempfile
import time

import pytest

from rp import Client, Server
from test_security import ENV, control, expect_unauthorized, watch

FAST = ("--control-rate", "100000", "--threads", "2", "--max-open-rides-per-rider", "100000")


def start_many(cl, n, prefix, **extra):
    """Starts n rides pipelined (all sent, then every reply read); returns their states."""
    ids = ["%s-%03d" % (prefix, i) for i in range(n)]
    for rid in ids:
        cl.send(dict({"type": "start", "id": "s-" + rid, "ride": rid}, **extra))
    out = {}
    for rid in ids:
        st = cl.wait_for(lambda m, rid=rid: m.get("id") == "s-" + rid, timeout=15)
        assert st["type"] == "state" and st["ride"] == rid, st
        out[rid] = st
    return out


def control_all(cl, cmd, rides):
    for rid in rides:
        cl.send({"type": cmd, "id": "%s-%s" % (cmd, rid), "ride": rid})
    for rid in rides:
        st = cl.wait_for(lambda m, rid=rid: m.get("id") == "%s-%s" % (cmd, rid), timeout=15)
        assert st["type"] == "state", st


def frames(cl, kind, n, timeout=4.0):
    out = []
    while len(out) < n:
        out.append(cl.wait_for(lambda m: m["type"] == kind, timeout))
    return out


def watch_all(cl, id="w1"):
    """watch_all; returns the snapshot frames' rides (accumulated until more is false) and the last frame."""
    cl.send({"type": "watch_all", "id": id})
    rides = []
    while True:
        snap = cl.wait_for(lambda m: m.get("id") == id, timeout=10)
        assert snap["type"] == "snapshot", snap
        rides += snap["rides"]
        if not snap["more"]:
            return rides, snap


def get_json(srv, path, token=None):
    return srv.get(path, headers={"Authorization": "Bearer " + token} if token else None)


# ---- who may watch ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured():
    with Server(*FAST, auth="jwt", env=ENV) as s:
        yield s


def test_watch_all_is_for_ops_tokens_only(secured):
    for token in (control("alice"), watch("alice")):
        with Client(secured.ws + "?token=" + token) as cl:
            err = cl.request({"type": "watch_all", "id": "w-no"})
            assert (err["type"], err["code"]) == ("error", "forbidden") and "ops" in err["message"]
            # Still open, and no feed follows.
            assert cl.request({"type": "quote", "seconds": 60})["fare"] == 680
            with pytest.raises(TimeoutError):
                cl.wait_for(lambda m: m["type"] in ("fleet", "snapshot"), timeout=1.5)
    with Client(secured.ws) as cl:
        cl.send({"type": "watch_all", "id": "w-anon"})
        expect_unauthorized(cl)
    # An ops token of either scope may watch.
    for token in (watch("op", ops=True), control("op2", ops=True)):
        with Client(secured.ws + "?token=" + token) as cl:
            _, snap = watch_all(cl)
            assert snap["type"] == "snapshot"
            frames(cl, "fleet", 1)
    # The listing: 401 without a token, 403 without ops, 200 with.
    assert get_json(secured, "/rides")[0] == 401
    status, body, _ = get_json(secured, "/rides", control("alice"))
    assert status == 403 and body["error"]["code"] == "forbidden"
    assert get_json(secured, "/rides", watch("op", ops=True))[0] == 200


def test_snapshot_holds_every_open_ride_with_its_fields(secured):
    ops = watch("op", ops=True)
    with Client(secured.ws + "?token=" + control("snap-a")) as a, \
            Client(secured.ws + "?token=" + control("snap-b")) as b, \
            Client(secured.ws + "?token=" + ops) as viewer:
        mine = start_many(a, 20, "snap-a")
        mine.update(start_many(b, 10, "snap-b", limit=1800))
        control_all(a, "pause", ["snap-a-%03d" % i for i in range(5)])
        control_all(b, "end", ["snap-b-%03d" % i for i in range(3)])
        assert viewer.request({"type": "subscribe", "ride": "snap-a-007"})["type"] == "state"
        assert viewer.request({"type": "subscribe", "ride": "snap-b-009"})["type"] == "state"
        with Client(secured.ws + "?token=" + ops) as op:
            rides, snap = watch_all(op)
            health = secured.get("/healthz")[1]
            open_ids = {r["ride"] for r in rides}
            expected = {rid for rid in mine if rid not in {"snap-b-000", "snap-b-001", "snap-b-002"}}
            assert expected <= open_ids  # other tests' rides of this module may be open too
            assert snap["counts"] == health["rides"]
            assert len(rides) == health["rides"]["riding"] + health["rides"]["paused"]
            assert len(open_ids) == len(rides), "each ride once"
            by_id = {r["ride"]: r for r in rides}
            for rid in expected:
                r = by_id[rid]
                st = mine[rid]
                paused = rid in {"snap-a-%03d" % i for i in range(5)}
                assert r["state"] == ("paused" if paused else "riding")
                assert (r["owner"], r["plan"], r["started_at"], r["currency"]) == \
                    (st["owner"], "default", st["started_at"], "KRW")
                assert (r["paused_since"] is not None) == paused
                assert r["fare"] == 500 and 0 <= r["elapsed"] <= 5
                if rid.startswith("snap-b"):
                    assert r["limit"] == 1800 and r["remaining"] == 1800 - r["elapsed"]
                else:
                    assert "limit" not in r and "remaining" not in r
                assert r["watchers"] == (1 if rid in ("snap-a-007", "snap-b-009") else 0)
            assert [(r["started_at"], r["ride"]) for r in rides] == sorted((r["started_at"], r["ride"]) for r in rides)


# ---- the once-a-second frame -----------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 500])
def test_one_fleet_frame_per_second_per_watcher_whatever_the_ride_count(n):
    with Server(*FAST) as srv, Client(srv.ws) as driver:
        start_many(driver, n, "f%d" % n)
        watchers = [Client(srv.ws) for _ in range(3)]
        try:
            for w in watchers:
                rides, _ = watch_all(w)
                assert len(rides) == n
            # Frames sent while the later snapshots were being made and read (seconds on a
            # loaded machine) are not part of the per-second count: drain them first, bounded.
            for w in watchers:
                for _ in range(50):
                    try:
                        assert json.loads(w.ws.recv(timeout=0.05))["type"] == "fleet"
                    except TimeoutError:
                        break
            # Raw text: the same tick must be the very same bytes for every watcher.
            raw = {i: [] for i in range(len(watchers))}
            t_end = time.monotonic() + 5.5
            while time.monotonic() < t_end:
                for i, w in enumerate(watchers):
                    try:
                        text = w.ws.recv(timeout=0.05)
                    except TimeoutError:
                        continue
                    m = json.loads(text)
                    assert m["type"] == "fleet", "nothing but fleet frames here: %s" % m["type"]
                    raw[i].append((m["seq"], text))
            for i, got in raw.items():
                seqs = [s for s, _ in got]
                assert 4 <= len(seqs) <= 7, (i, seqs)
                assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), ("one frame per tick, none skipped", seqs)
                for _, text in got:
                    m = json.loads(text)
                    assert len(m["rows"]) == n and {r[0] for r in m["rows"]} == {"f%d-%03d" % (n, k) for k in range(n)}
                    assert m["counts"] == {"riding": n, "paused": 0, "ended": 0}
                    assert all(len(r) == 7 and r[1] == "riding" and r[5] is None for r in m["rows"])
                    assert m["at"] % 1000 == 0
            common = set(raw[0]) & set(raw[1]) & set(raw[2])
            assert len(common) >= 3, "the watchers got byte-identical frames for the same ticks"
            # Subscribers of one ride still get their own ticks; the feed is not one per ride.
            with Client(srv.ws) as sub:
                sub.request({"type": "subscribe", "ride": "f%d-000" % n})
                assert sub.wait_for(lambda m: m["type"] == "tick")["ride"] == "f%d-000" % n
        finally:
            for w in watchers:
                w.close()


# ---- transitions -----------------------------------------------------------------------------

def test_transitions_reach_every_watcher_in_order_and_no_row_follows_an_end():
    with Server(*FAST) as srv:
        watchers = [Client(srv.ws) for _ in range(3)]
        try:
            for w in watchers:
                watch_all(w)
            with Client(srv.ws) as a, Client(srv.ws) as b:
                a.request({"type": "start", "ride": "t-x"})
                b.request({"type": "pause", "ride": "t-x"})
                a.request({"type": "resume", "ride": "t-x"})
                b.request({"type": "end", "ride": "t-x", "distance": 900})
                # A 2-second limit: the 1-minute warning at once, then the ride ends by itself.
                a.request({"type": "start", "ride": "t-y", "limit": 2})
                for w in watchers:
                    events, last_at = {}, {}
                    deadline = time.monotonic() + 8
                    ended = set()
                    while len(ended) < 2 and time.monotonic() < deadline:
                        m = w.recv(timeout=4)
                        if m["type"] == "fleet":
                            for row in m["rows"]:
                                assert row[0] not in ended, "a row after the ride's end: %s" % row
                        elif m["type"] == "fleet_event":
                            rid = m["ride"]["ride"]
                            events.setdefault(rid, []).append(m["event"])
                            assert m["at"] >= last_at.get(rid, 0)
                            last_at[rid] = m["at"]
                            if m["event"] == "end":
                                ended.add(rid)
                                if rid == "t-x":
                                    assert m["ride"]["receipt"]["reason"] == "rider"
                                    assert m["ride"]["receipt"]["distance"] == 900
                                else:
                                    assert m["ride"]["receipt"]["reason"] == "time_limit"
                                    assert m["ride"]["elapsed"] == 2 and m["at"] == m["ride"]["ended_at"]
                                assert m["ride"]["state"] == "ended" and m["ride"]["watchers"] == 0
                        elif m["type"] == "fleet_warning":
                            assert m["ride"] == "t-y" and 0 < m["remaining"] <= 2
                            events.setdefault("t-y", []).append("warning")
                    assert events.get("t-x") == ["start", "pause", "resume", "end"], events
                    assert events.get("t-y") == ["start", "warning", "end"], events
                    # Two more frames: the ended rides are gone from them.
                    for f in frames(w, "fleet", 2):
                        assert f["rows"] == [] and f["counts"] == {"riding": 0, "paused": 0, "ended": 2}
        finally:
            for w in watchers:
                w.close()


def test_unwatch_all_stops_the_feed_and_watch_all_again_resyncs():
    with Server(*FAST) as srv, Client(srv.ws) as driver, Client(srv.ws) as op:
        start_many(driver, 3, "u")
        watch_all(op)
        frames(op, "fleet", 1)
        assert op.request({"type": "unwatch_all", "id": "u1"}) == {"type": "unwatched_all", "id": "u1"}
        driver.request({"type": "end", "ride": "u-000"})
        with pytest.raises(TimeoutError):
            op.wait_for(lambda m: m["type"].startswith("fleet"), timeout=2.5)
        rides, snap = watch_all(op, "w2")
        assert sorted(r["ride"] for r in rides) == ["u-001", "u-002"]
        assert snap["counts"] == {"riding": 2, "paused": 0, "ended": 1}
        # Watching twice is still one feed.
        watch_all(op, "w3")
        got = []
        t_end = time.monotonic() + 3.5
        while time.monotonic() < t_end:
            try:
                m = op.recv(timeout=0.5)
            except TimeoutError:
                continue
            if m["type"] == "fleet":
                got.append(m["seq"])
        assert 2 <= len(got) <= 4 and len(got) == len(set(got)), got


# ---- journal -------------------------------------------------------------------------------------

def test_operators_get_the_journal_and_watchers(secured):
    ops = control("op", ops=True)
    with Client(secured.ws + "?token=" + control("jo")) as rider, Client(secured.ws + "?token=" + ops) as op:
        st = rider.request({"type": "start", "ride": "j-1"})
        p = rider.request({"type": "pause", "ride": "j-1"})
        r = rider.request({"type": "resume", "ride": "j-1"})
        rider.request({"type": "subscribe", "ride": "j-1"})
        got = op.request({"type": "get", "ride": "j-1"})
        assert got["type"] == "state" and got["watchers"] == 1
        assert [(e["event"], e["at"]) for e in got["journal"]] == \
            [("start", st["started_at"]), ("pause", p["paused_since"]), ("resume", r["at"])]
        assert "journal" not in rider.request({"type": "get", "ride": "j-1"})
        e = op.request({"type": "end", "ride": "j-1"})
        status, doc, _ = get_json(secured, "/rides/j-1", ops)
        assert status == 200 and doc["state"] == "ended" and doc["receipt"]["reason"] == "operator"
        assert [j["event"] for j in doc["journal"]] == ["start", "pause", "resume", "end"]
        assert doc["journal"][-1] == {"event": "end", "at": e["ended_at"], "reason": "operator"}
        status, doc, _ = get_json(secured, "/rides/j-1", control("jo"))
        assert status == 200 and "journal" not in doc


# ---- paging --------------------------------------------------------------------------------------

def pages(srv, token, query, limit, between=None):
    """Every page of a listing; `between(i)` runs after page i. Returns the rows in order."""
    rows, cursor, i = [], None, 0
    while True:
        q = "/rides?limit=%d%s%s" % (limit, query, "&cursor=" + cursor if cursor else "")
        status, body, _ = get_json(srv, q, token)
        assert status == 200, body
        assert len(body["rides"]) <= limit
        rows += body["rides"]
        cursor = body["next"]
        if cursor is None:
            return rows
        if between:
            between(i)
        i += 1
        assert i < 1000


def test_paging_visits_every_ride_exactly_once_while_rides_start_and_end():
    ops = watch("op", ops=True)
    with tempfile.TemporaryDirectory() as d, \
            Server(*FAST, auth="jwt", env=ENV, store=os.path.join(d, "rides.db")) as srv, \
            Client(srv.ws + "?token=" + control("pager", ops=True)) as cl:
        start_many(cl, 90, "p")
        control_all(cl, "pause", ["p-%03d" % i for i in range(0, 90, 3)])
        control_all(cl, "end", ["p-%03d" % i for i in range(1, 90, 9)])  # ends 10: p-001, p-010, …
        riding0 = {"p-%03d" % i for i in range(90) if i % 3 and (i - 1) % 9}
        paused0 = {"p-%03d" % i for i in range(0, 90, 3)} - {"p-%03d" % i for i in range(1, 90, 9)}
        ended0 = {"p-%03d" % i for i in range(1, 90, 9)}
        touched = set()
        fresh = iter(range(1000))

        def churn(i):
            # Between pages: a new ride starts, and one not yet touched of each kind ends.
            cl.request({"type": "start", "ride": "n-%03d" % next(fresh)})
            for pool in (riding0, paused0):
                victim = sorted(pool - touched)[-1 - i % 5]
                touched.add(victim)
                cl.request({"type": "end", "ride": victim})

        for state, initial in (("riding", riding0), ("paused", paused0)):
            rows = pages(srv, ops, "&state=" + state, 7, churn)
            ids = [r["ride"] for r in rows]
            assert len(ids) == len(set(ids)), "no ride twice"
            assert initial - touched <= set(ids), "every ride that stayed %s is there" % state
            assert all(r["state"] == state for r in rows)
            assert [(r["started_at"], r["ride"]) for r in rows] == sorted((r["started_at"], r["ride"]) for r in rows)
        status, health, _ = srv.get("/healthz")
        ended_now = health["rides"]["ended"]

        rows = pages(srv, ops, "&state=ended", 4, churn)
        ids = [r["ride"] for r in rows]
        assert len(ids) == len(set(ids)) and ended0 <= set(ids)
        assert len(ids) >= ended_now
        assert all(r["state"] == "ended" and r["reason"] == "rider" and r["ended_at"] for r in rows)
        keys = [(r["ended_at"], r["ride"]) for r in rows]
        assert keys == sorted(keys, reverse=True), "newest first"

        # Every ride, whatever its state: each one that existed before paging, exactly once,
        # even those that end while the pages are read.
        before = {r["ride"] for r in pages(srv, ops, "", 500)}
        rows = pages(srv, ops, "", 9, churn)
        ids = [r["ride"] for r in rows]
        assert len(ids) == len(set(ids)) and before <= set(ids)
        assert [(r["started_at"], r["ride"]) for r in rows] == sorted((r["started_at"], r["ride"]) for r in rows)


def test_listing_refuses_bad_limits_states_and_cursors(secured):
    ops = watch("op", ops=True)
    for q, word in (("limit=501", "500"), ("limit=0", "500"), ("limit=ten", "500"), ("state=lost", "riding"),
                    ("cursor=nonsense", "cursor"), ("cursor=12.bad%20id", "cursor")):
        status, body, _ = get_json(secured, "/rides?" + q, ops)
        assert status == 400 and body["error"]["code"] == "bad_request" and word in body["error"]["message"], (q, body)
    status, body, _ = get_json(secured, "/rides?limit=500", ops)
    assert status == 200 and len(body["rides"]) <= 500


def test_an_operator_who_stops_reading_is_dropped_and_the_others_keep_their_frames():
    from test_overload import health, raw_ws, scrape, value, ws_frame
    with Server("--slow-consumer-lag", "3", *FAST) as srv, Client(srv.ws) as driver:
        start_many(driver, 300, "slow")
        with Client(srv.ws) as op:
            watch_all(op)
            slow = raw_ws(srv.port, rcvbuf=2048)
            try:
                slow.sendall(ws_frame(json.dumps({"type": "watch_all", "id": "never-read"})))
                seqs, started, gone_at = [], time.monotonic(), None
                while time.monotonic() - started < 25:
                    try:
                        m = op.recv(timeout=0.3)
                    except TimeoutError:
                        m = None
                    if m and m["type"] == "fleet":
                        assert len(m["rows"]) == 300
                        seqs.append(m["seq"])
                    if gone_at is None and health(srv)["connections"] == 2:
                        gone_at = time.monotonic() - started
                    if gone_at is not None and time.monotonic() - started > gone_at + 2.5:
                        break
                assert gone_at is not None, "the operator who never reads is still connected after 25 s"
                assert value(scrape(srv), "ridepush_slow_consumer_disconnects_total") >= 1
                assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "the reading operator missed no frame"
                assert len(seqs) >= gone_at  # about one a second all along
            finally:
                slow.close()
