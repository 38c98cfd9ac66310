"""The server API (issue 27, item 1) against the real binary: POST /v1/rides and
/v1/rides/{id}/pause|resume|end with Idempotency-Key, over HTTP/1.1 (Debian's lws 4.1.6 fails
POST bodies over HTTP/2). Replays are compared byte for byte; watchers, webhooks, a restart
on a SQLite file and two nodes on one PostgreSQL see what the API did. Every wait is bounded."""
import http.client
import json
import os
import re
import subprocess
import threading
import time
import uuid

import pytest

from pg import pg_db, postgres  # noqa: F401 (fixtures)
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rp import ROOT, Client, Server
from test_security import ENV, control, watch
from test_webhooks import SECRET as WEBHOOK_SECRET, TYPES, Receiver


def post(srv, path, body=None, key="auto", token=None, method="POST", raw=None):
    """(status, raw body bytes, headers) of one request on its own HTTP/1.1 connection."""
    headers = {"Content-Type": "application/json"}
    if key == "auto":
        key = str(uuid.uuid4())
    if key is not None:
        headers["Idempotency-Key"] = key
    if token:
        headers["Authorization"] = "Bearer " + token
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, r.read(), r.headers
    finally:
        conn.close()


def err(body):
    return json.loads(body)["error"]["code"]


@pytest.fixture(scope="module")
def srv():
    with Server(auth="jwt", env=ENV) as s:
        yield s


def rid(tag):
    return "api-%s-%d" % (tag, time.monotonic_ns() % 10**9)


def test_create_replay_reuse_and_the_answer_is_the_ride_as_get_returns_it(srv):
    alice, ride = control("alice"), rid("c")
    body = {"rider": "alice", "ride": ride, "limit": 1800}
    status, first, headers = post(srv, "/v1/rides", body, key="create-" + ride, token=alice)
    assert status == 201 and headers["Content-Type"] == "application/json", first
    doc = json.loads(first)
    assert (doc["ride"], doc["owner"], doc["state"]) == (ride, "alice", "riding")
    _, got, _ = srv.get("/rides/" + ride, headers={"Authorization": "Bearer " + alice})
    assert set(got) == set(doc) and {k: got[k] for k in ("ride", "owner", "state", "started_at", "plan")} == \
        {k: doc[k] for k in ("ride", "owner", "state", "started_at", "plan")}
    time.sleep(1.1)  # the fare and `at` move on; the replay must not
    status2, again, replayed = post(srv, "/v1/rides", body, key="create-" + ride, token=alice)
    assert (status2, again) == (201, first), "replay: the same status and bytes"
    assert replayed["Idempotent-Replayed"] == "true" and headers["Idempotent-Replayed"] is None
    status3, reused, _ = post(srv, "/v1/rides", dict(body, limit=60), key="create-" + ride, token=alice)
    assert (status3, err(reused)) == (422, "idempotency_key_reused")
    # The key is the caller's: another subject's same key is another request.
    status4, bobs, _ = post(srv, "/v1/rides", {"rider": "bob"}, key="create-" + ride, token=control("bob"))
    assert status4 == 201 and json.loads(bobs)["owner"] == "bob"


def test_ops_tokens_are_one_account_for_idempotency_keys(srv):
    """Stripe scopes keys per account: two instances of the operator's backend, each with its
    own `sub`, retrying one request with one key get one ride and the same bytes twice."""
    rider, key = "dana-%d" % (time.monotonic_ns() % 10**9), str(uuid.uuid4())
    status, first, headers = post(srv, "/v1/rides", {"rider": rider}, key=key, token=control("backend-1", ops=True))
    assert status == 201 and headers["Idempotent-Replayed"] is None, first
    status2, second, headers2 = post(srv, "/v1/rides", {"rider": rider}, key=key, token=control("backend-2", ops=True))
    assert (status2, second) == (201, first), "the same bytes: no second ride (its id would differ)"
    assert headers2["Idempotent-Replayed"] == "true"
    _, listing, _ = srv.get("/rides?rider=" + rider, headers={"Authorization": "Bearer " + control("ops", ops=True)})
    assert [r["ride"] for r in listing["rides"] if r.get("owner") == rider] == [json.loads(first)["ride"]]


def test_the_listing_filters_by_rider_and_refuses_unknown_parameters(srv):
    """`GET /rides?rider=` lists only that rider's rides, with `state=` and the paging the
    listing has; a parameter it does not know is 400, as on /quote, not ignored."""
    ops = {"Authorization": "Bearer " + control("backend", ops=True)}
    tag = time.monotonic_ns() % 10**9
    alice, bob = "alice-%d" % tag, "bob-%d" % tag
    mine = [json.loads(post(srv, "/v1/rides", {"rider": alice}, token=control(alice))[1])["ride"] for _ in range(3)]
    assert post(srv, "/v1/rides", {"rider": bob}, token=control(bob))[0] == 201
    assert post(srv, "/v1/rides/%s/end" % mine[0], token=control(alice))[0] == 200

    status, page, _ = srv.get("/rides?rider=" + alice, headers=ops)
    assert status == 200 and sorted(r["ride"] for r in page["rides"]) == sorted(mine), page
    assert {r["owner"] for r in page["rides"]} == {alice}
    _, ended, _ = srv.get("/rides?state=ended&rider=" + alice, headers=ops)
    assert [r["ride"] for r in ended["rides"]] == [mine[0]]
    _, riding, _ = srv.get("/rides?state=riding&rider=" + alice, headers=ops)
    assert sorted(r["ride"] for r in riding["rides"]) == sorted(mine[1:])
    # Paged one at a time: every ride of hers once, and nobody else's.
    seen, cursor = [], None
    for _ in range(5):
        _, p, _ = srv.get("/rides?limit=1&rider=%s%s" % (alice, "&cursor=" + cursor if cursor else ""), headers=ops)
        seen += [r["ride"] for r in p["rides"]]
        cursor = p.get("next")
        if not cursor:
            break
    assert sorted(seen) == sorted(mine)

    status, body, _ = srv.get("/rides?bogus=1", headers=ops)
    assert status == 400 and body["error"]["code"] == "bad_request" and "bogus" in body["error"]["message"], body
    assert srv.get("/rides?ridr=" + alice, headers=ops)[0] == 400, "a misspelt filter lists nothing rather than everyone"
    assert srv.get("/rides?rider=%s&rider=%s" % (alice, bob), headers=ops)[0] == 400


def test_each_transition_and_its_errors(srv):
    alice, ride = control("alice"), rid("t")
    assert post(srv, "/v1/rides", {"rider": "alice", "ride": ride}, token=alice)[0] == 201
    for verb, state in (("pause", "paused"), ("resume", "riding")):
        status, body, _ = post(srv, "/v1/rides/%s/%s" % (ride, verb), token=alice)
        assert status == 200 and json.loads(body)["state"] == state, body
    status, body, _ = post(srv, "/v1/rides/%s/resume" % ride, token=alice)
    assert (status, err(body)) == (409, "invalid_transition")
    status, body, _ = post(srv, "/v1/rides/%s/end" % ride, {"distance": 1200}, token=alice)
    ended = json.loads(body)
    assert status == 200 and ended["state"] == "ended" and ended["receipt"]["distance"] == 1200, body
    assert ended["receipt"]["reason"] == "rider"
    for verb in ("pause", "end"):
        status, body, _ = post(srv, "/v1/rides/%s/%s" % (ride, verb), token=alice)
        assert (status, err(body)) == (409, "invalid_transition")
    status, body, _ = post(srv, "/v1/rides/no-such-ride/end", token=alice)
    assert (status, err(body)) == (404, "ride_not_found")
    # Duplicate ride id (another key): a conflict, not the first ride's answer.
    status, body, _ = post(srv, "/v1/rides", {"rider": "alice", "ride": ride}, token=alice)
    assert (status, err(body)) == (409, "conflict")


def test_refusals_before_anything_is_decided(srv):
    alice = control("alice")
    cases = [
        (dict(path="/v1/rides", body={"rider": "alice"}, key=None, token=alice), 400, "bad_request"),
        (dict(path="/v1/rides", body={"rider": "alice"}, key="k" * 65, token=alice), 400, "bad_request"),
        (dict(path="/v1/rides", body={"rider": "alice"}, token=None), 401, "unauthorized"),
        (dict(path="/v1/rides", body={"rider": "alice"}, token="not.a.token"), 401, "unauthorized"),
        (dict(path="/v1/rides", body={"rider": "alice", "limt": 5}, token=alice), 400, "bad_request"),
        (dict(path="/v1/rides", raw=b"{not json", token=alice), 400, "bad_request"),
        (dict(path="/v1/rides", raw=b" " * 5000, token=alice), 413, "too_large"),
        (dict(path="/v1/rides", body={"rider": "bob"}, token=alice), 403, "forbidden"),
        (dict(path="/v1/rides", body={"rider": "alice"}, token=watch("alice")), 403, "forbidden"),
        (dict(path="/v1/rides/x/fly", token=alice), 404, "not_found"),
        (dict(path="/v1/rides", method="GET", key=None), 405, "method_not_allowed"),
        (dict(path="/v1/rides/x/end", method="GET", key=None), 405, "method_not_allowed"),
        (dict(path="/v1/rides/x/end", method="PUT", key=None), 405, "method_not_allowed"),
    ]
    # A chunked body (no Content-Length) is refused as such, not read as empty.
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request("POST", "/v1/rides", body=iter([b'{"rider":"alice"}']), encode_chunked=True,
                     headers={"Authorization": "Bearer " + alice, "Idempotency-Key": "chunked", "Content-Type": "application/json"})
        r = conn.getresponse()
        assert (r.status, err(r.read())) == (400, "bad_request")
    finally:
        conn.close()
    for kw, status, code in cases:
        path = kw.pop("path")
        got, body, headers = post(srv, path, **kw)
        assert (got, err(body)) == (status, code), (path, kw, body)
        if status == 405 and kw.get("method") == "GET":
            assert headers["Allow"] == "POST"
    assert post(srv, "/v1/rides", {"rider": "alice"}, key="k" * 64, token=alice)[0] == 201, "64 bytes is a key"


def test_another_riders_ride_is_403_and_an_ops_token_acts_on_any(srv):
    ride = rid("o")
    assert post(srv, "/v1/rides", {"rider": "alice", "ride": ride}, token=control("alice"))[0] == 201
    status, body, _ = post(srv, "/v1/rides/%s/pause" % ride, token=control("bob"))
    assert (status, err(body)) == (403, "forbidden")
    assert post(srv, "/v1/rides/%s/pause" % ride, token=watch("alice"))[0] == 403
    # The operator's backend: starts rides for any rider and ends any ride.
    backend = control("backend", ops=True)
    other = rid("o2")
    status, body, _ = post(srv, "/v1/rides", {"rider": "carol", "ride": other}, token=backend)
    assert status == 201 and json.loads(body)["owner"] == "carol"
    status, body, _ = post(srv, "/v1/rides/%s/end" % ride, token=backend)
    assert status == 200 and json.loads(body)["receipt"]["reason"] == "operator"


def test_the_riders_websocket_sees_api_transitions_and_controls_the_ride(srv):
    alice, ride = control("alice"), rid("w")
    backend = control("backend", ops=True)
    assert post(srv, "/v1/rides", {"rider": "alice", "ride": ride}, token=backend)[0] == 201
    with Client(srv.ws + "?token=" + alice) as app:
        assert app.request({"type": "subscribe", "ride": ride})["state"] == "riding"
        for verb, state in (("pause", "paused"), ("resume", "riding")):
            assert post(srv, "/v1/rides/%s/%s" % (ride, verb), token=backend)[0] == 200
            push = app.wait_for(lambda m: m["type"] == "state" and m.get("ride") == ride and m["state"] == state, timeout=3)
            assert "id" not in push
        # The rider's own token controls the API-started ride as if it had started it.
        assert app.request({"type": "pause", "ride": ride})["state"] == "paused"
        assert post(srv, "/v1/rides/%s/end" % ride, {"distance": 300}, token=backend)[0] == 200
        push = app.wait_for(lambda m: m["type"] == "state" and m.get("ride") == ride and m["state"] == "ended", timeout=3)
        assert push["receipt"]["distance"] == 300


def test_a_retried_end_after_a_restart_gets_the_same_bytes(tmp_path):
    store = str(tmp_path / "rides.db")
    with Server(store=store) as srv:
        assert post(srv, "/v1/rides", {"rider": "alice", "ride": "api-restart"}, key="c1")[0] == 201
        status, ended, _ = post(srv, "/v1/rides/api-restart/end", {"distance": 50}, key="end-1")
        assert status == 200
    with Server(store=store) as srv:
        status, again, _ = post(srv, "/v1/rides/api-restart/end", {"distance": 50}, key="end-1")
        assert (status, again) == (200, ended), "the retry after a restart is the first answer"
        status, body, _ = post(srv, "/v1/rides/api-restart/end", {"distance": 51}, key="end-1")
        assert (status, err(body)) == (422, "idempotency_key_reused")
        status, body, _ = post(srv, "/v1/rides/api-restart/end", {"distance": 50}, key="end-2")
        assert (status, err(body)) == (409, "invalid_transition"), "a new key is a new request"


def test_two_nodes_sharing_postgresql_give_the_same_answer_for_the_same_key(pg_db):
    pg, db = pg_db
    uri = pg.uri(db)
    a, b = Server(store=uri).start(), Server(store=uri).start()
    try:
        status, first, _ = post(a, "/v1/rides", {"rider": "alice", "ride": "api-pg"}, key="pg-1")
        assert status == 201
        assert post(b, "/v1/rides", {"rider": "alice", "ride": "api-pg"}, key="pg-1")[:2] == (201, first)
        assert post(b, "/v1/rides", {"rider": "alice", "ride": "api-pg2"}, key="pg-1")[0] == 422
        # The same key on both nodes at once, no ride id: one ride is created, and every
        # answer is that ride's (at once, or after a retry of a 409 idempotency_key_in_flight).
        outcomes = []
        for n in range(10):
            key, results = "pg-race-%d" % n, {}
            go = threading.Barrier(2)

            def send(node):
                go.wait(5)
                results[node.port] = post(node, "/v1/rides", {"rider": "racer-%d" % n}, key=key)
            threads = [threading.Thread(target=send, args=(node,)) for node in (a, b)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(15)
            answers = list(results.values())
            assert len(answers) == 2
            ok = [body for status, body, _ in answers if status == 201]
            assert ok, answers
            outcomes.append(sorted("%d%s" % (st, " " + err(b) if st >= 400 else "") for st, b, _ in answers))
            for status, body, _ in answers:
                if status == 409:
                    assert err(body) in ("idempotency_key_in_flight", "conflict"), body
                    status, body, _ = post(b, "/v1/rides", {"rider": "racer-%d" % n}, key=key)
                assert (status, body) == (201, ok[0]), answers
        print("\nsame key on two nodes at once, statuses per round:", outcomes)
        rides = pg.psql("SELECT count(*) FROM ridepush.rides WHERE owner LIKE 'racer-%'", db)
        assert int(rides[0][0]) == 10, "one ride per key"
        # A transition on B for the ride A started: the same bytes from A on retry.
        status, ended, _ = post(b, "/v1/rides/api-pg/end", key="pg-end")
        assert status == 200
        assert post(a, "/v1/rides/api-pg/end", key="pg-end")[:2] == (200, ended)
    finally:
        a.stop()
        b.stop()


def test_api_transitions_fire_webhooks(tmp_path):
    secret = tmp_path / "webhook.secret"
    secret.write_text(WEBHOOK_SECRET + "\n")
    rx = Receiver()
    try:
        with Server("--webhook", rx.url, "--webhook-secret-file", str(secret)) as srv:
            assert post(srv, "/v1/rides", {"rider": "alice", "ride": "api-hook"})[0] == 201
            for verb in ("pause", "resume"):
                assert post(srv, "/v1/rides/api-hook/" + verb)[0] == 200
            status, ended, _ = post(srv, "/v1/rides/api-hook/end", {"distance": 900}, key="hook-end")
            assert status == 200
            # A replay writes no second event.
            assert post(srv, "/v1/rides/api-hook/end", {"distance": 900}, key="hook-end")[:2] == (200, ended)
            got = rx.wait_delivered(4, timeout=20)
            time.sleep(0.5)
        assert [e["type"] for e in rx.log] == TYPES and all(e["verified"] for e in rx.log), rx.log
        assert got[-1]["event"]["ride"]["receipt"] == json.loads(ended)["receipt"]
    finally:
        rx.close()


def guide_backend():
    """The Python block of docs/server-api.md: a backend's side of a rental."""
    with open(os.path.join(ROOT, "docs", "server-api.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M) if "def rent(" in b]
    assert len(blocks) == 1, "one backend example in docs/server-api.md"
    return blocks[0]


def readme_server_api_example():
    """The shell block of README's server API example (the one POST it shows)."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    blocks = [b for b in re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M) if "/v1/rides" in b]
    assert len(blocks) == 1, "one server API example in README.md"
    return blocks[0]


def test_the_readme_server_api_example_runs():
    with Server(auth="jwt", env=ENV) as srv:
        env = dict(os.environ, RIDEPUSH_URL=srv.http, RIDEPUSH_OPS_TOKEN=control("rentals-backend", ops=True))
        runs = [subprocess.run(["bash", "-euo", "pipefail", "-c", readme_server_api_example()], env=env,
                               capture_output=True, text=True, timeout=30) for _ in range(2)]
        for r in runs:
            assert r.returncode == 0 and r.stderr == "", r
        ride = json.loads(runs[0].stdout)
        assert (ride["ride"], ride["owner"], ride["state"]) == ("r-7", "alice", "riding"), ride
        assert runs[1].stdout == runs[0].stdout, "the same Idempotency-Key: the same answer, applied once"
        status, doc, _ = srv.get("/rides/r-7?token=%s" % control("alice"))
        assert status == 200 and doc["owner"] == "alice" and doc["state"] == "riding", doc


def test_the_guide_backend_example_runs(tmp_path, monkeypatch):
    secret = tmp_path / "webhook.secret"
    secret.write_text(WEBHOOK_SECRET + "\n")
    monkeypatch.setenv("RIDEPUSH_OPS_TOKEN", control("rentals-backend", ops=True))
    monkeypatch.setenv("RIDEPUSH_WEBHOOK_SECRET_FILE", str(secret))
    backend, charges, answered, lock = {}, [], [], threading.Lock()

    def charge(rider, amount, currency, idempotency_key):
        with lock:
            charges.append((rider, amount, currency, idempotency_key))

    class Hook(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            status = backend["on_webhook"](self.headers["RidePush-Signature"], body, charge)
            with lock:
                answered.append((json.loads(body)["type"], status, body, self.headers["RidePush-Signature"]))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    hooks = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d/ridepush" % hooks.server_address[1]
        with Server("--webhook", url, "--webhook-secret-file", str(secret), auth="jwt", env=ENV,
                    store=str(tmp_path / "rides.db")) as srv:
            monkeypatch.setenv("RIDEPUSH_URL", srv.http)
            exec(compile(guide_backend(), "docs/server-api.md", "exec"), backend)
            rental, ride = backend["rent"]("alice", "7")
            with Client(srv.ws + "?token=" + control("alice")) as app:
                watched = app.request({"type": "subscribe", "ride": ride})
                assert (watched["state"], watched["owner"]) == ("riding", "alice")
                ended = backend["end_rental"](rental, ride, 1200)
                assert ended["state"] == "ended" and ended["receipt"]["distance"] == 1200
                push = app.wait_for(lambda m: m["type"] == "state" and m["state"] == "ended", timeout=3)
                assert push["receipt"] == ended["receipt"]
                assert backend["end_rental"](rental, ride, 1200) == ended, "a retried end: the same answer"
            deadline = time.monotonic() + 15
            while not charges and time.monotonic() < deadline:
                time.sleep(0.05)
        assert [(t, st) for t, st, _, _ in answered] == [("ride.started", 204), ("ride.ended", 204)], answered
        assert len(charges) == 1 and charges[0][:3] == ("alice", ended["receipt"]["fare"], "KRW"), charges
        assert charges[0][3].startswith("evt_")
        # The receiver refuses a body that is not the one signed.
        _, _, body, signature = answered[-1]
        assert backend["on_webhook"](signature, body.replace(b"alice", b"mallory"), charge) == 400
        assert len(charges) == 1
    finally:
        hooks.shutdown()
        hooks.server_close()
