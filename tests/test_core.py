"""The coordination core (issue 11) and the hardening items it owns (issue 15: 4-8, 10),
end to end against the real binary: kill -9 in the middle of a multi-connection burst, a store
whose commits stall while ticks stay on time, ordering across four threads at the turn of a
second, a COMMIT of unknown fate stopping the server, request ids reused for something else,
sessions that never authenticate, two servers on one file, re-authentication, and a message
whose last fragment never comes. Every wait is bounded."""
import base64
import concurrent.futures
import contextlib
import hashlib
import hmac
import json
import os
import socket
import sqlite3
import struct
import subprocess
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed

from rp import BIN, ROOT, Client, Server

FAST = ("--control-rate", "1000000")
SECRET = "core-test-secret-0123456789-abcdefghij"


def now_ms():
    return time.time_ns() // 1_000_000


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(claims):
    signing_input = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(hmac.new(SECRET.encode(), signing_input.encode(), hashlib.sha256).digest())


def token(sub, scope="control", **extra):
    t = int(time.time())
    return jwt(dict({"sub": sub, "scope": scope, "exp": t + 3600, "iat": t}, **extra))


def journal(path, ride):
    db = sqlite3.connect(path)
    try:
        return [k for (k,) in db.execute("SELECT kind FROM transitions WHERE ride = (SELECT n FROM rides WHERE id = ?) ORDER BY seq", (ride,))]
    finally:
        db.close()


# ----------------------------------------------------------------------------------------
# Durability of grouped commits

def test_kill9_mid_burst_of_grouped_commits_keeps_every_acknowledged_transition_and_no_refused_one(tmp_path):
    """16 connections x 4 lanes of start -> end cycles (so commits hold many transitions),
    with a refused request (resume of a riding ride) after every start; kill -9 mid-burst.
    After the restart every acknowledged start and end is on file, no refused resume is."""
    path = str(tmp_path / "rides.db")
    srv = Server(*FAST, store=path).start()
    acked, refused = {}, {}
    stop = threading.Event()
    errors = []

    def lane_loop(conn_index):
        try:
            c = Client(srv.ws)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
            return
        lanes = {l: 0 for l in range(4)}
        try:
            def send(l):
                k = lanes[l]
                rid = "k-%d-%d-%d" % (conn_index, l, k // 3)
                kind = ("start", "resume", "end")[k % 3]
                c.send({"type": kind, "id": "%d.%d.%d" % (conn_index, l, k), "ride": rid})
            for l in lanes:
                send(l)
            while not stop.is_set():
                m = c.recv(timeout=5)
                conn, l, k = (int(x) for x in m["id"].split("."))
                rid = "k-%d-%d-%d" % (conn, l, k // 3)
                kind = ("start", "resume", "end")[k % 3]
                (acked if m["type"] == "state" else refused)[(rid, kind)] = m
                lanes[l] = k + 1
                send(l)
        except Exception:  # noqa: BLE001 - the kill ends every loop
            pass

    threads = [threading.Thread(target=lane_loop, args=(i,), daemon=True) for i in range(16)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    assert not errors, errors
    starts = [r for (r, k) in acked if k == "start"]
    ends = [r for (r, k) in acked if k == "end"]
    assert len(starts) > 100 and len(ends) > 50, (len(starts), len(ends))
    assert all(k == "resume" for (_, k) in refused) and all(m["code"] == "invalid_transition" for m in refused.values())
    assert not [x for x in acked if x[1] == "resume"], "a resume of a riding ride was applied"

    srv = Server(*FAST, store=path).start()
    try:
        lost = []
        for rid in starts:
            status, doc, _ = srv.get("/rides/" + rid)
            if status != 200 or doc["started_at"] != acked[(rid, "start")]["started_at"]:
                lost.append((rid, status))
            elif (rid, "end") in acked and (doc["state"] != "ended" or doc["ended_at"] != acked[(rid, "end")]["ended_at"]):
                lost.append((rid, "end", doc["state"]))
        print("grouped kill -9: %d starts and %d ends acknowledged, %d refused, %d lost"
              % (len(starts), len(ends), len(refused), len(lost)))
        assert lost == []
    finally:
        srv.stop()
    db = sqlite3.connect(path)
    resumes = db.execute("SELECT COUNT(*) FROM transitions WHERE kind = 'resume'").fetchone()[0]
    db.close()
    assert resumes == 0


# ----------------------------------------------------------------------------------------
# A store that stalls

def test_a_store_stalled_for_three_seconds_delays_no_tick_and_answers_in_order_after(tmp_path):
    stall = tmp_path / "stall"
    path = str(tmp_path / "rides.db")
    with Server(*FAST, "--threads", "2", store=path, env={"RIDEPUSH_TEST_STALL_COMMITS_WHILE": str(stall)}) as srv:
        dev = Client(srv.ws)
        for i in range(10):
            assert dev.request({"type": "start", "ride": "st-%d" % i})["type"] == "state"
        watchers = [Client(srv.ws) for _ in range(6)]
        for i, w in enumerate(watchers):
            assert w.request({"type": "subscribe", "ride": "st-%d" % i})["type"] == "state"
        stall.touch()
        # Requests made during the stall: no answer while it lasts.
        for i in range(6):
            dev.send({"type": "pause" if i % 2 == 0 else "resume", "id": "d%d" % i, "ride": "st-0"})
        t_stall = time.monotonic()
        lateness = []
        while time.monotonic() - t_stall < 3.2:
            for w in watchers:
                with contextlib.suppress(TimeoutError):
                    m = w.recv(timeout=0.05)
                    if m["type"] == "tick":
                        lateness.append(now_ms() - m["at"])
        with pytest.raises(TimeoutError):
            dev.recv(timeout=0.05)
        stall.unlink()
        got = [dev.recv(timeout=5) for _ in range(6)]
        assert [m["id"] for m in got] == ["d%d" % i for i in range(6)]
        assert [m["state"] for m in got] == ["paused", "riding"] * 3
        print("during a 3 s commit stall: %d ticks, lateness max %d ms" % (len(lateness), max(lateness)))
        assert len(lateness) >= 6 * 2, "watchers stopped getting ticks"
        assert max(lateness) < 500, lateness
        assert journal(path, "st-0") == ["start"] + ["pause", "resume"] * 3


def test_a_stalled_log_sync_tells_nobody_until_it_returns_while_ticks_go_on(tmp_path):
    # The worker commits at synchronous=OFF and a sync thread fsyncs the log: a transition is
    # in the file (committed) before it is durable, and nobody may hear of it in between.
    stall = tmp_path / "stall"
    path = str(tmp_path / "rides.db")
    with Server(*FAST, store=path, env={"RIDEPUSH_TEST_STALL_SYNCS_WHILE": str(stall)}) as srv:
        dev = Client(srv.ws)
        assert dev.request({"type": "start", "id": "s0", "ride": "sy-w"})["type"] == "state"
        watcher = Client(srv.ws)
        assert watcher.request({"type": "subscribe", "ride": "sy-w"})["state"] == "riding"
        stall.touch()
        dev.send({"type": "pause", "id": "p1", "ride": "sy-w"})
        dev.send({"type": "start", "id": "s1", "ride": "sy-new"})
        deadline = time.monotonic() + 10
        while journal(path, "sy-new") != ["start"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert journal(path, "sy-w") == ["start", "pause"] and journal(path, "sy-new") == ["start"], "written before the sync"
        seen = []
        t_stall = time.monotonic()
        while time.monotonic() - t_stall < 2.0:
            with contextlib.suppress(TimeoutError):
                seen.append(watcher.recv(timeout=0.1))
        with pytest.raises(TimeoutError):
            dev.recv(timeout=0.05)
        ticks = [m for m in seen if m["type"] == "tick"]
        assert len(ticks) >= 1 and all(m["state"] == "riding" for m in ticks), seen
        assert [m for m in seen if m["type"] != "tick"] == [], "a push before the sync: %r" % seen
        stall.unlink()
        got = [dev.recv(timeout=5) for _ in range(2)]
        assert [(m["id"], m["state"]) for m in got] == [("p1", "paused"), ("s1", "riding")]
        deadline = time.monotonic() + 5
        push = watcher.recv(timeout=5)
        while push["type"] == "tick" and time.monotonic() < deadline:
            push = watcher.recv(timeout=5)
        assert (push["type"], push["state"]) == ("state", "paused")


# ----------------------------------------------------------------------------------------
# Issue 15 item 8: ordering across threads

def test_no_tick_after_ended_across_four_threads_ending_at_the_turn_of_a_second():
    rides, per_ride, rounds = 24, 4, 4
    with Server(*FAST, "--threads", "4") as srv:
        dev = Client(srv.ws)
        violations, checked = [], 0
        for rnd in range(rounds):
            ids = ["o%d-%d" % (rnd, i) for i in range(rides)]
            for r in ids:
                assert dev.request({"type": "start", "ride": r})["type"] == "state"
            watchers = []
            for r in ids:
                for _ in range(per_ride):
                    w = Client(srv.ws)
                    assert w.request({"type": "subscribe", "ride": r})["type"] == "state"
                    watchers.append((r, w))
            # End every ride within a few ms of the next whole second, when ticks are encoded.
            target = (now_ms() // 1000 + 2) * 1000 - 3
            time.sleep(max(0, target - now_ms()) / 1000)
            for r in ids:
                dev.send({"type": "end", "id": "e-" + r, "ride": r})
            for r in ids:
                assert dev.wait_for(lambda m, r=r: m.get("id") == "e-" + r, 5)["state"] == "ended"
            time.sleep(1.5)  # the next tick, which must not carry them

            def until_quiet(w):
                msgs = []
                with contextlib.suppress(TimeoutError):
                    while True:
                        msgs.append(w.recv(timeout=0.2))
                return msgs
            # Each watcher waits for its own 0.2 s of silence, all at once rather than in turn.
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(watchers)) as pool:
                heard = list(pool.map(until_quiet, [w for _, w in watchers]))
            for (r, w), msgs in zip(watchers, heard):
                ended = [i for i, m in enumerate(msgs) if m["type"] == "state" and m.get("state") == "ended"]
                assert len(ended) == 1, (r, msgs)
                after = [m for m in msgs[ended[0]:] if m["type"] == "tick" and m["ride"] == r]
                if after:
                    violations.append((r, after[0]))
                checked += 1
                w.close()
        print("turn-of-second ends: %d watchers over %d rounds, %d saw a tick after ended" % (checked, rounds, len(violations)))
        assert violations == []


def test_transitions_of_one_ride_reach_every_watcher_in_commit_order():
    with Server(*FAST, "--threads", "4") as srv:
        dev = Client(srv.ws)
        dev.request({"type": "start", "ride": "ord"})
        watchers = [Client(srv.ws) for _ in range(12)]
        for w in watchers:
            w.request({"type": "subscribe", "ride": "ord"})
        # Pipelined: the store thread groups them; every watcher must see them in order.
        for i in range(20):
            dev.send({"type": "pause" if i % 2 == 0 else "resume", "id": "t%d" % i, "ride": "ord"})
        dev.send({"type": "end", "id": "t-end", "ride": "ord"})
        replies = [dev.wait_for(lambda m, i=i: m.get("id") == "t%d" % i, 5) for i in range(20)]
        assert [m["state"] for m in replies] == ["paused", "riding"] * 10
        expected = ["paused", "riding"] * 10 + ["ended"]
        for w in watchers:
            states = []
            deadline = time.monotonic() + 5
            while len(states) < len(expected) and time.monotonic() < deadline:
                m = w.recv(timeout=5)
                if m["type"] == "state":
                    states.append(m["state"])
            assert states == expected


# ----------------------------------------------------------------------------------------
# A COMMIT of unknown fate

@pytest.mark.parametrize("fault,says", [
    ("RIDEPUSH_TEST_FAIL_COMMITS_WHILE", "injected I/O error at COMMIT"),
    # The log's fsync, on the sync thread after the group was committed (written, not durable).
    ("RIDEPUSH_TEST_FAIL_SYNCS_WHILE", "injected fsync error"),
])
def test_an_io_error_at_commit_or_log_sync_stops_the_server_tells_nobody_and_a_restart_recovers(tmp_path, fault, says):
    fail = tmp_path / "fail"
    path = str(tmp_path / "rides.db")
    srv = Server(*FAST, store=path, env={fault: str(fail)}).start()
    c = Client(srv.ws)
    assert c.request({"type": "start", "id": "a", "ride": "io-a"})["type"] == "state"
    fail.touch()
    c.send({"type": "start", "id": "b", "ride": "io-b"})
    srv.proc.wait(10)
    assert srv.proc.returncode == 70
    time.sleep(0.2)
    log = "\n".join(srv.lines)
    assert "FATAL: the ride store failed at COMMIT" in log and says in log and "a restart recovers" in log, log
    with contextlib.suppress(ConnectionClosed, TimeoutError, OSError):
        while True:
            assert c.recv(timeout=1).get("id") != "b", "told about a commit of unknown fate"
    fail.unlink()
    with Server(*FAST, store=path) as again:
        assert again.get("/rides/io-a")[0] == 200


# ----------------------------------------------------------------------------------------
# Issue 15 item 4: exactly-once keyed by what was asked

def test_a_request_id_reused_for_another_ride_or_type_is_a_conflict_and_applies_nothing():
    with Server(*FAST) as srv:
        c = Client(srv.ws)
        c.request({"type": "start", "ride": "ra"})
        c.request({"type": "start", "ride": "rb"})
        first = c.request({"type": "pause", "id": "same", "ride": "ra"})
        assert first["state"] == "paused"
        other = c.request({"type": "pause", "id": "same", "ride": "rb"})
        assert other["type"] == "error" and other["code"] == "conflict", other
        assert "pause ra" in other["message"], other
        assert c.request({"type": "get", "ride": "rb"})["state"] == "riding"
        again = c.request({"type": "end", "id": "same", "ride": "ra"})
        assert again["code"] == "conflict", again
        assert c.request({"type": "get", "ride": "ra"})["state"] == "paused"
        assert c.request({"type": "pause", "id": "same", "ride": "ra"}) == first


def test_a_retry_is_replayed_only_after_the_ownership_check():
    with Server(*FAST, auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}) as srv:
        alice = Client(srv.ws + "?token=" + token("alice"))
        alice.request({"type": "start", "ride": "own-a"})
        first = alice.request({"type": "pause", "id": "p1", "ride": "own-a"})
        assert first["state"] == "paused"
        # Another rider reusing the id on alice's ride: forbidden, not alice's reply.
        mallory = Client(srv.ws + "?token=" + token("mallory"))
        r = mallory.request({"type": "pause", "id": "p1", "ride": "own-a"})
        assert r["type"] == "error" and r["code"] == "forbidden", r


# ----------------------------------------------------------------------------------------
# Issue 15 item 5: sessions that never authenticate

def test_a_websocket_that_never_authenticates_is_closed_4401_after_the_handshake_timeout():
    with Server("--handshake-timeout", "2", auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}) as srv:
        c = Client(srv.ws)
        t0 = time.monotonic()
        err = c.wait_for(lambda m: m.get("type") == "error", 6)
        assert err["code"] == "unauthorized", err
        with pytest.raises(ConnectionClosed) as info:
            for _ in range(5):
                c.ws.recv(timeout=3)
        assert info.value.rcvd is not None and info.value.rcvd.code == 4401
        assert 1.5 < time.monotonic() - t0 < 5
        # One that authenticated stays.
        ok = Client(srv.ws + "?token=" + token("u"))
        time.sleep(3.5)
        assert ok.request({"type": "quote", "seconds": 60})["type"] == "quote"


# ----------------------------------------------------------------------------------------
# Issue 15 item 6: two servers, one file

def test_a_second_server_on_the_same_store_file_is_refused_naming_it(tmp_path):
    path = str(tmp_path / "rides.db")
    with Server(store=path):
        out = subprocess.run([BIN, "serve", "--port", "0", "--store", path, "--auth", "none",
                              "--public", os.path.join(ROOT, "public")],
                             capture_output=True, text=True, timeout=20)
        assert out.returncode != 0
        assert path in out.stderr + out.stdout and "another RidePush server is using this file" in out.stderr + out.stdout, out


# ----------------------------------------------------------------------------------------
# Issue 15 item 7: re-authentication

def test_reauthenticating_with_another_token_ends_subscriptions_it_does_not_allow():
    with Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}) as srv:
        owner = Client(srv.ws + "?token=" + token("dana"))
        owner.request({"type": "start", "ride": "lnk"})
        link = owner.request({"type": "share", "ride": "lnk"})["token"]
        w = Client(srv.ws + "?token=" + link)
        assert w.request({"type": "subscribe", "ride": "lnk"})["type"] == "state"
        w.wait_for(lambda m: m["type"] == "tick", 3)
        auth = w.request({"type": "auth", "token": token("someone-else")})
        assert auth["type"] == "authenticated"
        assert w.wait_for(lambda m: m["type"] == "unsubscribed", 1)["ride"] == "lnk"
        w.backlog.clear()
        with pytest.raises(TimeoutError):
            w.wait_for(lambda m: m["type"] == "tick", 2.5)


# ----------------------------------------------------------------------------------------
# Issue 15 item 10: a message whose last fragment never comes

def test_a_message_never_finished_is_bounded_by_the_handshake_timeout():
    with Server("--handshake-timeout", "2") as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        payload = b'{"type":"qu'
        mask = b"\x01\x02\x03\x04"
        s.sendall(bytes([0x01, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))  # FIN=0
        t0 = time.monotonic()
        data = b""
        s.settimeout(6)
        with contextlib.suppress(ConnectionResetError):
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        elapsed = time.monotonic() - t0
        s.close()
        assert 1.5 < elapsed < 5.5, elapsed
        # A close frame with code 1008.
        i = data.find(b"\x88")
        assert i >= 0 and struct.unpack(">H", data[i + 2:i + 4])[0] == 1008, data
