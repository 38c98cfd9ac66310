"""The golden ride.v1 messages in protocol/examples against the real server and the page.

The Swift tests (Tests/RideProtocolTests/GoldenTests.swift) decode and re-encode every file
byte for byte; here the real server's messages must have the same keys and value types as
the golden of the same name, every client golden must be accepted by the server, and
public/app.js must handle exactly the server message types and close codes the goldens name.
The operator feed's goldens (protocol/examples/ops/) are held to the real server the same way,
and public/ops/ (its modules) to their types. The pages' socket is pinned to close-codes.json (the codes
it stops on) and the ops console's fleet row positions to protocol/examples/ops/fleet-row.json.
"""
import json
import os
import re
import time

import pytest

from rp import ROOT, Client, Server
from test_security import ENV, control

EXAMPLES = os.path.join(ROOT, "protocol", "examples")


def golden(side):
    d = os.path.join(EXAMPLES, side)
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                out[name[:-5]] = json.load(f)
    return out


SERVER = golden("server")
CLIENT = golden("client")
OPS_SERVER = golden(os.path.join("ops", "server"))
OPS_CLIENT = golden(os.path.join("ops", "client"))
# Zones (docs/zones.md): ride.v1 messages of their own folder, sent only where zones are loaded.
ZONES_SERVER = golden(os.path.join("zones", "server"))
with open(os.path.join(EXAMPLES, "close-codes.json"), encoding="utf-8") as f:
    CLOSE_CODES = {int(k): v for k, v in json.load(f).items()}


def shape(v):
    """Keys and JSON types, recursively: what a decoder relies on."""
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v]
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    if v is None:
        return "null"
    raise TypeError(v)


def collect(srv):
    """One of every server message, from the real server, keyed like the golden files."""
    got = {}
    with Client(srv.ws) as c:
        got["authenticated"] = c.request({"type": "auth", "id": "q1", "token": control("u1")})
        got["state.riding"] = c.request({"type": "start", "ride": "r-42", "plan": "default", "limit": 1800})
        got["state.subscribed"] = c.request({"type": "subscribe", "ride": "r-42"})
        got["tick.limit"] = c.wait_for(lambda m: m["type"] == "tick" and m["ride"] == "r-42", 3)
        got["state.paused"] = c.request({"type": "pause", "ride": "r-42"})
        c.request({"type": "start", "ride": "r-43"})
        c.request({"type": "subscribe", "ride": "r-43"})
        got["tick"] = c.wait_for(lambda m: m["type"] == "tick" and m["ride"] == "r-43", 3)
        # 301 s of limit: the 5-minute warning comes within about a second.
        c.request({"type": "start", "ride": "r-44", "limit": 301})
        c.request({"type": "subscribe", "ride": "r-44"})
        got["warning"] = c.wait_for(lambda m: m["type"] == "warning", 4)
        got["share"] = c.request({"type": "share", "ride": "r-43"})
        got["state.ended"] = c.request({"type": "end", "ride": "r-43", "distance": 1200})
        got["unsubscribed"] = c.request({"type": "unsubscribe", "ride": "r-44"})
        got["quote"] = c.request({"type": "quote", "plan": "default", "seconds": 192, "paused": 30})
        got["error.ride_not_found"] = c.request({"type": "get", "ride": "r-404"})
        c.send("not json")
        got["error.bad_request"] = c.wait_for(lambda m: m["type"] == "error" and "id" not in m, 3)
    return got


def collect_ops(srv):
    """One of every operator feed message, from the real server, keyed like protocol/examples/ops.
    The server is shared with collect(): snapshot and fleet are cut to this test's ride, the
    goldens hold one."""
    got = {}
    with Client(srv.ws) as rider, Client(srv.ws) as op:
        rider.request({"type": "auth", "token": control("u1")})
        op.request({"type": "auth", "token": control("op", ops=True)})
        rider.request({"type": "start", "ride": "r-ops-1", "limit": 1800})
        rider.request({"type": "subscribe", "ride": "r-ops-1"})
        snap = op.request({"type": "watch_all", "id": "w1"})
        assert snap["type"] == "snapshot" and not snap["more"], snap
        got["snapshot"] = dict(snap, rides=[r for r in snap["rides"] if r["ride"] == "r-ops-1"])
        fleet = op.wait_for(lambda m: m["type"] == "fleet" and any(r[0] == "r-ops-1" for r in m["rows"]), 3)
        got["fleet"] = dict(fleet, rows=[r for r in fleet["rows"] if r[0] == "r-ops-1"])
        rider.request({"type": "pause", "ride": "r-ops-1"})
        got["fleet_event"] = op.wait_for(lambda m: m["type"] == "fleet_event" and m["event"] == "pause", 3)
        # Ended at once: no pause, under a minute, so its receipt lines and journal are fixed.
        rider.request({"type": "start", "ride": "r-ops-3"})
        rider.request({"type": "end", "ride": "r-ops-3", "distance": 1200})
        got["state.journal"] = op.request({"type": "get", "id": "g1", "ride": "r-ops-3"})
        rider.request({"type": "start", "ride": "r-ops-2", "limit": 301})
        got["fleet_warning"] = op.wait_for(lambda m: m["type"] == "fleet_warning" and m["ride"] == "r-ops-2", 4)
        got["unwatched_all"] = op.request({"type": "unwatch_all", "id": "u1"})
    return got


def test_every_server_golden_has_a_real_counterpart_and_back():
    assert sorted(SERVER) == sorted(
        ["authenticated", "error.bad_request", "error.ride_not_found", "quote", "share", "state.ended",
         "state.paused", "state.riding", "state.subscribed", "tick", "tick.limit", "unsubscribed", "warning"])


@pytest.mark.parametrize("name", sorted(SERVER))
def test_real_server_message_has_the_goldens_keys_and_types(real, name):
    assert shape(real[name]) == shape(SERVER[name]), name
    # Same key order too: the Swift round trip holds the golden bytes to the server's order.
    assert list(real[name]) == list(SERVER[name])


def test_every_server_type_in_the_goldens_is_one_the_protocol_module_knows():
    types = {m["type"] for m in SERVER.values()}
    assert types == {"authenticated", "error", "quote", "share", "state", "tick", "unsubscribed", "warning"}


@pytest.fixture(scope="module")
def srv():
    # One rider starts a ride per golden: room for them all under the open-rides cap.
    with Server("--max-open-rides-per-rider", "100", auth="jwt", env=ENV) as s:
        yield s


@pytest.fixture(scope="module")
def real(srv):
    return collect(srv)


@pytest.mark.parametrize("name", sorted(CLIENT))
def test_every_client_golden_is_accepted_by_the_server(srv, name):
    with Client(srv.ws) as c:
        c.request({"type": "auth", "token": control("u1")})
        ride = "r-golden-" + name
        c.request({"type": "start", "ride": ride})
        msg = dict(CLIENT[name])
        if msg["type"] == "auth":
            msg["token"] = control("u1")
        if "ride" in msg:
            msg["ride"] = ride + "-new" if msg["type"] == "start" else ride
        if msg["type"] == "resume":
            c.request({"type": "pause", "ride": ride})
        reply = c.request(msg)
        assert reply["id"] == msg["id"]
        assert reply["type"] != "error", reply


def test_client_goldens_cover_every_client_message_type():
    assert sorted(m["type"] for m in CLIENT.values()) == sorted(
        ["auth", "end", "get", "pause", "quote", "resume", "share", "start", "subscribe", "unsubscribe"])


# ---- the operator feed -----------------------------------------------------------------------

def test_ops_goldens_name_every_feed_message():
    assert sorted(OPS_SERVER) == ["fleet", "fleet_event", "fleet_warning", "snapshot", "state.journal", "unwatched_all"]
    assert sorted(m["type"] for m in OPS_CLIENT.values()) == ["unwatch_all", "watch_all"]


@pytest.fixture(scope="module")
def real_ops(srv):
    return collect_ops(srv)


@pytest.mark.parametrize("name", sorted(OPS_SERVER))
def test_real_ops_message_has_the_goldens_keys_and_types(real_ops, name):
    assert shape(real_ops[name]) == shape(OPS_SERVER[name]), name
    assert list(real_ops[name]) == list(OPS_SERVER[name])


@pytest.mark.parametrize("name", sorted(OPS_CLIENT))
def test_every_ops_client_golden_is_answered_by_the_server(srv, name):
    msg = OPS_CLIENT[name]
    with Client(srv.ws) as c:
        c.request({"type": "auth", "token": control("op", ops=True)})
        reply = c.request(msg)
        assert (reply["type"], reply["id"]) == ({"watch_all": "snapshot", "unwatch_all": "unwatched_all"}[msg["type"]], msg["id"])


# Feed types that only answer a client message of this type.
OPS_REPLY_ONLY = {"unwatched_all": "unwatch_all"}


def test_the_ops_console_handles_every_feed_message_type_it_can_receive():
    src = ops_js()
    handled = set(re.findall(r"case '([a-z_]+)':", src))
    sent = set(re.findall(r"request\('([a-z_]+)'", src))
    assert "watch_all" in sent
    known = {m["type"] for m in OPS_SERVER.values()} | {m["type"] for m in SERVER.values()}
    assert handled <= known, "ops.js handles types the server never sends: %s" % (handled - known)
    for t in {m["type"] for m in OPS_SERVER.values()} - handled:
        assert t in OPS_REPLY_ONLY and OPS_REPLY_ONLY[t] not in sent, "ops.js does not handle %r, which the server sends it" % t


# ---- the page ---------------------------------------------------------------------------

def app_js():
    """The rider page's code: app.js, its modules in ride/ and the socket module it shares
    with the ops console."""
    src = ""
    names = ["app.js", "socket.js"] + sorted(os.path.join("ride", n) for n in os.listdir(os.path.join(ROOT, "public", "ride")))
    for name in names:
        with open(os.path.join(ROOT, "public", name), encoding="utf-8") as f:
            src += f.read()
    return src


def ops_js():
    """The operator console's code: every module in public/ops/."""
    d = os.path.join(ROOT, "public", "ops")
    return "".join(open(os.path.join(d, n), encoding="utf-8").read() for n in sorted(os.listdir(d)) if n.endswith(".js"))


def page_handled_types(src):
    # handle() is a module-level function: it ends at the first closing brace in column 0.
    body = src[src.index("function handle(m"):]
    body = body[:body.index("\n}\n")]
    return set(re.findall(r"case '([a-z_]+)':", body))


# Server types that only answer a client message of this type.
REPLY_ONLY = {"quote": "quote", "authenticated": "auth"}


def test_the_page_handles_every_server_message_type_it_can_receive_and_no_others():
    src = app_js()
    handled = page_handled_types(src)
    types = {m["type"] for m in SERVER.values()} | {m["type"] for m in ZONES_SERVER.values()}
    assert handled <= types, "app.js handles types the server never sends: %s" % (handled - types)
    sent = set(re.findall(r"request\('([a-z_]+)'", src))
    for t in types - handled:
        assert t in REPLY_ONLY and REPLY_ONLY[t] not in sent, \
            "app.js does not handle %r, which the server sends it" % t


def test_the_page_handles_only_close_codes_the_server_sends():
    codes = {int(c) for c in re.findall(r"ev\.code === (\d{4})", app_js())}
    assert codes, "the page reads no close code at all"
    assert codes <= set(CLOSE_CODES), "app.js handles close codes the server never sends: %s" % (codes - set(CLOSE_CODES))


def test_the_server_sends_exactly_the_golden_close_codes():
    sent, echo = set(), set()
    # The service decides the closes (RideService), the adapter carries them out (RidePushServer).
    for target in ("RideService", "RidePushServer"):
        d = os.path.join(ROOT, "Sources", target)
        # RideService's chapter folders included.
        names = [os.path.relpath(os.path.join(root, n), d) for root, _, files in os.walk(d) for n in files if n.endswith(".swift")]
        for name in names:
            with open(os.path.join(d, name), encoding="utf-8") as f:
                for line in f:
                    # The test-only /echo endpoint (serve --ws-echo, for Autobahn) is not ride.v1.
                    (echo if "s.echo" in line else sent).update(int(c) for c in re.findall(r"code: (\d{4})", line))
    assert sent == set(CLOSE_CODES)
    assert echo == {1009}


# ---- the pages pinned to protocol/examples -------------------------------------------------

def read_public(*path):
    with open(os.path.join(ROOT, "public", *path), encoding="utf-8") as f:
        return f.read()


def socket_close_handling(src):
    """{close code: 'stop' | 'reconnect'} as socket.js's onclose treats the codes it names, and
    what it does with every other code."""
    body = src[src.index("ws.onclose = (ev) => {"):]
    body = body[:body.index("\n  };\n")]
    named = {}
    for m in re.finditer(r"if \(((?:ev\.code === \d{4}(?: \|\| )?)+)\) \{(.*?)\n    \}", body, re.S):
        action = "stop" if "'stopped'" in m.group(2) else "reconnect"
        for c in re.findall(r"\d{4}", m.group(1)):
            named[int(c)] = action
    rest = body[body.rindex("}") if named else 0:]
    otherwise = "reconnect" if "this.retry()" in rest else "stop"
    return named, otherwise


def test_the_pages_socket_stops_on_exactly_the_close_codes_that_say_stop():
    """socket.js (the rider page's and the ops console's socket) against close-codes.json: the
    codes whose client action is not a plain reconnect are exactly the codes it stops on, and
    every other code reconnects."""
    named, otherwise = socket_close_handling(read_public("socket.js"))
    assert named, "socket.js names no close code"
    stop = {c for c, v in CLOSE_CODES.items() if v["client"] != "reconnect"}
    assert stop == {4401}, "close-codes.json changed which codes stop a client: %s" % sorted(stop)
    assert {c for c, a in named.items() if a == "stop"} == stop
    assert set(named) <= set(CLOSE_CODES), "socket.js names codes the server never sends: %s" % (set(named) - set(CLOSE_CODES))
    assert otherwise == "reconnect"


def test_the_pages_socket_comes_back_at_once_from_a_draining_node():
    """1012 (a rolling restart, docs/operations.md#rolling-restarts): socket.js reconnects
    within its short jitter, not after the exponential backoff every other code takes."""
    src = read_public("socket.js")
    named, _ = socket_close_handling(src)
    assert named.get(1012) == "reconnect"
    block = src[src.index("if (ev.code === 1012) {"):]
    block = block[:block.index("\n    }")]
    assert "this.retrySoon()" in block and "this.retry()" not in block, block


def test_socket_close_handling_is_read_from_the_code_not_guessed():
    """The parser above reads a change: a second stop code, or stopping on everything."""
    src = read_public("socket.js")
    assert socket_close_handling(src.replace("ev.code === 4401", "ev.code === 4401 || ev.code === 4008")) == \
        ({4401: "stop", 4008: "stop", 1012: "reconnect"}, "reconnect")
    assert socket_close_handling(src.replace("    this.retry();\n  };", "    this.setConn('stopped');\n  };"))[1] == "stop"


def test_every_close_code_a_page_names_is_one_the_server_sends():
    src = app_js() + ops_js()
    codes = {int(c) for c in re.findall(r"\.code === (\d{4})", src)}
    assert codes and codes <= set(CLOSE_CODES), codes - set(CLOSE_CODES)


with open(os.path.join(EXAMPLES, "ops", "fleet-row.json"), encoding="utf-8") as f:
    FLEET_COLUMNS = json.load(f)


def ops_fleet_positions(src):
    """{field: position} as public/ops/feed.js reads a fleet row `x` in onFleet."""
    body = src[src.index("function onFleet(m)"):]
    body = body[:body.index("\n}\n")]
    pos = {k: int(i) for k, i in re.findall(r"\br\.([a-z_]+) = x\[(\d+)\]", body)}
    pos.update({k: int(i) for k, i in re.findall(r"\b(ride): x\[(\d+)\]", body)})
    return pos


def test_the_ops_console_reads_fleet_rows_in_the_examples_order():
    assert FLEET_COLUMNS == ["ride", "state", "elapsed", "paused", "fare", "remaining", "watchers"]
    src = read_public("ops", "feed.js")
    assert ops_fleet_positions(src) == {name: i for i, name in enumerate(FLEET_COLUMNS)}
    # Read from the code: a moved position shows.
    assert ops_fleet_positions(src.replace("r.watchers = x[6]", "r.watchers = x[5]"))["watchers"] == 5


def test_the_fleet_golden_rows_have_the_columns_values():
    """The fleet golden's row, read by the column names, is the snapshot golden's ride a tick on."""
    fleet, snap = OPS_SERVER["fleet"], OPS_SERVER["snapshot"]
    for raw in fleet["rows"]:
        assert len(raw) == len(FLEET_COLUMNS)
        row = dict(zip(FLEET_COLUMNS, raw))
        ride = next(r for r in snap["rides"] if r["ride"] == row["ride"])
        assert row["state"] == ride["state"]
        assert row["elapsed"] >= ride["elapsed"]
        assert row["elapsed"] + row["remaining"] == ride["elapsed"] + ride["remaining"] == ride["limit"]
        assert (row["paused"], row["fare"], row["watchers"]) == (ride["paused"], ride["fare"], ride["watchers"])


def test_the_asyncapi_fleet_row_names_the_examples_columns():
    import contract
    rows = contract.DOC["components"]["schemas"]["Fleet"]["properties"]["rows"]
    assert rows["items"]["x-columns"] == FLEET_COLUMNS
    assert len(rows["items"]["items"]) == len(FLEET_COLUMNS)
