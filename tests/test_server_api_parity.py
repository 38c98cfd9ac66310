"""The server API does what ride.v1 does (issue 40, items 4 and 5), against the real binary with
`--zones` (test_zones_server.py's Park, where rides may neither start nor end, and Plaza):
GET/HEAD /v1/rides/{id}; POST /v1/rides with lat/lon/vehicle_type judged by the zones; end with
`force` for ops tokens (`operator_forced`) and a rider's force refused; the zones' refusals as
422 with ride.v1's codes; refusals that name the field; and control bytes in a request line. Every wait is bounded."""
import http.client
import json
import socket
import time
import uuid

import pytest

from test_openapi import check
from test_zones_server import LON, connect, serve, sync, token

PARK, PLAZA = 37.5605, 37.5635  # Park only (no start, no end); Plaza only (both allowed)


def call(srv, method, path, body=None, tok=None, key="auto"):
    """(status, body bytes, headers) of one request on its own HTTP/1.1 connection; every
    answer is checked against docs/openapi.yaml (a declared status, a body of its schema)."""
    headers = {}
    if method == "POST":
        headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4()) if key == "auto" else key}
    if tok:
        headers["Authorization"] = "Bearer " + tok
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        check(method, path, r.status, r.headers.get("Content-Type", ""), raw)
        return r.status, raw, r.headers
    finally:
        conn.close()


def error(body):
    e = json.loads(body)["error"]
    return e["code"], e["message"]


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = serve(tmp_path_factory.mktemp("parity"))
    yield s
    s.stop()


def test_create_takes_a_position_and_vehicle_type_and_the_zones_judge_it(srv):
    ops = token("backend", ops=True)
    status, body, _ = call(srv, "POST", "/v1/rides", {"rider": "alice", "ride": "p-park", "lat": PARK, "lon": LON}, ops)
    assert (status, *error(body)) == (422, "start_not_allowed", 'rides may not start in zone "Park"'), body
    assert call(srv, "GET", "/v1/rides/p-park", tok=ops)[0] == 404, "nothing was started"
    for bad, message in [({"lat": PLAZA}, '"lat" and "lon" go together'),
                         ({"lat": 91, "lon": LON}, '"lat" must be a number of degrees from -90 to 90'),
                         ({"vehicle_type": "e bike"}, '"vehicle_type" must be a GBFS vehicle type id'),
                         ({"limit": "60"}, '"limit" must be a whole number of seconds, 1 or more (got a string)')]:
        status, body, _ = call(srv, "POST", "/v1/rides", dict({"rider": "alice"}, **bad), ops)
        assert status == 400 and error(body)[1].startswith(message), (bad, body)
    status, body, _ = call(srv, "POST", "/v1/rides", {"rider": "a\u0001b"}, ops)
    assert (status, error(body)[1]) == (400, '"rider" holds a control character (U+0000-U+001F, U+007F)'), body
    # In Plaza, with a vehicle type and an integer-valued float for the limit.
    status, body, _ = call(srv, "POST", "/v1/rides", {"rider": "alice", "ride": "p-plaza", "lat": PLAZA, "lon": LON,
                                                      "vehicle_type": "scooter", "limit": 600.0}, ops)
    assert status == 201, body
    doc = json.loads(body)
    assert (doc["ride"], doc["owner"], doc["state"], doc["limit"]) == ("p-plaza", "alice", "riding", 600)


def test_get_v1_ride_is_the_document_of_get_rides_for_whom_may_read_it(srv):
    alice, bob, ops = token("alice"), token("bob"), token("backend", ops=True)
    status, created, _ = call(srv, "POST", "/v1/rides", {"rider": "alice", "ride": "p-read"}, alice)
    assert status == 201, created
    status, body, headers = call(srv, "GET", "/v1/rides/p-read", tok=alice)
    assert status == 200 and headers["Content-Type"] == "application/json", body
    mine = json.loads(body)
    _, older, _ = srv.get("/rides/p-read", headers={"Authorization": "Bearer " + alice})
    assert set(mine) == set(older) == set(json.loads(created))
    steady = ("ride", "owner", "state", "started_at", "ended_at", "plan", "limit")
    assert {k: mine.get(k) for k in steady} == {k: older.get(k) for k in steady}
    status, body, headers = call(srv, "HEAD", "/v1/rides/p-read", tok=alice)
    assert (status, body, headers["Content-Type"]) == (200, b"", "application/json")
    status, body, _ = call(srv, "GET", "/v1/rides/p-read", tok=ops)
    assert status == 200 and json.loads(body)["journal"][0]["event"] == "start", "operators get the journal, as on /rides/{id}"
    assert (call(srv, "GET", "/v1/rides/p-read", tok=bob)[0], error(call(srv, "GET", "/v1/rides/p-read", tok=bob)[1])[0]) == \
        (403, "forbidden")
    status, body, _ = call(srv, "GET", "/v1/rides/p-nope", tok=ops)
    assert (status, error(body)[0]) == (404, "ride_not_found")
    assert call(srv, "GET", "/v1/rides/p-read", tok=None)[0] == 401
    status, body, _ = call(srv, "GET", "/v1/rides/p-read?jurnal=1", tok=alice)
    assert status == 400 and 'unknown parameter "jurnal"' in error(body)[1], body
    status, body, headers = call(srv, "POST", "/v1/rides/p-read", {}, alice)
    assert (status, headers["Allow"]) == (405, "GET, HEAD"), body


def test_end_is_judged_by_the_zones_and_an_operator_may_force_it(srv):
    alice, ops = token("alice"), token("backend", ops=True)
    assert call(srv, "POST", "/v1/rides", {"rider": "alice", "ride": "p-end"}, ops)[0] == 201
    # No position with zones configured: the end asks for one, 422 with ride.v1's code and words.
    status, body, _ = call(srv, "POST", "/v1/rides/p-end/end", {}, alice)
    assert (status, *error(body)) == (422, "position_required", 'no position from ride "p-end" in the last 60 s'), body
    status, body, _ = call(srv, "POST", "/v1/rides/p-end/end", {"force": True}, alice)
    assert (status, error(body)[0]) == (403, "forbidden") and '"force" is for operator (ops) tokens' in error(body)[1], body
    # The app reports the scooter in the Park: now the end is refused there.
    rider = connect(srv, "alice")
    try:
        rider.send({"type": "position", "ride": "p-end", "lat": PARK, "lon": LON, "at": int(time.time() * 1000), "accuracy": 5})
        sync(rider, "p-end")
    finally:
        rider.close()
    for tok in (alice, ops):
        status, body, _ = call(srv, "POST", "/v1/rides/p-end/end", {}, tok)
        assert (status, *error(body)) == (422, "end_not_allowed", 'rides may not end in zone "Park"'), body
    # The operator's forced end, with an integer-valued float distance (the operator's word wins).
    key = str(uuid.uuid4())
    status, forced, headers = call(srv, "POST", "/v1/rides/p-end/end", {"force": True, "distance": 1200.0}, ops, key=key)
    assert status == 200 and headers["Idempotent-Replayed"] is None, forced
    receipt = json.loads(forced)["receipt"]
    assert (receipt["reason"], receipt["distance"]) == ("operator_forced", 1200), receipt
    status, again, headers = call(srv, "POST", "/v1/rides/p-end/end", {"force": True, "distance": 1200.0}, ops, key=key)
    assert (status, again, headers["Idempotent-Replayed"]) == (200, forced, "true")
    status, body, _ = call(srv, "GET", "/v1/rides/p-end", tok=alice)
    assert status == 200 and json.loads(body)["receipt"]["reason"] == "operator_forced"


def raw_get(srv, target):
    """The status line and body of `GET target` sent byte for byte, or None when the server
    closed the connection without a byte."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        s.sendall(b"GET " + target.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


def test_control_bytes_in_the_request_line_are_400(srv):
    for target in ["/rides/a%01", "/quote?seconds=60&plan=a%7F", "/v1/rides/p-read%1F"]:
        line, body = raw_get(srv, target)
        assert " 400 " in line and error(body)[0] == "bad_request", (target, line, body)
    # lws ends the request line at a decoded CR or LF: the request is refused, not answered
    # for the path before it (it was: /v1/rides/a%0Ab got "no ride \"a\"").
    for target in ["/v1/rides/a%0Ab", "/quote?seconds=60&plan=a%0Db"]:
        line, body = raw_get(srv, target)
        assert " 400 " in line and "%0D or %0A" in error(body)[1], (target, line, body)
    # A NUL (%00): tests/test_request_nul.py.
