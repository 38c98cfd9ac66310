"""Webhook sending without the server (issue 27, item 2's pure parts): ridepush-webhook-probe
runs the real encoder, signature, retry schedule, sender state machine and HTTP client over a
memory outbox; the receiver here is Python's http.server and checks every signature with
Python's hmac. Wiring into the server's transition path is separate work."""
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rp import BIN

PROBE = os.path.join(os.path.dirname(BIN), "ridepush-webhook-probe")
SECRET = "whsec_test_0123456789abcdef0123456789"
TYPES = ["ride.started", "ride.paused", "ride.resumed", "ride.ended"]


def verify(header, body, secret=SECRET, tolerance=300):
    """Stripe-style verification, as docs/webhooks.md shows it."""
    items = [part.split("=", 1) for part in header.split(",") if "=" in part]
    t = int(dict(items)["t"])
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    # Any v1: while a secret is rolled every key signs (test_webhooks_ops.py).
    signed = any(hmac.compare_digest(expected, v) for k, v in items if k == "v1")
    return signed and abs(time.time() - t) <= tolerance


class Receiver:
    """Refuses (or hangs on) the first `refuse` attempts of every event, then answers 204."""

    def __init__(self, refuse=1, status=500, hang=False, always=None):
        self.log, self.lock, self.release = [], threading.Lock(), threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                event = json.loads(body)
                ok = verify(self.headers["RidePush-Signature"], body)
                with receiver.lock:
                    n = 1 + sum(1 for e in receiver.log if e["id"] == event["id"])
                    receiver.log.append({"id": event["id"], "header_id": self.headers["RidePush-Event-Id"],
                                         "type": event["type"], "ride": event["ride"]["id"], "verified": ok,
                                         "attempt": n, "at": time.monotonic(), "body": body})
                if hang and n <= refuse:
                    receiver.release.wait(10)
                code = always or (status if n <= refuse else 204) if ok else 400
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        ThreadingHTTPServer.daemon_threads = True
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/ridepush"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def probe(*args, timeout=60):
    env = dict(os.environ, RIDEPUSH_WEBHOOK_SECRET=SECRET)
    result = subprocess.run([PROBE, *args], capture_output=True, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr.decode()
    lines = [json.loads(l) for l in result.stdout.decode().splitlines()]
    return lines[:-1], lines[-1]


@pytest.fixture
def receiver_factory():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_every_event_arrives_signed_in_commit_order_per_ride_after_refusals(receiver_factory):
    rx = receiver_factory(refuse=1, status=500)
    attempts, summary = probe("send", rx.url, "3", "--limit", "40")
    assert summary["pending"] == 0 and summary["dead"] == 0 and summary["delivered"] == 12, summary
    assert all(e["verified"] for e in rx.log), [e for e in rx.log if not e["verified"]]
    assert all(e["id"] == e["header_id"] and e["id"].startswith("evt_") for e in rx.log)
    # Every event: refused once, then accepted; the same bytes both times.
    by_id = {}
    for e in rx.log:
        by_id.setdefault(e["id"], []).append(e)
    assert len(by_id) == 12 and all(len(v) == 2 and v[0]["body"] == v[1]["body"] for v in by_id.values())
    # Per ride, the accepted deliveries are in commit order, and no event of a ride was even
    # attempted before the one before it was accepted.
    for ride in ("r-0", "r-1", "r-2"):
        seen = [e for e in rx.log if e["ride"] == ride]
        assert [e["type"] for e in seen] == [t for t in TYPES for _ in (1, 2)], seen
    # The probe's log: each refusal retried 1 s later, then delivered on attempt 2.
    retries = [a for a in attempts if a["update"] == "retry"]
    assert len(retries) == 12 and all(a["result"] == "HTTP 500" and 990 <= a["retry_in_ms"] <= 1010 for a in retries)
    assert sorted(a["attempts"] for a in attempts if a["update"] == "delivered") == [2] * 12
    # 1 s between a refusal and its retry at the receiver too.
    for tries in by_id.values():
        assert 0.9 <= tries[1]["at"] - tries[0]["at"] <= 2.5, tries


def test_a_hanging_receiver_costs_the_timeout_then_the_retry_lands(receiver_factory):
    rx = receiver_factory(refuse=1, hang=True)
    started = time.monotonic()
    attempts, summary = probe("send", rx.url, "1", "--timeout", "500", "--limit", "30")
    assert summary["delivered"] == 4 and summary["pending"] == 0, summary
    assert [a["result"] for a in attempts if a["update"] == "retry"] == ["timeout"] * 4
    # Four events in one lane: each costs a 0.5 s timeout and a 1 s wait, not the 10 s hang.
    assert time.monotonic() - started < 12
    assert [e["type"] for e in rx.log if e["attempt"] == 2] == TYPES


def test_dead_after_the_retry_window(receiver_factory):
    rx = receiver_factory(always=503)
    attempts, summary = probe("send", rx.url, "2", "--give-up", "2500", "--limit", "30")
    assert summary["dead"] == 8 and summary["pending"] == 0 and summary["delivered"] == 0, summary
    metrics = summary["metrics"].splitlines()
    assert "ridepush_webhook_dead 8" in metrics and "ridepush_webhook_pending 0" in metrics
    assert 'ridepush_webhook_attempts_total{result="http_error"} ' + str(len(rx.log)) in metrics
    dead = [a for a in attempts if a["update"] == "dead"]
    assert len(dead) == 8 and all(a["result"] == "HTTP 503" for a in dead)
    # Still in order per ride: a dead event lets the next one go, never the other way round.
    for ride in ("r-0", "r-1"):
        firsts = [e["type"] for e in rx.log if e["ride"] == ride and e["attempt"] == 1]
        assert firsts == TYPES


@pytest.mark.parametrize("body", [b'{"id":"evt_1","type":"ride.ended","created":1,"ride":{"id":"r"}}',
                                  "{\"rider\":\"Zoë 李\"}".encode(), b"", bytes(range(256))])
def test_python_hmac_matches_the_swift_signature(body):
    t = int(time.time())
    out = subprocess.run([PROBE, "sign", str(t)], input=body, capture_output=True,
                         env=dict(os.environ, RIDEPUSH_WEBHOOK_SECRET=SECRET), timeout=30)
    assert out.returncode == 0, out.stderr
    header = out.stdout.decode().strip()
    assert header == f"t={t},v1=" + hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert verify(header, body)
    assert not verify(header, body + b" ")
    assert not verify(header, body, secret=SECRET + "x")


def doc_snippet(language):
    text = open(os.path.join(os.path.dirname(__file__), "..", "docs", "webhooks.md"), encoding="utf-8").read()
    blocks = text.split("```" + language + "\n")
    assert len(blocks) == 2, f"docs/webhooks.md should hold one {language} block"
    return blocks[1].split("```", 1)[0]


def signed_by_swift(body, t):
    out = subprocess.run([PROBE, "sign", str(t)], input=body, capture_output=True,
                         env=dict(os.environ, RIDEPUSH_WEBHOOK_SECRET=SECRET), timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode().strip()


CASES = [  # (what is checked, body given to the verifier, age of t in seconds, expected)
    ("as sent", None, 0, True),
    ("a changed body", b" ", 0, False),
    ("ten minutes old", None, 600, False),
]


def test_the_python_snippet_in_the_docs_verifies_swift_signatures():
    namespace = {}
    exec(doc_snippet("python"), namespace)
    body = '{"id":"evt_1","type":"ride.ended","ride":{"rider":"Zoë"}}'.encode()
    for what, extra, age, expected in CASES:
        header = signed_by_swift(body, int(time.time()) - age)
        assert namespace["verify_ridepush"](SECRET.encode(), header, body + (extra or b"")) is expected, what
    header = signed_by_swift(body, int(time.time()))
    assert namespace["verify_ridepush"](b"another secret", header, body) is False
    # A rotation: an unknown scheme and a stale v1 before the valid one.
    assert namespace["verify_ridepush"](SECRET.encode(), header.replace(",v1=", ",v0=x,v1=" + "0" * 64 + ",v1="), body)


def test_the_node_snippet_in_the_docs_verifies_swift_signatures(tmp_path):
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("Node.js is not installed; the Python snippet is checked above")
    script = tmp_path / "verify.js"
    script.write_text(doc_snippet("js") + """
const [secret, header, bodyHex] = process.argv.slice(2);
console.log(String(verifyRidePush(secret, header, Buffer.from(bodyHex, "hex"))));
""")
    body = '{"id":"evt_2","type":"ride.started","ride":{"rider":"李"}}'.encode()
    for what, extra, age, expected in CASES:
        header = signed_by_swift(body, int(time.time()) - age)
        out = subprocess.run([node, str(script), SECRET, header, (body + (extra or b"")).hex()],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(expected).lower(), what
