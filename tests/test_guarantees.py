"""Issue 25's findings over real sockets, one test each: the operator feed ends when the
token no longer allows it, one bound for everything queued to a connection, token times on
the wall clock, the journal refused before the store is read, open rides capped per rider,
/echo behind the token, ride ids in HTTP paths checked, a refused subprotocol answered.
Every wait is bounded."""
import base64
import json
import os
import socket
import http.client
import subprocess
import time

import pytest
from websockets.exceptions import ConnectionClosed

from rp import ROOT, Client, Server
from test_security import ENV, SECRET, control, expect_unauthorized, jwt, now, watch

FAST = ("--control-rate", "100000", "--threads", "2")


def metric(srv, name):
    text = srv.get("/metrics")[1]
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no metric %s" % name)


def watch_all(cl, id="w1"):
    cl.send({"type": "watch_all", "id": id})
    while True:
        snap = cl.wait_for(lambda m: m.get("id") == id, timeout=10)
        assert snap["type"] == "snapshot", snap
        if not snap["more"]:
            return snap


# ---- 1. the operator feed outlives the ops token ----------------------------------------------

def test_reauthenticating_with_a_share_token_ends_the_operator_feed():
    with Server(*FAST, auth="jwt", env=ENV) as s:
        with Client(s.ws + "?token=" + control("alice")) as a:
            a.request({"type": "start", "ride": "r-feed"})
        with Client(s.ws + "?token=" + watch("op", ops=True)) as op:
            watch_all(op)
            op.wait_for(lambda m: m["type"] == "fleet", 3)
            share = watch("alice", rides=["r-feed"])
            assert op.request({"type": "auth", "token": share})["type"] == "authenticated"
            # The feed ends at once, said with `unwatched_all`; no fleet frame or event follows.
            op.wait_for(lambda m: m["type"] == "unwatched_all", 2)
            with Client(s.ws + "?token=" + control("alice")) as a:
                a.request({"type": "pause", "ride": "r-feed"})
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                try:
                    m = op.recv(timeout=deadline - time.monotonic())
                except TimeoutError:
                    break
                assert not m["type"].startswith("fleet"), m
            # What the share link allows still works; watch_all is refused now.
            assert op.request({"type": "subscribe", "ride": "r-feed"})["type"] == "state"
            err = op.request({"type": "watch_all", "id": "again"})
            assert (err["type"], err["code"]) == ("error", "forbidden")


def test_an_expiring_ops_token_ends_the_feed_with_4401():
    with Server(*FAST, auth="jwt", env=ENV) as s:
        with Client(s.ws + "?token=" + control("alice")) as a:
            a.request({"type": "start", "ride": "r-exp"})
        # Expired 26 s ago: accepted within the 30 s leeway, cut off when the leeway runs out.
        tok = jwt({"sub": "op", "scope": "watch", "ops": True, "exp": now() - 26})
        t0 = time.monotonic()
        with Client(s.ws + "?token=" + tok) as op:
            watch_all(op)
            op.wait_for(lambda m: m["type"] == "fleet", 3)
            err = op.wait_for(lambda m: m["type"] == "error", 8)
            assert err["code"] == "unauthorized" and "expired" in err["message"]
            assert time.monotonic() - t0 < 8
            op.backlog.clear()  # what came before the error
            with pytest.raises(ConnectionClosed) as info:
                for _ in range(20):
                    m = op.recv(timeout=5)
                    assert not m["type"].startswith("fleet"), "feed after the unauthorized error"
            assert info.value.rcvd is not None and info.value.rcvd.code == 4401


# ---- 2. one bound for everything queued -----------------------------------------------------------

def raw_subscriber(port, path, subscribe):
    """A WebSocket client with a small receive buffer that subscribes and then never reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, port, key)).encode())
    resp = b""
    while b"\r\n\r\n" not in resp:
        chunk = sock.recv(1)
        assert chunk, "closed during the handshake"
        resp += chunk
    assert resp.startswith(b"HTTP/1.1 101"), resp
    for msg in subscribe:
        frame = json.dumps(msg).encode()
        assert len(frame) < 126
        sock.sendall(bytes([0x81, 0x80 | len(frame)]) + b"\0\0\0\0" + frame)
    return sock


@pytest.mark.parametrize("pace", [0, 0.1], ids=["flood", "paced"])
def test_a_subscriber_that_reads_nothing_is_closed_while_state_pushes_flow(pace):
    """Flooded, the outbox's bound (1,024 frames) closes it within a second or two; paced
    (about 120 pushes a second, the bound minutes away), the slow-consumer clock does, which
    pushes must not restart. The old code did neither: every push reset the clock and state
    pushes were queued without a bound."""
    lag = 2
    rides = ["r-push-%d" % i for i in range(6)]
    env = dict(ENV, RIDEPUSH_MAX_OPEN_RIDES_PER_RIDER="10")  # six rides of one rider
    with Server("--control-rate", "100000", "--slow-consumer-lag", str(lag), auth="jwt", env=env) as s:
        with Client(s.ws + "?token=" + control("pusher")) as c:
            for r in rides:
                assert c.request({"type": "start", "ride": r})["type"] == "state"
            sock = raw_subscriber(s.port, "/ws?token=" + control("pusher"),
                                  [{"type": "subscribe", "ride": r} for r in rides])
            before = metric(s, "ridepush_slow_consumer_disconnects_total")
            t0 = time.monotonic()
            closed_at = None
            toggles = 0
            # Toggled for at most 20 s (the old code never closed it).
            while time.monotonic() - t0 < 20:
                for r in rides:
                    c.send({"type": "pause", "ride": r, "id": "p%d%s" % (toggles, r)})
                    c.send({"type": "resume", "ride": r, "id": "r%d%s" % (toggles, r)})
                for r in rides:
                    c.wait_for(lambda m, r=r: m.get("id") == "r%d%s" % (toggles, r), 5)
                c.backlog.clear()
                toggles += 1
                time.sleep(pace)
                if (pace or toggles % 10 == 0) and metric(s, "ridepush_slow_consumer_disconnects_total") > before:
                    closed_at = time.monotonic() - t0
                    break
            assert closed_at is not None, "not closed in 20 s (%d toggles)" % toggles
            print("closed as a slow consumer %.1f s after the pushes began (%d toggles)" % (closed_at, toggles))
            closing = [ln for ln in s.lines if "with 4008" in ln]
            assert len(closing) == 1, closing
            if pace:
                # Its buffers (a 4 KiB receive buffer, the server's 64 KiB send buffer) fill in
                # 2-3 s at this rate; from then on lag + 2 s at most, by the clock, not the bound.
                assert "nothing read for 2s" in closing[0], closing
                assert closed_at < 3 + lag + 2, closed_at
            else:
                assert closed_at < lag + 2, closed_at
            deadline = time.monotonic() + 8
            while s.get("/healthz")[1]["connections"] > 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert s.get("/healthz")[1]["connections"] == 1
            sock.close()


# ---- 3. token times on the wall clock ----------------------------------------------------------

@pytest.fixture
def clockstep(tmp_path):
    so = tmp_path / "clockstep.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    os.path.join(ROOT, "tests", "shims", "clockstep.c"), "-ldl"], check=True, timeout=60)
    control_file = tmp_path / "offset"
    control_file.write_text("0")
    return so, control_file


def test_token_times_are_judged_on_the_wall_clock_after_a_step(clockstep):
    so, offset = clockstep
    env = dict(ENV, LD_PRELOAD=str(so), CLOCKSTEP_FILE=str(offset))
    with Server(auth="jwt", env=env) as s:
        with Client(s.ws + "?token=" + control("walt")) as c:
            c.request({"type": "start", "ride": "r-wall"})
        offset.write_text("600000")  # the wall clock steps 10 minutes forward (NTP)
        time.sleep(0.3)
        wall = now() + 600
        # Issued now by the stepped clock (not valid before it): accepted.
        fresh = jwt({"sub": "walt", "scope": "control", "nbf": wall - 5, "iat": wall - 5, "exp": wall + 3600})
        with Client(s.ws + "?token=" + fresh) as c:
            st = c.request({"type": "get", "ride": "r-wall"})
            assert st["type"] == "state", st
        assert s.get("/rides/r-wall?token=" + fresh)[0] == 200
        # Expired 9 minutes ago by the wall clock: refused, over the socket and over HTTP.
        stale = jwt({"sub": "walt", "scope": "control", "exp": wall - 540})
        with Client(s.ws + "?token=" + stale) as c:
            assert "expired" in expect_unauthorized(c)["message"]
        status, body, _ = s.get("/rides/r-wall?token=" + stale)
        assert status == 401 and "token expired" in body["error"]["message"], body
        # Elapsed time stays on the slewing clock: the ride did not jump 10 minutes.
        with Client(s.ws + "?token=" + fresh) as c:
            assert c.request({"type": "get", "ride": "r-wall"})["elapsed"] < 60


# ---- 5. the journal read waits for the token --------------------------------------------------------

def test_journal_read_is_refused_before_the_store_is_touched():
    with Server(auth="jwt", env=ENV) as s:
        with Client(s.ws + "?token=" + control("jo")) as c:
            c.request({"type": "start", "ride": "r-jour"})
            c.request({"type": "pause", "ride": "r-jour"})
        reads = metric(s, "ridepush_store_ride_reads_total")
        for tok in (control("mallory"), watch("mallory"), watch("jo", rides=["r-other"])):
            status, body, _ = s.get("/rides/r-jour?journal=1&token=" + tok)
            assert status == 403 and body["error"]["code"] == "forbidden", body
        assert metric(s, "ridepush_store_ride_reads_total") == reads, "a refused read touched the store"
        status, body, _ = s.get("/rides/r-jour?journal=1&token=" + control("jo"))
        assert status == 200 and [e["event"] for e in body["journal"]][:2] == ["start", "pause"], body
        assert metric(s, "ridepush_store_ride_reads_total") == reads + 1


# ---- 6. open rides per rider -------------------------------------------------------------------

def test_open_rides_per_rider_are_capped_and_ops_are_exempt():
    with Server(*FAST, "--max-open-rides-per-rider", "2", auth="jwt", env=ENV) as s:
        with Client(s.ws + "?token=" + control("capped")) as c:
            for i in range(2):
                assert c.request({"type": "start", "ride": "cap-%d" % i})["type"] == "state"
            err = c.request({"type": "start", "ride": "cap-2"})
            assert (err["type"], err["code"]) == ("error", "too_many_rides"), err
            assert "2" in err["message"]
            # The refusal holds for pipelined starts too: of five sent at once, none gets in.
            for i in range(5):
                c.send({"type": "start", "ride": "cap-p%d" % i, "id": "cp%d" % i})
            codes = [c.wait_for(lambda m, i=i: m.get("id") == "cp%d" % i, 5).get("code") for i in range(5)]
            assert codes == ["too_many_rides"] * 5
            # Ending one makes room for one.
            assert c.request({"type": "end", "ride": "cap-0"})["state"] == "ended"
            assert c.request({"type": "start", "ride": "cap-3"})["type"] == "state"
            assert c.request({"type": "start", "ride": "cap-4"})["code"] == "too_many_rides"
        # Another rider has a cap of its own; an ops token has none.
        with Client(s.ws + "?token=" + control("other")) as o:
            assert o.request({"type": "start", "ride": "oth-0"})["type"] == "state"
        with Client(s.ws + "?token=" + control("op", ops=True)) as op:
            for i in range(4):
                assert op.request({"type": "start", "ride": "op-%d" % i})["type"] == "state"


def test_open_rides_per_rider_default_is_five():
    with Server(*FAST, auth="jwt", env=ENV) as s, Client(s.ws + "?token=" + control("five")) as c:
        for i in range(5):
            assert c.request({"type": "start"})["type"] == "state"
        assert c.request({"type": "start"})["code"] == "too_many_rides"


# ---- 7/8. the smaller ones -------------------------------------------------------------------------

UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def refused_upgrade(port, path, **headers):
    """(status, the JSON error) of an upgrade the server refuses with an HTTP answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", path, headers=dict(UPGRADE, **headers))
    r = conn.getresponse()
    body = r.read()
    conn.close()
    assert r.getheader("content-type") == "application/json", (r.status, r.getheaders(), body)
    return r.status, json.loads(body)["error"]


def test_echo_needs_a_token_like_ws():
    with Server("--ws-echo", "4096", auth="jwt", env=ENV) as s:
        status, err = refused_upgrade(s.port, "/echo")
        assert (status, err["code"]) == (401, "unauthorized"), err
        status, err = refused_upgrade(s.port, "/echo?token=x.y.z")
        assert (status, err["code"]) == (401, "unauthorized") and "token refused" in err["message"], err
        expired = jwt({"sub": "echoer", "scope": "control", "exp": now() - 120})
        assert refused_upgrade(s.port, "/echo?token=" + expired)[0] == 401
        with Client("ws://127.0.0.1:%d/echo?token=%s" % (s.port, control("echoer")), subprotocols=None) as e:
            e.ws.send("hello")
            assert e.ws.recv(timeout=3) == "hello"


def test_bad_ride_ids_over_http_are_refused_without_echo():
    with Server(auth="jwt", env=ENV) as s:
        tok = control("idcheck")
        for bad in ("a" * 300, "a%3Cscript%3E", "r%20x", "%C3%A9t%C3%A9"):
            status, body, _ = s.get("/rides/%s?token=%s" % (bad, tok))
            assert status == 400 and body["error"]["code"] == "bad_request", (bad, status, body)
            text = json.dumps(body)
            assert "aaaaaaaa" not in text and "script" not in text and "r x" not in text, body
        status, body, _ = s.get("/rides/%s?journal=1&token=%s" % ("b" * 65, tok))
        assert status == 400
        # A good id that does not exist is still a 404.
        assert s.get("/rides/no-such-ride?token=" + tok)[0] == 404


def test_a_refused_subprotocol_gets_a_4xx_json_reason():
    with Server() as s:
        status, err = refused_upgrade(s.port, "/ws", **{"Sec-WebSocket-Protocol": "chat, superchat"})
        assert status == 400, (status, err)
        assert err["code"] == "unsupported_subprotocol" and "ride.v1" in err["message"], err
        # ride.v1 among others is still fine.
        with Client(s.ws, subprotocols=("chat", "ride.v1")) as c:
            assert c.request({"type": "quote", "seconds": 60})["type"] == "quote"


def test_ride_document_with_an_expired_token_says_so():
    with Server(auth="jwt", env=ENV) as s:
        with Client(s.ws + "?token=" + control("exp-http")) as c:
            c.request({"type": "start", "ride": "r-exp-http"})
        tok = jwt({"sub": "exp-http", "scope": "control", "exp": now() - 120})
        status, body, _ = s.get("/rides/r-exp-http?token=" + tok)
        assert status == 401 and "token expired" in body["error"]["message"], body
