"""Webhooks wired into the server (issue 27, item 2) against the real binary: every committed
transition, auto-ends included, is POSTed to a receiver started here that checks every
signature with Python's hmac (the pattern of test_webhooks_sender.py). Every wait is bounded."""
import json
import os
import re
import socket
import ssl
import sqlite3
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pg import pg_db, postgres  # noqa: F401 (fixtures)
from rp import BIN, Client, Server
from test_security import ENV, assert_on_time, control, watch, watch_ticks
from test_webhooks_sender import verify

SECRET = "whsec_test_0123456789abcdef0123456789"  # the secret test_webhooks_sender.verify checks with
TYPES = ["ride.started", "ride.paused", "ride.resumed", "ride.ended"]
DELIVERY_LOG = re.compile(r"webhook (evt_\w+) \(ride ([^)]+)\) to \S+: attempt (\d+) (HTTP \d+|[^,]+), (.*)$")
STATES = {"ride.started": "riding", "ride.paused": "paused", "ride.resumed": "riding", "ride.ended": "ended"}


class Receiver:
    """Refuses the first `refuse` attempts of every event with `status` (or hangs on them for
    up to 10 s with `hang`), then answers 204; binds `port` when given (a receiver that was
    down comes back where the server sends); speaks HTTPS with `tls` = (certificate, key)."""

    def __init__(self, refuse=0, status=500, hang=False, port=0, tls=None, secret=SECRET):
        self.log, self.lock, self.release = [], threading.Lock(), threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                event = json.loads(body)
                ok = verify(self.headers["RidePush-Signature"], body, secret=secret)
                with receiver.lock:
                    n = 1 + sum(1 for e in receiver.log if e["id"] == event["id"])
                    code = (status if n <= refuse else 204) if ok else 400
                    receiver.log.append({"id": event["id"], "header_id": self.headers["RidePush-Event-Id"],
                                         "type": event["type"], "ride": event["ride"]["ride"], "event": event,
                                         "verified": ok, "attempt": n, "code": code, "body": body,
                                         "signature": self.headers["RidePush-Signature"]})
                if hang and n <= refuse:
                    receiver.release.wait(10)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        ThreadingHTTPServer.daemon_threads = True
        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "%s://127.0.0.1:%d/hooks/ridepush" % ("https" if tls else "http", self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self):
        with self.lock:
            return [e for e in self.log if e["code"] == 204]

    def wait_delivered(self, n, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.delivered()
            if len(got) >= n:
                return got
            time.sleep(0.05)
        raise TimeoutError("%d of %d events delivered in %ss: %r" % (len(self.delivered()), n, timeout,
                                                                   [(e["type"], e["ride"], e["code"]) for e in self.log]))

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "webhook.secret"
    path.write_text(SECRET + "\n")
    return str(path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(srv, name):
    status, text, _ = srv.get("/metrics")
    assert status == 200
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "no %s in /metrics" % name
    return float(m.group(1))


def wait_metric(srv, name, pred, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        v = metric(srv, name)
        if pred(v):
            return v
        assert time.monotonic() < deadline, "%s stayed %s" % (name, v)
        time.sleep(0.1)


def test_four_events_per_ride_in_commit_order_retried_after_refusals(receivers, secret_file, tmp_path):
    rx = receivers(refuse=1, status=503)
    rides = ["wh-a", "wh-b"]
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file, store=str(tmp_path / "s.db")) as srv, \
            Client(srv.ws) as cl:
        before = int(time.time() * 1000)
        # Interleaved: per ride commit order is what the receiver must see.
        for cmd in ("start", "pause", "resume"):
            for r in rides:
                assert cl.request({"type": cmd, "ride": r})["type"] == "state"
        for r in rides:
            assert cl.request({"type": "end", "id": "end-" + r, "ride": r})["state"] == "ended"
        after = int(time.time() * 1000)
        # Neither a refused transition nor the replay of a recorded reply writes an event.
        assert cl.request({"type": "pause", "ride": rides[0]})["code"] == "invalid_transition"
        assert cl.request({"type": "end", "id": "end-" + rides[0], "ride": rides[0]})["state"] == "ended"
        got = rx.wait_delivered(8, timeout=20)
        wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 0)
        assert metric(srv, 'ridepush_webhook_attempts_total{result="delivered"}') == 8
        assert metric(srv, 'ridepush_webhook_attempts_total{result="http_error"}') == 8
    assert len(got) == 8 and all(e["verified"] for e in rx.log), rx.log
    assert all(e["id"] == e["header_id"] and e["id"].startswith("evt_") for e in rx.log)
    for r in rides:
        seen = [e for e in rx.log if e["ride"] == r]
        # Each event refused once, then its same bytes accepted, before the next was tried.
        assert [(e["type"], e["code"]) for e in seen] == [(t, c) for t in TYPES for c in (503, 204)], seen
        assert all(a["body"] == b["body"] for a, b in zip(seen[::2], seen[1::2]))
        for e in seen[1::2]:
            ev = e["event"]
            assert set(ev) == {"id", "type", "created", "ride"} and before <= ev["created"] <= after, ev
            assert ev["ride"]["ride"] == r and ev["ride"]["state"] == STATES[ev["type"]], ev
            assert ("receipt" in ev["ride"]) == (ev["type"] == "ride.ended"), ev
        assert seen[-1]["event"]["ride"]["receipt"]["reason"] == "rider"
    assert len({e["id"] for e in rx.log}) == 8
    # The server's delivery log says the same: per ride, each event refused, retried 1 s later, delivered.
    log = [m.groups() for m in map(DELIVERY_LOG.search, srv.lines) if m]
    print("\ndelivery log:\n" + "\n".join(l for l in srv.lines if DELIVERY_LOG.search(l)))
    for r in rides:
        ids = [e["id"] for e in rx.log if e["ride"] == r][::2]
        assert [(i, n, res, out[:8]) for i, ride, n, res, out in log if ride == r] == \
            [(i, n, res, out) for i in ids for n, res, out in (("1", "HTTP 503", "retrying"), ("2", "HTTP 204", "delivere"))]


def test_kill9_after_commit_while_the_receiver_is_down_then_the_event_arrives(receivers, secret_file, tmp_path):
    port = free_port()
    url = "http://127.0.0.1:%d/hooks" % port
    store = str(tmp_path / "s.db")
    srv = Server("--webhook", url, "--webhook-secret-file", secret_file, store=store).start()
    try:
        with Client(srv.ws) as cl:
            assert cl.request({"type": "start", "ride": "wh-crash"})["state"] == "riding"
        srv.kill9()  # the transition is committed (replied); nothing was delivered
    finally:
        srv.stop()
    with Server("--webhook", url, "--webhook-secret-file", secret_file, store=store) as srv:
        # The row outlived the kill: pending, and as old as the commit before it.
        assert wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 1) == 1
        assert metric(srv, "ridepush_webhook_oldest_pending_age_seconds") > 0
        rx = receivers(port=port)
        got = rx.wait_delivered(1, timeout=20)
        wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 0)
    assert [(e["type"], e["ride"], e["verified"]) for e in got] == [("ride.started", "wh-crash", True)]


def test_an_auto_end_by_time_limit_is_sent_as_ride_ended(receivers, secret_file):
    rx = receivers()
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file) as srv, Client(srv.ws) as cl:
        assert cl.request({"type": "start", "ride": "wh-limit", "limit": 2})["state"] == "riding"
        got = rx.wait_delivered(2, timeout=15)
    assert [e["type"] for e in got] == ["ride.started", "ride.ended"] and all(e["verified"] for e in got)
    ended = got[1]["event"]["ride"]
    assert ended["state"] == "ended" and ended["receipt"]["reason"] == "time_limit", ended


def test_a_hanging_receiver_does_not_delay_ticks(receivers, secret_file):
    rx = receivers(refuse=1000, hang=True)
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "wh-watched"})
        cl.request({"type": "subscribe", "ride": "wh-watched"})
        cl.wait_for(lambda m: m["type"] == "tick")
        got, stop = [], threading.Event()
        th = threading.Thread(target=watch_ticks, args=(cl, "wh-watched", 6, got, stop))
        th.start()
        # More transitions than the sender has workers, every one of them held by the receiver.
        with Client(srv.ws) as other:
            for i in range(8):
                other.request({"type": "start", "ride": "wh-hang-%d" % i})
        th.join(10)
        hung = len(rx.log)
    late = [round(t - m["at"]) for m, t in got]
    print("\nticks while the receiver hangs: %d, lateness ms min %d median %d max %d; %d sends held"
          % (len(got), min(late), sorted(late)[len(late) // 2], max(late), hung))
    assert hung >= 2, rx.log  # the receiver really was holding sends while ticks went out
    assert_on_time(got, at_least=5)


def test_an_event_past_its_day_is_dead_and_listed_for_ops_tokens_only(secret_file, tmp_path):
    url = "http://127.0.0.1:%d/hooks" % free_port()  # nobody listens: every attempt fails
    store = str(tmp_path / "s.db")
    flags = ("--webhook", url, "--webhook-secret-file", secret_file)
    with Server(*flags, store=store, auth="jwt", env=ENV) as srv, Client(srv.ws + "?token=" + control("alice")) as cl:
        assert cl.request({"type": "start", "ride": "wh-dead"})["state"] == "riding"
    # Stopped, the event is made a day and an hour old: its next failure is its last.
    with sqlite3.connect(store) as db:
        assert db.execute("UPDATE webhook_outbox SET created = created - 90000000, next_attempt_at = 0").rowcount == 1
    with Server(*flags, store=store, auth="jwt", env=ENV) as srv:
        status, body, _ = srv.get("/v1/webhooks/dead")
        assert status == 401 and body["error"]["code"] == "unauthorized", body
        for token in (control("alice"), watch("alice")):
            status, body, _ = srv.get("/v1/webhooks/dead", headers={"Authorization": "Bearer " + token})
            assert status == 403 and body["error"]["code"] == "forbidden", body
        wait_metric(srv, "ridepush_webhook_dead", lambda v: v == 1)
        assert metric(srv, "ridepush_webhook_pending") == 0
        status, body, _ = srv.get("/v1/webhooks/dead", headers={"Authorization": "Bearer " + control("op", ops=True)})
    print("\ndead listing:", json.dumps(body)[:400])
    assert status == 200 and len(body["dead"]) == 1, body
    dead = body["dead"][0]
    assert dead["ride"] == "wh-dead" and dead["endpoint"] == url and dead["attempts"] >= 1, dead
    assert "connect" in dead["last_result"].lower(), dead
    assert dead["event"]["type"] == "ride.started" and dead["event"]["id"] == dead["id"], dead
    assert any("given up (dead)" in l for l in srv.lines)


def test_dead_listing_without_webhooks_is_not_found():
    with Server() as srv:
        status, body, _ = srv.get("/v1/webhooks/dead")
        assert status == 404 and body["error"]["code"] == "not_found", body
        _, text, _ = srv.get("/metrics")
        assert "ridepush_webhook_pending" not in text


@pytest.mark.parametrize("args, message", [
    (["--webhook", "http://127.0.0.1:9/x"], "--webhook needs --webhook-secret-file"),
    (["--webhook", "ftp://127.0.0.1/x", "--webhook-secret-file", "SECRET"], "webhook URL ftp://127.0.0.1/x"),
    (["--webhook", "http://127.0.0.1:9/x", "--webhook-secret-file", "SHORT"], "at least 32 are needed"),
    (["--webhook", "http://127.0.0.1:9/x", "--webhook-secret-file", "MISSING"], "cannot read webhook secret file"),
    (["--outbound-ca-file", "MISSING"], "--outbound-ca-file: TLS: cannot read CA certificates from"),
])
def test_bad_webhook_flags_are_refused_clearly(args, message, secret_file, tmp_path):
    short = tmp_path / "short"
    short.write_text("too short\n")
    files = {"SECRET": secret_file, "SHORT": str(short), "MISSING": str(tmp_path / "nope")}
    args = [files.get(a, a) for a in args]
    r = subprocess.run([BIN, "serve", "--port", "0", "--store", "memory", "--auth", "none", *args],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_each_endpoint_signed_with_its_own_secret_so_a_receiver_cannot_replay_to_another(receivers, secret_file, tmp_path):
    """Issue 36, finding 7: with one secret for every endpoint, what endpoint A received
    verified at endpoint B. With --webhook-secret-file once per --webhook, each endpoint's
    events verify with its key (the scheme unchanged) and not with the other's; one file for
    all still works, and a count that pairs with nothing or a shared key is refused."""
    other_secret = "whsec_other_abcdef0123456789abcdef0123"
    other_file = tmp_path / "other.secret"
    other_file.write_text(other_secret + "\n")
    a, b = receivers(), receivers(secret=other_secret)
    with Server("--webhook", a.url, "--webhook", b.url, "--webhook-secret-file", secret_file,
                "--webhook-secret-file", str(other_file)) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "wh-keys"})
        got_a, got_b = a.wait_delivered(1, timeout=10), b.wait_delivered(1, timeout=10)
    assert [(e["type"], e["verified"]) for e in got_a + got_b] == [("ride.started", True)] * 2
    # What A holds does not verify at B (a replay), nor B's at A.
    assert not verify(got_a[0]["signature"], got_a[0]["body"], secret=other_secret)
    assert not verify(got_b[0]["signature"], got_b[0]["body"], secret=SECRET)
    for files, message in (([secret_file] * 2, "two endpoints share a key"),
                           ([secret_file, str(other_file), secret_file], "given 3 times for 2 --webhook URLs")):
        args = ["--webhook", a.url, "--webhook", b.url] + [x for f in files for x in ("--webhook-secret-file", f)]
        r = subprocess.run([BIN, "serve", "--port", "0", "--store", "memory", "--auth", "none", *args],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and message in r.stderr, r.stderr


def test_webhooks_from_the_environment(receivers, secret_file):
    rx = receivers()
    env = {"RIDEPUSH_WEBHOOK": rx.url, "RIDEPUSH_WEBHOOK_SECRET_FILE": secret_file}
    with Server(env=env) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "wh-env"})
        got = rx.wait_delivered(1, timeout=10)
    assert [(e["type"], e["ride"], e["verified"]) for e in got] == [("ride.started", "wh-env", True)]


def test_https_receiver_behind_a_private_ca(receivers, secret_file, tmp_path):
    """An https endpoint whose certificate the system does not trust: refused (TLS verified,
    nothing sent) until --outbound-ca-file (here its environment variable) names its CA."""
    cert, key = str(tmp_path / "rx.pem"), str(tmp_path / "rx.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=ridepush-test", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    rx = receivers(tls=(cert, key))
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "wh-tls-refused"})
        wait_metric(srv, 'ridepush_webhook_attempts_total{result="connect_error"}', lambda v: v >= 1)
    assert rx.log == []
    env = {"RIDEPUSH_OUTBOUND_CA_FILE": cert}
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file, env=env) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "wh-tls"})
        got = rx.wait_delivered(1, timeout=10)
    assert [(e["type"], e["ride"], e["verified"]) for e in got] == [("ride.started", "wh-tls", True)]


def test_two_nodes_on_postgresql_deliver_every_event_once_and_one_auto_end(pg_db, receivers, secret_file):
    """Both nodes send from the one outbox (leases); a ride's transitions made on either node
    arrive in commit order; both nodes try the time-limit end, one append wins, and the
    refused one carries no event."""
    pg, db = pg_db
    rx = receivers()
    flags = ("--webhook", rx.url, "--webhook-secret-file", secret_file)
    a = Server(*flags, store=pg.uri(db)).start()
    try:
        b = Server(*flags, store=pg.uri(db)).start()
        try:
            with Client(a.ws) as ca, Client(b.ws) as cb:
                for i in range(4):
                    r = "pg-%d" % i
                    assert ca.request({"type": "start", "ride": r})["state"] == "riding"
                    # The next transitions on the other node, once it holds the ride.
                    deadline = time.monotonic() + 5
                    while b.get("/rides/" + r)[1].get("state") != "riding":
                        assert time.monotonic() < deadline, "node B never saw " + r
                        time.sleep(0.05)
                    assert cb.request({"type": "pause", "ride": r})["state"] == "paused"
                    assert cb.request({"type": "resume", "ride": r})["state"] == "riding"
                    assert ca.request({"type": "end", "ride": r})["state"] == "ended"
                started = ca.request({"type": "start", "ride": "pg-limit", "limit": 2})
                assert started["state"] == "riding"
                assert cb.request({"type": "subscribe", "ride": "pg-limit"})["state"] == "riding"
                got = rx.wait_delivered(18, timeout=30)
                time.sleep(1.5)  # a second copy of any event would have arrived by now
        finally:
            b.stop()
    finally:
        a.stop()
    assert all(e["verified"] for e in rx.log)
    assert len(got) == len(rx.delivered()) == 18, [(e["type"], e["ride"]) for e in rx.delivered()]
    assert len({e["id"] for e in got}) == 18, "an event delivered twice"
    for i in range(4):
        assert [e["type"] for e in got if e["ride"] == "pg-%d" % i] == TYPES
    limit = [e for e in got if e["ride"] == "pg-limit"]
    assert [e["type"] for e in limit] == ["ride.started", "ride.ended"]
    assert limit[1]["event"]["ride"]["receipt"]["reason"] == "time_limit"
