"""Webhooks an operator can run (issue 40, item 6), against the real binary: a secret rolled
with overlap (every key signs), a dead event retried, /healthz showing a receiver that stays
down, per-endpoint event types and a test ping. Receivers verify with Stripe's own library
(`stripe.WebhookSignature.verify_header`: every `v1` is tried, any match passes). Every wait
is bounded."""
import json
import signal
import sqlite3
import time
import urllib.error
import urllib.request

import pytest
import stripe

from pg import pg_db, postgres  # noqa: F401 (fixtures)
from rp import Client, Server
from test_security import ENV, control
from test_webhooks import SECRET, Receiver, free_port, receivers, secret_file, wait_metric  # noqa: F401 (fixtures)

NEW_SECRET = "whsec_new_fedcba9876543210fedcba98765"


def stripe_verify(header, body, secret, tolerance=300):
    """Stripe's own verifier (the `stripe` package's `WebhookSignature.verify_header`), run
    unchanged over RidePush's header: `t` and every `v1`, any match passes, then the age."""
    try:
        return stripe.WebhookSignature.verify_header(body, header, secret, tolerance)
    except stripe.SignatureVerificationError:
        return False


def post(srv, path, token=None):
    req = urllib.request.Request(srv.http + path, data=b"", method="POST",
                                 headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_two_secret_roll_verifies_with_the_old_key_and_with_the_new(receivers, tmp_path):
    """The secret file holds the new key and the old one: every delivery carries two `v1`, so
    a receiver still on the old key and one already on the new both verify. After the old
    line is dropped and SIGHUP, only the new key signs."""
    keys = tmp_path / "webhook.secret"
    keys.write_text(NEW_SECRET + "\n" + SECRET + "\n")
    old, new = receivers(secret=SECRET), receivers(secret=NEW_SECRET)
    with Server("--webhook", old.url, "--webhook", new.url, "--webhook-secret-file", str(keys)) as srv, \
            Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "roll-1"})
        got_old, got_new = old.wait_delivered(1, timeout=10), new.wait_delivered(1, timeout=10)
        for e, secret in ((got_old[0], SECRET), (got_new[0], NEW_SECRET)):
            assert e["signature"].count("v1=") == 2, e["signature"]
            assert stripe_verify(e["signature"], e["body"], secret), e["signature"]
        print("\nduring the roll:", got_new[0]["signature"])
        # The roll ends: the old line goes, the server re-reads the file on SIGHUP.
        keys.write_text(NEW_SECRET + "\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: any("webhooks reloaded" in l for l in srv.lines), 5, "no reload logged")
        cl.request({"type": "end", "ride": "roll-1"})
        after = new.wait_delivered(2, timeout=10)[1]
        wait_until(lambda: len(old.log) >= 2, 10, "the old receiver got nothing")
    assert after["signature"].count("v1=") == 1 and stripe_verify(after["signature"], after["body"], NEW_SECRET)
    assert not stripe_verify(old.log[1]["signature"], old.log[1]["body"], SECRET)  # refused (400) there: the old key is gone
    assert not old.log[1]["verified"]


def test_bad_secret_lines_are_refused_at_start(tmp_path):
    keys = tmp_path / "webhook.secret"
    keys.write_text(NEW_SECRET + "\nshort\n")
    with pytest.raises(RuntimeError, match="line 2 holds 5 bytes; at least 32"):
        Server("--webhook", "http://127.0.0.1:9/x", "--webhook-secret-file", str(keys)).start()


def make_dead(store, flags, ride):
    """A ride started while nobody listens, then its event made a day old: dead at its next try."""
    with Server(*flags, store=store, auth="jwt", env=ENV) as srv, Client(srv.ws + "?token=" + control("alice")) as cl:
        assert cl.request({"type": "start", "ride": ride})["state"] == "riding"
    with sqlite3.connect(store) as db:
        assert db.execute("UPDATE webhook_outbox SET created = created - 90000000, next_attempt_at = 0").rowcount == 1


def test_a_dead_event_retried_is_delivered(receivers, secret_file, tmp_path):
    port = free_port()
    url = "http://127.0.0.1:%d/hooks" % port
    store = str(tmp_path / "s.db")
    flags = ("--webhook", url, "--webhook-secret-file", secret_file)
    make_dead(store, flags, "wh-retry")
    ops = control("op", ops=True)
    with Server(*flags, store=store, auth="jwt", env=ENV) as srv:
        wait_metric(srv, "ridepush_webhook_dead", lambda v: v == 1)
        _, body, _ = srv.get("/v1/webhooks/dead", headers={"Authorization": "Bearer " + ops})
        event_id = body["dead"][0]["id"]
        assert post(srv, "/v1/webhooks/dead/%s/retry" % event_id)[0] == 401
        assert post(srv, "/v1/webhooks/dead/%s/retry" % event_id, control("alice"))[0] == 403
        assert post(srv, "/v1/webhooks/dead/evt_000000000000000000000000/retry", ops)[0] == 404
        assert post(srv, "/v1/webhooks/test/nope", ops)[0] == 404
        rx = receivers(port=port)
        status, answer = post(srv, "/v1/webhooks/dead/%s/retry" % event_id, ops)
        assert status == 200 and answer == {"id": event_id, "requeued": 1}, answer
        got = rx.wait_delivered(1, timeout=10)
        wait_metric(srv, "ridepush_webhook_dead", lambda v: v == 0)
        wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 0)
        _, body, _ = srv.get("/v1/webhooks/dead", headers={"Authorization": "Bearer " + ops})
        assert body == {"dead": []}
        # Retried once: it is not dead any more, so a second retry finds nothing.
        assert post(srv, "/v1/webhooks/dead/%s/retry" % event_id, ops)[0] == 404
    assert [(e["id"], e["type"], e["ride"], e["verified"]) for e in got] == [(event_id, "ride.started", "wh-retry", True)]


def test_a_dead_event_retried_on_postgresql(pg_db, receivers, secret_file):
    pg, db = pg_db
    port = free_port()
    url = "http://127.0.0.1:%d/hooks" % port
    flags = ("--webhook", url, "--webhook-secret-file", secret_file)
    with Server(*flags, store=pg.uri(db)) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "pg-retry"})
        wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 1)
    pg.psql("UPDATE ridepush.webhook_outbox SET created = created - 90000000, next_attempt_at = 0", db=db)
    with Server(*flags, store=pg.uri(db)) as srv:
        wait_metric(srv, "ridepush_webhook_dead", lambda v: v == 1)
        event_id = srv.get("/v1/webhooks/dead")[1]["dead"][0]["id"]
        rx = receivers(port=port)
        assert post(srv, "/v1/webhooks/dead/%s/retry" % event_id) == (200, {"id": event_id, "requeued": 1})
        got = rx.wait_delivered(1, timeout=10)
        wait_metric(srv, "ridepush_webhook_dead", lambda v: v == 0)
    assert [(e["id"], e["ride"], e["verified"]) for e in got] == [(event_id, "pg-retry", True)]


def test_a_dead_event_retried_on_the_memory_store(receivers, secret_file):
    """No clock to turn back in memory: a receiver refusing for 3 s with a retry window of 1 s
    is not possible from outside, so the memory outbox's requeue is covered by its Swift test;
    here the route answers for a store with nothing dead."""
    rx = receivers()
    with Server("--webhook", rx.url, "--webhook-secret-file", secret_file) as srv:
        status, body = post(srv, "/v1/webhooks/dead/evt_000000000000000000000000/retry")
        assert status == 404 and body["error"]["code"] == "not_found", body


def health(srv):
    status, body, _ = srv.get("/healthz")
    return status, body


def test_healthz_degraded_while_a_receiver_stays_down_and_ok_once_it_recovers(receivers, secret_file):
    port = free_port()
    url = "http://127.0.0.1:%d/hooks" % port
    with Server("--webhook", url, "--webhook-secret-file", secret_file, "--webhook-health-age", "1") as srv, \
            Client(srv.ws) as cl:
        status, body = health(srv)
        assert (status, body["status"], body["webhooks"]) == (200, "ok", "ok"), body
        cl.request({"type": "start", "ride": "wh-health"})
        # Nobody listens: the delivery waits, and past 1 s /healthz says so (still 200: the
        # node serves; the receiver is what is down).
        status, body = wait_until(lambda: (lambda h: h if h[1]["webhooks"] == "degraded" else None)(health(srv)), 10,
                                  "never degraded")
        assert status == 200 and body["status"] == "degraded" and body["webhook_oldest_pending_age_ms"] > 1000, body
        print("\n/healthz while the receiver is down:", json.dumps(body))
        rx = receivers(port=port)
        rx.wait_delivered(1, timeout=15)
        status, body = wait_until(lambda: (lambda h: h if h[1]["webhooks"] == "ok" else None)(health(srv)), 5,
                                  "never recovered")
        assert status == 200 and body["status"] == "ok" and body["webhook_oldest_pending_age_ms"] == 0, body


def test_each_endpoint_gets_only_the_event_types_it_asked_for(receivers, secret_file):
    ended, everything = receivers(), receivers()
    with Server("--webhook", ended.url + "#ride.ended", "--webhook", everything.url, "--webhook-secret-file", secret_file) as srv, \
            Client(srv.ws) as cl:
        for cmd in ("start", "pause", "resume", "end"):
            cl.request({"type": cmd, "ride": "wh-types"})
        got_all = everything.wait_delivered(4, timeout=10)
        got_ended = ended.wait_delivered(1, timeout=10)
        wait_metric(srv, "ridepush_webhook_pending", lambda v: v == 0)
    assert [e["type"] for e in got_all] == ["ride.started", "ride.paused", "ride.resumed", "ride.ended"]
    assert [(e["type"], e["verified"]) for e in ended.log] == [("ride.ended", True)]
    assert got_ended[0]["id"] == got_all[3]["id"]  # the same event, one row per endpoint
    with pytest.raises(RuntimeError, match='unknown event type "ride.flew"'):
        Server("--webhook", ended.url + "#ride.flew", "--webhook-secret-file", secret_file).start()


class PingReceiver(Receiver):
    """Records pings (which carry no ride) with their verification."""

    def __init__(self, secret=SECRET, status=204):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading
        self.log, self.lock = [], threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.log.append({"event": json.loads(body), "header_id": self.headers["RidePush-Event-Id"],
                                         "verified": stripe_verify(self.headers["RidePush-Signature"], body, secret)})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        ThreadingHTTPServer.daemon_threads = True
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hooks" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_test_ping_reaches_every_endpoint_signed_and_each_result_is_answered(secret_file):
    good, refusing = PingReceiver(), PingReceiver(status=503)
    down = "http://127.0.0.1:%d/hooks" % free_port()
    try:
        with Server("--webhook", good.url, "--webhook", refusing.url, "--webhook", down, "--webhook-secret-file", secret_file,
                    auth="jwt", env=ENV) as srv:
            assert post(srv, "/v1/webhooks/test", control("alice"))[0] == 403
            status, body = post(srv, "/v1/webhooks/test", control("op", ops=True))
            # Not an event of the outbox: nothing pending, nothing retried.
            _, text, _ = srv.get("/metrics")
            assert "ridepush_webhook_pending 0" in text
    finally:
        good.close()
        refusing.close()
    print("\ntest ping:", json.dumps(body))
    assert status == 200, body
    results = body["results"]
    assert [r["endpoint"] for r in results] == [good.url, refusing.url, down]
    assert results[0] == {"endpoint": good.url, "delivered": True, "status": 204, "error": None}
    assert results[1] == {"endpoint": refusing.url, "delivered": False, "status": 503, "error": "HTTP 503"}
    assert results[2]["delivered"] is False and results[2]["status"] is None and "connect" in results[2]["error"].lower()
    for rx in (good, refusing):
        assert len(rx.log) == 1 and rx.log[0]["verified"], rx.log
        ping = rx.log[0]["event"]
        assert ping["type"] == "ping" and ping["id"] == rx.log[0]["header_id"] and set(ping) == {"id", "type", "created"}


def events(srv, query="", token=None):
    return srv.get("/v1/events" + query, headers={"Authorization": "Bearer " + token} if token else None)[:2]


def test_events_are_listed_for_reconciliation_after_a_restart_paged_and_by_ride(receivers, secret_file, tmp_path):
    """The event log keeps every event once (not once per endpoint), delivered or not, and
    outlives a restart: a backend that missed deliveries lists what it missed after the last
    id it handled, as with Stripe's /v1/events."""
    a, b = receivers(), receivers()
    store = str(tmp_path / "s.db")
    flags = ("--webhook", a.url, "--webhook", b.url + "#ride.ended", "--webhook-secret-file", secret_file)
    with Server(*flags, store=store) as srv, Client(srv.ws) as cl:
        for ride in ("ev-1", "ev-2"):
            for cmd in ("start", "pause", "resume", "end"):
                cl.request({"type": cmd, "ride": ride})
        delivered = a.wait_delivered(8, timeout=15)
        b.wait_delivered(2, timeout=15)
    # Commit order: one client's requests, one after another. Deliveries of two rides may
    # interleave; within a ride they are in commit order.
    sent = [e for ride in ("ev-1", "ev-2") for e in delivered if e["ride"] == ride]
    ops = control("op", ops=True)
    with Server(*flags, store=store, auth="jwt", env=ENV) as srv:
        assert events(srv)[0] == 401
        assert events(srv, token=control("alice"))[0] == 403
        status, body = events(srv, token=ops)
        assert status == 200 and body["has_more"] is False, body
        assert [e["id"] for e in body["events"]] == [e["id"] for e in sent]  # commit order, each once
        assert body["events"][0] == sent[0]["event"]  # the body as POSTed
        # Paged: two at a time, each page after the last id of the one before.
        seen, after = [], None
        while True:
            status, page = events(srv, "?limit=3" + ("&after=" + after if after else ""), token=ops)
            assert status == 200, page
            seen += [e["id"] for e in page["events"]]
            if not page["has_more"]:
                break
            after = page["events"][-1]["id"]
        assert seen == [e["id"] for e in sent]
        status, mine = events(srv, "?ride=ev-2&after=" + sent[0]["id"], token=ops)
        assert [e["type"] for e in mine["events"]] == ["ride.started", "ride.paused", "ride.resumed", "ride.ended"]
        assert {e["ride"]["ride"] for e in mine["events"]} == {"ev-2"}
        for query, code in (("?after=evt_000000000000000000000000", 404), ("?limit=0", 400), ("?limit=501", 400),
                            ("?rider=alice", 400), ("?ride=", 400), ("?limit=2&limit=3", 400)):
            status, body = events(srv, query, token=ops)
            assert status == code, (query, body)
        print("\nGET /v1/events?ride=ev-2 (first):", json.dumps(mine["events"][0])[:300])


def test_events_on_postgresql(pg_db, receivers, secret_file):
    pg, db = pg_db
    rx = receivers()
    flags = ("--webhook", rx.url, "--webhook-secret-file", secret_file)
    with Server(*flags, store=pg.uri(db)) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "pg-ev"})
        cl.request({"type": "end", "ride": "pg-ev"})
        sent = rx.wait_delivered(2, timeout=10)
    with Server(*flags, store=pg.uri(db)) as srv:
        status, body = events(srv, "?ride=pg-ev")
        assert status == 200 and [e["id"] for e in body["events"]] == [e["id"] for e in sent], body
        status, body = events(srv, "?after=" + sent[0]["id"])
        assert [e["type"] for e in body["events"]] == ["ride.ended"] and body["has_more"] is False


def test_without_webhooks_the_event_log_is_not_found():
    with Server() as srv:
        status, body = events(srv)
        assert status == 404 and body["error"]["code"] == "not_found", body


def test_endpoints_from_a_file_added_and_dropped_on_sighup(receivers, secret_file, tmp_path):
    first, second = receivers(), receivers()
    other_secret = "whsec_other_abcdef0123456789abcdef0123"
    other_file = tmp_path / "other.secret"
    other_file.write_text(other_secret + "\n")
    second_rx = receivers(secret=other_secret)
    listing = tmp_path / "endpoints"
    listing.write_text("# billing\n%s#ride.started\n" % first.url)
    with Server("--webhook-endpoints-file", str(listing), "--webhook-secret-file", secret_file) as srv, Client(srv.ws) as cl:
        cl.request({"type": "start", "ride": "ep-1"})
        first.wait_delivered(1, timeout=10)
        # The first endpoint dropped, another added with a key of its own.
        listing.write_text("%s %s\n" % (second_rx.url, other_file))
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: any("webhooks reloaded" in l for l in srv.lines), 5, "no reload logged")
        cl.request({"type": "start", "ride": "ep-2"})
        got = second_rx.wait_delivered(1, timeout=10)
        # A file that no longer loads keeps what is in use.
        listing.write_text("ftp://nowhere/\n")
        srv.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: any("webhooks not reloaded" in l for l in srv.lines), 5, "no refusal logged")
        cl.request({"type": "start", "ride": "ep-3"})
        got = second_rx.wait_delivered(2, timeout=10)
    assert [(e["ride"], e["verified"]) for e in first.log] == [("ep-1", True)]
    assert [(e["ride"], e["verified"]) for e in got] == [("ep-2", True), ("ep-3", True)]
    assert second.log == []
