"""Sending pushes (issue 38, items 2-5): the real binary against the APNs, Google OAuth and FCM
stand-ins (tests/pushstandins.py) over TLS with a private CA. Each committed transition is one
push intent in the store's outbox, written with the transition; the sender pushes it to the
ride's targets and deletes it once every target answered. Every wait is bounded."""
import json
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import pushstandins as P  # noqa: E402
from pg import pg_db, postgres  # noqa: E402,F401 (fixtures)
from rp import Client, Server  # noqa: E402

TOKEN = "a1" * 32
OTHER = "b2" * 40


@pytest.fixture
def standins(tmp_path):
    with P.PushStandIns(tmp_path / "push") as s:
        yield s


def serve(standins, path, *extra, **kw):
    return Server(*(standins.server_args() + list(extra)), store=str(path), env=standins.env(kw.pop("env", None)), **kw)


def register(c, ride, token, platform="apns", kind="liveactivity", rid=None):
    msg = {"type": "register_push", "platform": platform, "kind": kind, "ride": ride, "token": token}
    if rid:
        msg["id"] = rid
    ack = c.request(msg)
    assert ack["type"] == "push_registered", ack
    return ack


def metric(srv, name):
    status, text, _ = srv.get("/metrics")
    assert status == 200
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
            if line.startswith(name)}


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("not within %ss: %s" % (timeout, what))


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_a_rides_activity_gets_one_push_per_event_and_none_per_second(standins, tmp_path, store):
    apns = standins.apns
    with serve(standins, tmp_path / "rides.db" if store == "sqlite" else "memory") as srv, Client(srv.ws) as c:
        # A limit just over 5 minutes: the 5-minute warning comes a second or two in.
        assert c.request({"type": "start", "ride": "r-1", "limit": 302})["type"] == "state"
        register(c, "r-1", TOKEN)
        apns.wait_accepted(2, timeout=10)
        for cmd in ("pause", "resume", "end"):
            time.sleep(1.2)  # a second apart: the device orders updates by whole-second timestamps
            assert c.request({"type": cmd, "ride": "r-1"})["type"] == "state"
            apns.wait_accepted({"pause": 3, "resume": 4, "end": 5}[cmd], timeout=10)
        time.sleep(2.5)  # nothing more comes: no push per second, none after the end
        log = apns.requests
        print("\nAPNs stand-in, ride r-1's activity:\n" + apns.transcript())
        assert [r.status for r in log] == [200] * 5
        assert [(r.event, r.content_state["state"]) for r in log] == [
            ("update", "riding"), ("update", "riding"), ("update", "paused"), ("update", "riding"), ("end", "ended")]
        warned = log[1]
        assert warned.aps["alert"]["title"] == "5분 남았습니다"  # the built-in plan is Korean and "alert" not in log[0].aps
        assert all("limit_at" in r.content_state for r in log[:4])
        assert {r.priority for r in log} == {10}
        assert all(r.http == "2" for r in log) and len(apns.connection_ids()) == 1, "one HTTP/2 connection, reused"
        assert all(r.headers["apns-topic"] == standins.apns_key.topic for r in log)
        end = log[-1]
        state = end.content_state
        assert state["ride"] == "r-1" and isinstance(state["fare"], int) and state["currency"]
        assert "fare_next" not in state and "limit_at" not in state and "alert" not in end.aps
        # --live-activity-dismiss-after's default: 15 minutes after the end.
        assert end.aps["dismissal-date"] - end.aps["timestamp"] in range(899, 902)
        # The activity ended: its target is deleted once the end was answered, the intents too.
        m = wait_until(lambda: (lambda m: m if m.get("ridepush_push_targets") == 0
                                and m.get("ridepush_push_pending") == 0 else None)(metric(srv, "ridepush_push")),
                       5, "targets and intents gone")
        assert m['ridepush_push_sent_total{platform="apns",result="delivered"}'] == 5
    if store == "sqlite":
        # Push intents share the outbox but are no webhook events: the event log has none.
        import sqlite3
        db = sqlite3.connect(str(tmp_path / "rides.db"))
        try:
            assert db.execute("SELECT count(*) FROM webhook_events").fetchone()[0] == 0
            assert db.execute("SELECT count(*) FROM webhook_outbox").fetchone()[0] == 0
        finally:
            db.close()


def test_410_drops_the_token_and_the_other_target_still_gets_every_push(standins, tmp_path):
    apns = standins.apns
    apns.unregister(OTHER)
    with serve(standins, tmp_path / "rides.db") as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-2"})["type"] == "state"
        register(c, "r-2", TOKEN)
        register(c, "r-2", OTHER)
        apns.wait_requests(2, timeout=10)
        wait_until(lambda: metric(srv, "ridepush_push_targets").get("ridepush_push_targets") == 1, 5, "the 410 target deleted")
        time.sleep(1.1)
        assert c.request({"type": "pause", "ride": "r-2"})["type"] == "state"
        apns.wait_accepted(2, timeout=10)
        time.sleep(1)
        sent = [(r.token, r.status) for r in apns.requests]
        assert sent.count((OTHER, 410)) == 1 and (OTHER, 200) not in sent, "no push to a dropped token"
        assert sent.count((TOKEN, 200)) == 2
        m = metric(srv, "ridepush_push_sent_total")
        assert m['ridepush_push_sent_total{platform="apns",result="dropped"}'] == 1


def test_403_expired_provider_token_signs_a_new_one_and_429_is_retried(standins, tmp_path):
    apns = standins.apns
    with serve(standins, tmp_path / "rides.db") as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-3"})["type"] == "state"
        register(c, "r-3", TOKEN)
        apns.wait_accepted(1, timeout=10)
        # Apple says the token is too old: the next push is refused with 403, then the sender
        # signs a new one (within the same second's iat if need be) and sends again.
        apns.expire_provider_tokens()
        time.sleep(1.1)
        assert c.request({"type": "pause", "ride": "r-3"})["type"] == "state"
        apns.wait_accepted(2, timeout=10)
        assert len(apns.provider_tokens) == 2, "a new provider token after ExpiredProviderToken"
        assert [(r.status, r.reason) for r in apns.requests][1:] == [(403, "ExpiredProviderToken"), (200, "")]
        # 429 twice: retried after 1 s, then 2 s, the same content.
        apns.answer_next(429, "TooManyRequests", times=2)
        time.sleep(1.1)
        t0 = time.monotonic()
        assert c.request({"type": "resume", "ride": "r-3"})["type"] == "state"
        apns.wait_accepted(3, timeout=15)
        took = time.monotonic() - t0
        tail = apns.requests[3:]
        assert [r.status for r in tail] == [429, 429, 200]
        assert len({json.dumps(r.content_state, sort_keys=True) for r in tail}) == 1
        assert 2.5 < took < 8, took
        m = metric(srv, "ridepush_push_sent_total")
        assert m['ridepush_push_sent_total{platform="apns",result="retried"}'] == 2
        assert m['ridepush_push_sent_total{platform="apns",result="renewed"}'] == 1


def test_push_to_start_for_a_ride_the_backend_starts(standins, tmp_path):
    from test_security import ENV, control
    from test_server_api import post
    apns = standins.apns
    env = dict(ENV)
    with serve(standins, tmp_path / "rides.db", auth="jwt", env=env) as srv:
        with Client(srv.ws + "?token=" + control("dana")) as c:
            ack = c.request({"type": "register_push", "platform": "apns", "kind": "push_to_start", "token": OTHER})
            assert ack["type"] == "push_registered", ack
        status, body, _ = post(srv, "/v1/rides", {"rider": "dana", "ride": "r-4", "limit": 1800}, token=control("ops", ops=True))
        assert status == 201, body
        rec = apns.wait_accepted(1, timeout=10)[0]
        print("\npush-to-start: " + apns.transcript())
        assert rec.token == OTHER and rec.event == "start" and rec.priority == 10
        assert rec.aps["attributes-type"] == "RideAttributes"
        assert rec.aps["attributes"]["ride"] == "r-4" and rec.aps["attributes"]["plan"]
        assert rec.content_state["ride"] == "r-4" and rec.content_state["state"] == "riding" and "limit_at" in rec.content_state
        assert rec.aps["alert"]["title"]
        # The token is the rider's: kept for the next ride.
        assert metric(srv, "ridepush_push_targets")["ridepush_push_targets"] == 1


def test_kill_9_while_apns_answers_503_loses_nothing(standins, tmp_path):
    apns = standins.apns
    path = tmp_path / "rides.db"
    srv = serve(standins, path).start()
    try:
        with Client(srv.ws) as c:
            assert c.request({"type": "start", "ride": "r-5"})["type"] == "state"
            register(c, "r-5", TOKEN)
            apns.wait_accepted(1, timeout=10)
            apns.answer_next(503, "ServiceUnavailable", times=1000)
            time.sleep(1.1)
            assert c.request({"type": "end", "ride": "r-5"})["type"] == "state"
            apns.wait_requests(3, timeout=10)  # the end, refused, and retried
            assert metric(srv, "ridepush_push_pending")["ridepush_push_pending"] == 1
        srv.kill9()
        with apns.script.lock:
            apns.script.any.clear()  # APNs is back
        srv = serve(standins, path, create_store=False).start()
        recs = apns.wait_accepted(2, timeout=15)
        end = recs[-1]
        assert end.event == "end" and end.content_state["state"] == "ended" and end.priority == 10
        assert all(r.status == 503 for r in apns.requests[1:-1])
        wait_until(lambda: metric(srv, "ridepush_push")["ridepush_push_pending"] == 0, 5, "the intent delivered after the restart")
    finally:
        srv.stop()


def test_fcm_data_values_are_all_strings(standins, tmp_path):
    fcm, oauth = standins.fcm, standins.oauth
    token = "fcm-token-" + "x" * 40
    with serve(standins, tmp_path / "rides.db") as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-6"})["type"] == "state"
        register(c, "r-6", token, platform="fcm", kind="notification")
        time.sleep(1.1)
        assert c.request({"type": "end", "ride": "r-6"})["type"] == "state"
        recs = fcm.wait_accepted(2, timeout=10)
        for r in recs:
            data = r.message["data"]
            assert data and all(isinstance(v, str) for v in data.values()), data
            assert r.message["token"] == token and r.message["android"]["collapse_key"] == "r-6"
        assert [r.message["data"]["state"] for r in recs] == ["riding", "ended"]
        assert recs[0].message["android"]["priority"] == "high"
        assert len([r for r in oauth.requests if r.status == 200]) == 1, "the access token is cached"


def test_two_nodes_on_postgresql_push_each_intent_once(standins, pg_db):
    pg, db = pg_db
    apns = standins.apns
    a = Server(*standins.server_args(), store=pg.uri(db), env=standins.env()).start()
    try:
        b = Server(*standins.server_args(), store=pg.uri(db), env=standins.env()).start()
        try:
            with Client(a.ws) as ca, Client(b.ws) as cb:
                rides = ["pg-%d" % i for i in range(3)]
                for n, r in enumerate(rides):
                    assert ca.request({"type": "start", "ride": r})["state"] == "riding"
                    register(ca, r, ("%02x" % (n + 1)) * 32)
                    deadline = time.monotonic() + 5
                    while b.get("/rides/" + r)[1].get("state") != "riding":
                        assert time.monotonic() < deadline, "node B never saw " + r
                        time.sleep(0.05)
                apns.wait_accepted(3, timeout=10)
                for cmd, node in (("pause", cb), ("resume", cb), ("end", ca)):
                    time.sleep(1.1)
                    for r in rides:
                        assert node.request({"type": cmd, "ride": r})["type"] == "state"
                apns.wait_accepted(12, timeout=20)
                time.sleep(2)  # a second copy of any push would have arrived by now
        finally:
            b.stop()
    finally:
        a.stop()
    log = apns.requests
    assert all(r.status == 200 for r in log), apns.transcript()
    assert len(log) == 12, apns.transcript()
    for n, r in enumerate(rides):
        mine = [x for x in log if x.content_state["ride"] == r]
        assert sorted(x.content_state["state"] for x in mine) == ["ended", "paused", "riding", "riding"], apns.transcript()


def test_the_fare_step_is_an_update_at_priority_5_with_its_stale_date(standins, tmp_path):
    """The built-in plan's fare first changes a minute in: one priority-5 update then, none before."""
    apns = standins.apns
    with serve(standins, tmp_path / "rides.db") as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-7"})["type"] == "state"
        register(c, "r-7", TOKEN)
        first = apns.wait_accepted(1, timeout=10)[0].content_state
        assert first["fare_next_at"] - first["at"] <= 60_000
        step = apns.wait_requests(2, timeout=75)[1]
        print("\nfare step:\n" + apns.transcript())
        assert step.status == 200 and step.event == "update" and step.priority == 5
        s = step.content_state
        assert s["fare"] == first["fare_next"] and s["at"] >= first["fare_next_at"] and s["state"] == "riding"
        assert step.aps["stale-date"] * 1000 >= s["fare_next_at"], "stale just after the next change"
        assert len(apns.requests) == 2


def test_entering_a_zone_is_an_update_with_the_zone(standins, tmp_path):
    from test_zones_server import LON, lat_at, zones_file
    apns = standins.apns
    with serve(standins, tmp_path / "rides.db", "--zones", zones_file(tmp_path), "--max-speed-kph", "1000") as srv, \
            Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-8", "lat": lat_at(0), "lon": LON})["type"] == "state"
        register(c, "r-8", TOKEN)
        apns.wait_accepted(1, timeout=10)
        time.sleep(1.1)
        for k in range(1, 21):  # north into the park (lat_at(10) on; no ending there), 11 m a fix
            c.send({"type": "position", "ride": "r-8", "lat": lat_at(k), "lon": LON, "at": int(time.time() * 1000), "accuracy": 5})
            time.sleep(0.25)
        rec = apns.wait_accepted(2, timeout=10)[1]
        print("\nzone: " + apns.transcript())
        assert rec.event == "update" and rec.priority == 10
        assert rec.content_state["zone"] == {"name": "Park", "end_allowed": False}
        assert rec.content_state["state"] == "riding"
        # A transition there carries the zone too.
        time.sleep(1.1)
        assert c.request({"type": "pause", "ride": "r-8"})["type"] == "state"
        paused = apns.wait_accepted(3, timeout=10)[2]
        assert paused.content_state["state"] == "paused" and paused.content_state["zone"]["name"] == "Park"
