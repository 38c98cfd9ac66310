"""ride.v1 over real sockets against the real server (issue 2)."""
import json
import os
import signal
import socket
import subprocess
import time

import pytest
from websockets.exceptions import ConnectionClosed

from rp import BIN, ROOT, Client, Server


def ticks_of(client, n, ride=None):
    out = []
    while len(out) < n:
        m = client.wait_for(lambda m: m["type"] == "tick" and (ride is None or m["ride"] == ride), timeout=3)
        out.append(m)
    return out


def test_start_subscribe_and_ticks_shared_by_all_subscribers(server):
    a, b, c = Client(server.ws), Client(server.ws), Client(server.ws, subprotocols=None)
    started = a.request({"type": "start", "id": "q1", "ride": "r-42"})
    assert started["type"] == "state" and started["id"] == "q1"
    assert (started["ride"], started["state"], started["elapsed"], started["paused"], started["fare"], started["currency"]) == \
        ("r-42", "riding", 0, 0, 500, "KRW")
    assert started["ended_at"] is None and isinstance(started["started_at"], int)
    for cl in (a, b, c):
        st = cl.request({"type": "subscribe", "ride": "r-42"})
        assert st["type"] == "state" and st["ride"] == "r-42" and st["state"] == "riding"
    seen = {name: ticks_of(cl, 3, "r-42") for name, cl in (("a", a), ("b", b), ("c", c))}
    # The same tick carries the same seq and at for every subscriber.
    by_seq = {}
    for name, ticks in seen.items():
        for t in ticks:
            by_seq.setdefault(t["seq"], set()).add((t["at"], t["elapsed"], t["fare"]))
    common = [s for s in by_seq if len(by_seq[s]) == 1]
    assert len(common) >= 2
    for name, ticks in seen.items():
        seqs = [t["seq"] for t in ticks]
        assert seqs == list(range(seqs[0], seqs[0] + 3)), seqs
        ats = [t["at"] for t in ticks]
        assert all(at % 1000 == 0 for at in ats), "ticks fire on whole wall-clock seconds"
        assert [y - x for x, y in zip(ats, ats[1:])] == [1000, 1000]
        els = [t["elapsed"] for t in ticks]
        assert [y - x for x, y in zip(els, els[1:])] == [1, 1]
        assert all(set(t) == {"type", "ride", "state", "elapsed", "paused", "fare", "currency", "seq", "at"} for t in ticks)


def test_pause_resume_end_pushed_to_every_subscriber(server):
    dev, w1, w2 = Client(server.ws), Client(server.ws), Client(server.ws)
    dev.request({"type": "start", "ride": "r-7"})
    for w in (w1, w2):
        w.request({"type": "subscribe", "ride": "r-7"})
    ticks_of(w1, 1)
    paused = dev.request({"type": "pause", "id": "p1", "ride": "r-7"})
    assert paused["state"] == "paused" and paused["id"] == "p1"
    for w in (w1, w2):
        push = w.wait_for(lambda m: m["type"] == "state", timeout=0.9)  # at once, not at the next tick
        assert push["state"] == "paused" and "id" not in push and push["elapsed"] == paused["elapsed"]
    # Paused rides keep ticking with elapsed frozen and paused growing.
    t1, t2 = ticks_of(w1, 2, "r-7")
    assert (t1["state"], t2["state"]) == ("paused", "paused")
    assert t1["elapsed"] == t2["elapsed"] == paused["elapsed"]
    assert t2["paused"] == t1["paused"] + 1
    resumed = dev.request({"type": "resume", "ride": "r-7"})
    assert resumed["state"] == "riding" and resumed["elapsed"] == paused["elapsed"]
    w2.wait_for(lambda m: m["type"] == "state" and m["state"] == "riding", timeout=0.9)
    ended = dev.request({"type": "end", "ride": "r-7"})
    assert ended["state"] == "ended" and isinstance(ended["ended_at"], int)
    r = ended["receipt"]
    assert r["fare"] == ended["fare"] == 500 and r["currency"] == "KRW" and r["reason"] == "rider"
    assert r["elapsed"] == ended["elapsed"] and r["paused"] >= 1
    assert r["lines"] == [{"label": "unlock", "amount": 500}, {"label": "riding", "minutes": 0, "amount": 0},
                          {"label": "pause", "minutes": 0, "amount": 0}]
    for w in (w1, w2):
        push = w.wait_for(lambda m: m["type"] == "state" and m["state"] == "ended", timeout=0.9)
        assert push["receipt"] == r
    # Ticks stop for an ended ride.
    with pytest.raises(TimeoutError):
        w1.wait_for(lambda m: m["type"] == "tick", timeout=1.6)


def test_every_error_code_and_the_connection_stays_open(server):
    c = Client(server.ws)
    c.request({"type": "start", "ride": "r-1"})
    cases = [
        ({"type": "start", "id": "e1", "ride": "r-1"}, "conflict"),
        ({"type": "pause", "id": "e2", "ride": "nope"}, "ride_not_found"),
        ({"type": "subscribe", "id": "e3", "ride": "nope"}, "ride_not_found"),
        ({"type": "unsubscribe", "id": "e3b", "ride": "nope"}, "ride_not_found"),
        ({"type": "resume", "id": "e4", "ride": "r-1"}, "invalid_transition"),
        ({"type": "dance", "id": "e5"}, "unknown_type"),
        ({"type": "pause", "id": "e6"}, "bad_request"),
        ({"type": "pause", "id": "e7", "ride": 42}, "bad_request"),
        ({"type": "start", "id": "e8", "limit": "soon"}, "bad_request"),
    ]
    for msg, code in cases:
        err = c.request(msg)
        assert err["type"] == "error" and err["id"] == msg["id"] and err["code"] == code, (msg, err)
        assert len(err["message"]) > 10
    c.request({"type": "end", "ride": "r-1"})
    for verb in ("pause", "resume", "end"):
        assert c.request({"type": verb, "ride": "r-1"})["code"] == "invalid_transition"
    for raw, code in [("not json", "bad_request"), ("[1,2]", "bad_request"), ('{"type": 5}', "bad_request"),
                      ('{"type":"start","id":' + json.dumps("x" * 65) + "}", "bad_request"),
                      ("x" * 5000, "too_large")]:
        c.send(raw)
        err = c.wait_for(lambda m: m["type"] == "error")
        assert err["code"] == code, (raw[:40], err)
    c.send(b"\x01\x02")
    assert c.wait_for(lambda m: m["type"] == "error")["code"] == "bad_request"
    # Still open and working.
    assert c.request({"type": "start", "ride": "r-2"})["state"] == "riding"


def test_server_makes_ride_ids_and_unsubscribe_stops_ticks(server):
    c = Client(server.ws)
    st = c.request({"type": "start"})
    rid = st["ride"]
    assert rid.startswith("r-") and len(rid) == 12
    c.request({"type": "subscribe", "ride": rid})
    ticks_of(c, 1, rid)
    un = c.request({"type": "unsubscribe", "ride": rid})
    assert un == {"type": "unsubscribed", "id": un["id"], "ride": rid}
    c.backlog.clear()
    with pytest.raises(TimeoutError):
        c.wait_for(lambda m: m["type"] == "tick", timeout=1.5)


def test_get_answers_state_without_subscribing(server):
    c = Client(server.ws)
    c.request({"type": "start", "ride": "r-get"})
    st = c.request({"type": "get", "ride": "r-get"})
    assert st["type"] == "state" and st["ride"] == "r-get"
    with pytest.raises(TimeoutError):
        c.wait_for(lambda m: m["type"] == "tick", timeout=1.5)


def test_http_page_health_and_content_types(server):
    status, body, h = server.get("/")
    assert status == 200 and h["Content-Type"].startswith("text/html") and "<html" in body.lower()
    status, _, h = server.get("/app.js")
    assert status == 200 and h["Content-Type"].startswith("text/javascript")
    status, _, h = server.get("/style.css")
    assert status == 200 and h["Content-Type"].startswith("text/css")
    status, body, _ = server.get("/../etc/passwd")
    assert status == 404
    status, body, _ = server.get("/nope.html")
    assert status == 404 and body["error"]["code"] == "not_found"
    c = Client(server.ws)
    c.request({"type": "start", "ride": "h-1"})
    c.request({"type": "start", "ride": "h-2"})
    c.request({"type": "pause", "ride": "h-2"})
    c.request({"type": "subscribe", "ride": "h-1"})
    status, health, _ = server.get("/healthz")
    assert status == 200 and health["status"] == "ok"
    assert health["connections"] == 1 and health["subscribers"] == 1
    assert health["rides"] == {"riding": 1, "paused": 1, "ended": 0}


def test_ws_only_on_the_ws_path(server):
    with pytest.raises(Exception):
        Client("ws://127.0.0.1:%d/elsewhere" % server.port)


def test_sigterm_closes_sockets_with_1012():
    # The drain's first close is due at once (DrainPlan): one connection goes at the signal.
    s = Server().start()
    c = Client(s.ws)
    c.request({"type": "start", "ride": "r-bye"})
    s.proc.send_signal(signal.SIGTERM)
    with pytest.raises(ConnectionClosed) as info:
        while True:
            c.ws.recv(timeout=5)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1012
    assert s.proc.wait(10) == 0


def test_clear_errors_for_port_in_use_and_missing_public():
    with Server() as first:
        r = subprocess.run([BIN, "serve", "--port", str(first.port), "--store", "memory", "--auth", "none"],
                           capture_output=True, text=True, timeout=10, cwd=ROOT)
        assert r.returncode != 0 and "already in use" in r.stderr
    r = subprocess.run([BIN, "serve", "--port", "0", "--public", "/nonexistent", "--store", "memory", "--auth", "none"],
                       capture_output=True, text=True, timeout=10, cwd=ROOT)
    assert r.returncode != 0 and "/nonexistent" in r.stderr and "no such folder" in r.stderr
    r = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "--port" in r.stdout and "RIDEPUSH_PORT" in r.stdout


def test_env_vars_choose_host_and_port():
    port = free_port()
    # rp.Server always passes --port; run by hand to prove the environment alone works.
    p = subprocess.Popen([BIN, "serve", "--store", "memory", "--auth", "none", "--public", os.path.join(ROOT, "public")],
                         env=dict(os.environ, RIDEPUSH_PORT=str(port), RIDEPUSH_HOST="127.0.0.1"),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        assert "serving http://127.0.0.1:%d/" % port in line
    finally:
        p.terminate()
        p.wait(10)


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def test_device_client_start_pause_end_and_watch(server):
    url = ["--url", server.ws, "--lang", "en"]
    r = subprocess.run([BIN, "ride", "start", "--ride", "cli-1"] + url, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and r.stdout.startswith("cli-1 riding 0m 0s · 500 KRW"), r.stdout + r.stderr
    watch = subprocess.Popen([BIN, "ride", "watch", "cli-1"] + url, stdout=subprocess.PIPE, text=True)
    try:
        lines = [watch.stdout.readline() for _ in range(3)]
        assert lines[0].startswith("cli-1 riding")
        assert all(l.startswith("cli-1 riding ") and l.rstrip().endswith("500 KRW") for l in lines), lines
        r = subprocess.run([BIN, "ride", "pause", "cli-1"] + url, capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.startswith("cli-1 paused ")
        r = subprocess.run([BIN, "ride", "pause", "cli-1"] + url, capture_output=True, text=True, timeout=10)
        assert r.returncode == 1 and "invalid_transition" in r.stderr
        r = subprocess.run([BIN, "ride", "end", "cli-1"] + url, capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and r.stdout.startswith("cli-1 ended ") and "total 500 KRW" in r.stdout
        out, _ = watch.communicate(timeout=5)
        assert watch.returncode == 0 and "cli-1 ended" in out
    finally:
        if watch.poll() is None:
            watch.kill()
