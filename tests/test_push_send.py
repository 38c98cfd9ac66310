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


def test_a_rides_activity_gets_one_push_per_event_and_none_per_second(standins, tmp_path):
    apns = standins.apns
    with serve(standins, tmp_path / "rides.db") as srv, Client(srv.ws) as c:
        assert c.request({"type": "start", "ride": "r-1"})["type"] == "state"
        register(c, "r-1", TOKEN)
        apns.wait_accepted(1, timeout=10)
        for cmd in ("pause", "resume", "end"):
            time.sleep(1.2)  # a second apart: the device orders updates by whole-second timestamps
            assert c.request({"type": cmd, "ride": "r-1"})["type"] == "state"
            apns.wait_accepted({"pause": 2, "resume": 3, "end": 4}[cmd], timeout=10)
        time.sleep(2.5)  # nothing more comes: no push per second, none after the end
        log = apns.requests
        print("\nAPNs stand-in, ride r-1's activity:\n" + apns.transcript())
        assert [r.status for r in log] == [200] * 4
        assert [(r.event, r.content_state["state"]) for r in log] == [
            ("update", "riding"), ("update", "paused"), ("update", "riding"), ("end", "ended")]
        assert {r.priority for r in log} == {10}
        assert all(r.http == "2" for r in log) and len(apns.connection_ids()) == 1, "one HTTP/2 connection, reused"
        assert all(r.headers["apns-topic"] == standins.apns_key.topic for r in log)
        end = log[-1]
        state = end.content_state
        assert state["ride"] == "r-1" and isinstance(state["fare"], int) and state["currency"]
        assert "fare_next" not in state and "limit_at" not in state
        # --live-activity-dismiss-after's default: 15 minutes after the end.
        assert end.aps["dismissal-date"] - end.aps["timestamp"] in range(899, 902)
        # The activity ended: its target is deleted once the end was answered, the intents too.
        m = wait_until(lambda: (lambda m: m if m.get("ridepush_push_targets") == 0
                                and m.get("ridepush_push_pending") == 0 else None)(metric(srv, "ridepush_push")),
                       5, "targets and intents gone")
        assert m['ridepush_push_sent_total{platform="apns",result="delivered"}'] == 4
