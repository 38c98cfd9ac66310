"""The contract in the field's own formats, checked by the field's own tools (issue 17):
docs/asyncapi.yaml against what the server really sends (Python jsonschema), /metrics through
`promtool check metrics`, the alerting rules through `promtool check rules` and
`promtool test rules`, and the Grafana dashboard's queries against the metrics /metrics has."""
import glob
import http.client
import json
import os
import re
import resource
import subprocess
import time

import pytest

import contract
from rp import BIN, ROOT, Client, Server
from test_security import ENV, control, watch

PROM = os.path.join(ROOT, "deploy", "prometheus")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "ridepush.json")


def promtool(*args, stdin=None):
    r = subprocess.run(["promtool", *args], input=stdin, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def families(text):
    """{family name: type} from Prometheus text exposition."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def scrape(port):
    """/metrics over a kept-open connection, and the server's open files while it is open."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    body = r.read().decode()
    return r.status, r.getheader("Content-Type"), body, conn


def sample(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


# ---- AsyncAPI -------------------------------------------------------------------------------

def test_asyncapi_document_names_every_message_error_and_close_code():
    doc = contract.DOC
    assert doc["asyncapi"] == "3.0.0"
    assert doc["channels"]["ride"]["address"] == "/ws"
    assert sorted(contract.CLIENT) == ["auth", "end", "get", "pause", "position", "quote", "register_push", "resume",
                                       "share", "start", "subscribe", "unregister_push", "unsubscribe", "unwatch_all",
                                       "watch_all"]
    assert sorted(contract.SERVER) == ["authenticated", "error", "fleet", "fleet_event", "fleet_warning",
                                       "push_registered", "push_unregistered", "quote", "share", "snapshot", "state",
                                       "tick", "unsubscribed", "unwatched_all", "warning", "zone"]
    # Every message in the contract is sent by the server (the push acknowledgements since
    # issue 38's registration was wired).
    assert not_sent_yet() == set()
    # Error codes and close codes: the same sets as docs/protocol.md's tables.
    guide = open(os.path.join(ROOT, "docs", "protocol.md"), encoding="utf-8").read()
    table = guide[guide.index("| code | meaning |"):guide.index("Close codes:")]
    guide_codes = sorted(re.findall(r"^\| `([a-z_]+)` \|", table, re.M))
    schema_codes = sorted(doc["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert schema_codes == guide_codes and len(schema_codes) == 16
    closes = guide[guide.index("Close codes:"):].split("\n\n")[0]
    assert sorted(doc["channels"]["ride"]["x-close-codes"]) == sorted(int(c) for c in re.findall(r"\b(\d{4})\b", closes))
    # A reader is pointed at it, from the protocol's page and from the front door.
    assert "(asyncapi.yaml)" in guide
    assert "docs/asyncapi.yaml" in open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()


def test_schemas_refuse_what_the_protocol_forbids():
    tick = {"type": "tick", "ride": "r-42", "state": "riding", "elapsed": 192, "paused": 0, "fare": 1040,
            "currency": "KRW", "seq": 1234, "at": 1764430000000}
    assert contract.errors(tick) == []
    assert contract.errors(dict(tick, fare=1040.5)) == ["1040.5 is not of type 'integer' at fare"]
    assert contract.errors(dict(tick, extra=1)) == \
        ["Additional properties are not allowed ('extra' was unexpected) at (top)"]
    assert contract.errors({k: v for k, v in tick.items() if k != "seq"}) == ["'seq' is a required property at (top)"]
    assert contract.errors(dict(tick, type="tock")) == ["no server message with type 'tock' in docs/asyncapi.yaml"]
    assert contract.errors({"type": "start", "id": "x" * 64}, "client") == []
    assert contract.errors({"type": "start", "id": "x" * 65}, "client") == ["'%s' is too long at id" % ("x" * 65)]
    assert contract.errors({"type": "error", "code": "oops", "message": "m"})[0].startswith("'oops' is not one of")


def test_position_and_distance_fields_have_their_documented_forms():
    tick = {"type": "tick", "ride": "r-42", "state": "riding", "elapsed": 192, "paused": 0, "fare": 1040,
            "currency": "KRW", "seq": 1234, "at": 1764430000000}
    assert contract.errors(dict(tick, distance=1200, position={"lat": 37.5665, "lon": 126.978, "at": 1764429999000})) == []
    assert contract.errors(dict(tick, position=[37.5665, 126.978])) == []
    assert contract.errors(dict(tick, position=[95, 126.978])) != []
    assert contract.errors(dict(tick, distance=-1)) == ["-1 is less than the minimum of 0 at distance"]
    state = json.load(open(os.path.join(EXAMPLES, "server", "state.riding.json"), encoding="utf-8"))
    assert contract.errors(dict(state, distance=0, position={"lat": 0, "lon": 0, "at": 0})) == []
    assert contract.errors(dict(state, position=[0, 0])) != []     # state carries the object form only
    fleet = {"type": "fleet", "seq": 1, "at": 1764430000000, "counts": {"riding": 2, "paused": 0, "ended": 0},
             "rows": [["r-1", "riding", 1, 0, 500, None, 0], ["r-2", "riding", 1, 0, 500, 1799, 1, [37.5665, 126.978]]]}
    assert contract.errors(fleet) == []
    assert contract.errors(dict(fleet, rows=[["r-2", "riding", 1, 0, 500, 1799, 1, [37.5, 126.9, 1]]])) != []
    assert contract.errors(dict(fleet, rows=[["r-2", "riding", 1, 0, 500, 1799, 1, [37.5, 126.9], 0]])) != []
    start = {"type": "start", "ride": "r-42", "lat": 48.8616, "lon": 2.2892, "vehicle_type": "escooter_paris"}
    assert contract.errors(start, "client") == []
    assert contract.errors({"type": "start", "lat": 48.8616}, "client") == ["'lon' is a dependency of 'lat' at (top)"]
    assert contract.errors(dict(start, vehicle_type="e scooter"), "client") != []
    assert contract.errors({"type": "end", "ride": "r-42", "force": "yes"}, "client") == ["'yes' is not of type 'boolean' at force"]
    position = {"type": "position", "ride": "r-42", "lat": 37.5665, "lon": 126.978, "at": 1764430061000, "accuracy": 8}
    assert contract.errors(position, "client") == []
    assert contract.errors({k: v for k, v in position.items() if k != "accuracy"}, "client") == \
        ["'accuracy' is a required property at (top)"]


def not_sent_yet():
    """Server message types the document marks x-not-sent-yet (the issue 28 wiring)."""
    messages = contract.DOC["components"]["messages"]
    return {t for t, (name, _) in contract.SERVER.items() if "x-not-sent-yet" in messages[name]}


def examples_in_document():
    out = []
    for name, m in contract.DOC["components"]["messages"].items():
        direction = "server" if name in {n for n, _ in contract.SERVER.values()} else "client"
        for ex in m.get("examples", []):
            out.append((name, direction, ex["payload"]))
    return out


def test_every_message_has_an_example_that_validates():
    examples = examples_in_document()
    names = {n for n, _, _ in examples}
    assert names == set(contract.DOC["components"]["messages"]), set(contract.DOC["components"]["messages"]) - names
    for name, direction, payload in examples:
        assert contract.errors(payload, direction) == [], (name, payload)


EXAMPLES = os.environ.get("RIDEPUSH_EXAMPLES", os.path.join(ROOT, "protocol", "examples"))


def golden_examples():
    """The golden messages: protocol/examples/{client,server}/*.json (the SDK's),
    protocol/examples/ops/{client,server}/*.json (the operator feed's) and
    protocol/examples/zones/{client,server}/*.json (positions and zones) and
    protocol/examples/push/{client,server}/*.json (lock-screen registrations), one message per file
    (RIDEPUSH_EXAMPLES points elsewhere). Empty until that folder exists."""
    return sorted(path for sub in ("", "ops", "zones", "push") for side in ("client", "server")
                  for path in glob.glob(os.path.join(EXAMPLES, sub, side, "*.json")))


@pytest.mark.skipif(not golden_examples(), reason="protocol/examples/ is not in this tree (helper sdk adds it)")
def test_golden_examples_validate_and_cover_every_type():
    types = {"client": set(), "server": set()}
    for path in golden_examples():
        direction = os.path.basename(os.path.dirname(path))
        msg = json.load(open(path, encoding="utf-8"))
        assert contract.errors(msg, direction) == [], path
        types[direction].add(msg["type"])
    assert types["client"] == set(contract.CLIENT)
    assert types["server"] == set(contract.SERVER)
    closes = os.path.join(EXAMPLES, "close-codes.json")
    if os.path.exists(closes):
        assert sorted(int(c) for c in json.load(open(closes))) == sorted(contract.DOC["channels"]["ride"]["x-close-codes"])


def test_every_server_message_type_the_server_sends_validates(tmp_path):
    """Each server message type, the operator feed's too, produced by the real server over a
    real socket and validated against its schema (the client hook does it; here it is asserted).
    One zone ("Slow", 15 km/h, everything allowed) so a position produces a zone push."""
    got = {}
    zones = tmp_path / "geofencing_zones.json"
    ring = [[126.97, 37.56], [126.98, 37.56], [126.98, 37.57], [126.97, 37.57], [126.97, 37.56]]
    zones.write_text(json.dumps({"last_updated": "2025-11-29T12:00:00+09:00", "ttl": 60, "version": "3.0", "data": {
        "geofencing_zones": {"type": "FeatureCollection", "features": [{"type": "Feature",
            "geometry": {"type": "MultiPolygon", "coordinates": [[ring]]},
            "properties": {"name": [{"text": "Slow", "language": "en"}],
                           "rules": [{"ride_allowed": True, "ride_through_allowed": True, "maximum_speed_kph": 15}]}}]},
        "global_rules": [{"ride_allowed": True, "ride_through_allowed": True}]}}))

    def keep(m):
        assert contract.errors(m) == [], m
        got.setdefault(m["type"], []).append(m)
        return m

    with Server("--zones", str(zones), auth="jwt", env=ENV) as srv:
        alice = control("alice")
        with Client(srv.ws + "?token=" + alice) as dev, Client(srv.ws) as late, \
                Client(srv.ws + "?token=" + control("op", ops=True)) as op:
            keep(late.request({"type": "auth", "token": alice}))
            keep(op.request({"type": "watch_all", "id": "w1"}))
            r = "r-contract-%d" % (time.monotonic_ns() % 10**9)
            keep(dev.request({"type": "start", "ride": r, "limit": 62}))
            keep(op.wait_for(lambda m: m["type"] == "fleet_event", timeout=3))
            keep(op.wait_for(lambda m: m["type"] == "fleet_warning", timeout=3))
            keep(op.wait_for(lambda m: m["type"] == "fleet" and m["rows"], timeout=3))
            keep(dev.request({"type": "subscribe", "ride": r}))
            dev.send({"type": "position", "ride": r, "lat": 37.565, "lon": 126.975, "at": int(time.time() * 1000), "accuracy": 5})
            keep(dev.wait_for(lambda m: m["type"] == "zone", timeout=3))
            keep(dev.wait_for(lambda m: m["type"] == "warning", timeout=3))
            keep(dev.wait_for(lambda m: m["type"] == "tick", timeout=3))
            keep(dev.request({"type": "pause", "ride": r}))
            keep(dev.wait_for(lambda m: m["type"] == "tick" and m["state"] == "paused", timeout=3))
            keep(dev.request({"type": "resume", "ride": r}))
            keep(dev.request({"type": "share", "ride": r}))
            keep(dev.request({"type": "quote", "seconds": 192}))
            keep(dev.request({"type": "get", "ride": r}))
            apns = "7b1f0c3e5a2d4f6b" * 4
            keep(dev.request({"type": "register_push", "platform": "apns", "kind": "liveactivity", "ride": r, "token": apns}))
            keep(dev.request({"type": "unregister_push", "platform": "apns", "kind": "liveactivity", "ride": r, "token": apns}))
            keep(dev.request({"type": "end", "ride": r, "distance": 1200}))
            journal = keep(op.request({"type": "get", "ride": r}))["journal"]
            assert [e["event"] for e in journal] == ["start", "pause", "resume", "end"]
            keep(op.request({"type": "unwatch_all", "id": "u1"}))
            keep(dev.request({"type": "unsubscribe", "ride": r}))
            keep(dev.request({"type": "pause", "ride": r}))       # invalid_transition
            keep(dev.request({"type": "get", "ride": "r-none"}))  # ride_not_found
            keep(dev.request({"type": "dance"}))                   # unknown_type
        with Client(srv.ws + "?token=" + watch("bob", rides=[r])) as viewer:
            keep(viewer.request({"type": "end", "ride": r}))       # forbidden
    assert sorted(got) == sorted(set(contract.SERVER) - not_sent_yet())
    ended = [m for m in got["state"] if m["state"] == "ended" and "journal" not in m]
    assert len(ended) == 1 and "receipt" in ended[0] and "remaining" not in ended[0]
    # The ride reported one position (no distance yet): the trace's 0 m is billed, not the
    # client's 1,200 (a receipt leaves out a zero distance).
    assert "distance" not in ended[0]["receipt"]
    assert sorted(e["code"] for e in got["error"]) == ["forbidden", "invalid_transition", "ride_not_found",
                                                        "unknown_type"]
    assert got["authenticated"][0] == {"type": "authenticated", "id": got["authenticated"][0]["id"],
                                       "sub": "alice", "scope": "control"}


def test_an_ended_ride_with_a_limit_carries_no_remaining():
    with Server() as srv, Client(srv.ws) as dev:
        st = dev.request({"type": "start", "ride": "r-end-limit", "limit": 600})
        assert st["remaining"] == 600
        end = dev.request({"type": "end", "ride": "r-end-limit"})
        assert end["state"] == "ended" and "remaining" not in end and end["limit"] == 600
        status, doc, _ = srv.get("/rides/r-end-limit")
        assert status == 200 and doc["state"] == "ended" and "remaining" not in doc


# ---- Prometheus -----------------------------------------------------------------------------

def lower_nofile(limit):
    def f():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    return f


def wait_connections(srv, n, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        _, health, _ = srv.get("/healthz")
        if health["connections"] == n:
            return
        assert time.monotonic() < deadline, health
        time.sleep(0.05)


def wait_fds(srv, n, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        have = len(os.listdir("/proc/%d/fd" % srv.proc.pid))
        if have == n:
            return
        assert time.monotonic() < deadline, (have, n)
        time.sleep(0.05)


def test_metrics_pass_promtool_and_count_files_honestly():
    t0 = time.time()
    with Server(popen_kwargs={"preexec_fn": lower_nofile(1234)}) as srv:
        t1 = time.time()
        with Client(srv.ws) as dev:
            dev.request({"type": "start", "ride": "r-m"})
            dev.request({"type": "subscribe", "ride": "r-m"})
            dev.wait_for(lambda m: m["type"] == "tick", timeout=3)
            status, ctype, text, conn = scrape(srv.port)
            fds_now = len(os.listdir("/proc/%d/fd" % srv.proc.pid))
            conn.close()
        assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
        rc, out = promtool("check", "metrics", stdin=text)
        assert (rc, out) == (0, ""), out
        fams = families(text)
        assert fams["ridepush_tick_lateness_seconds"] == "histogram"
        assert fams["ridepush_fanout_duration_seconds"] == "histogram"
        assert not [f for f in fams if "millisecond" in f]
        assert re.search(r'^ridepush_tick_lateness_seconds_bucket\{le="0.005"\} \d+$', text, re.M)
        assert re.search(r'^ridepush_fanout_duration_seconds_bucket\{le="1"\} \d+$', text, re.M)
        assert sample(text, "process_max_fds") == 1234
        # Counted while the scrape's own connection and the client's were open, as listed.
        assert sample(text, "process_open_fds") == fds_now
        # Fifty more sockets are fifty more files.
        clients = [Client(srv.ws) for _ in range(50)]
        try:
            wait_connections(srv, 50)
            # The gauge drops at the close callback; lws may close dev's descriptor (and the
            # /healthz polls' ones) a moment later, so wait, bounded, for exactly the 50 sockets.
            wait_fds(srv, fds_now - 2 + 50)
            _, _, text2, conn2 = scrape(srv.port)
            conn2.close()
        finally:
            for c in clients:
                c.close()
        assert sample(text2, "process_open_fds") - sample(text, "process_open_fds") == 50 - 1  # less dev's
        start = sample(text, "process_start_time_seconds")
        assert t0 - 2 <= start <= t1 + 1, (t0, start, t1)  # btime has whole seconds
        version = subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=10).stdout
        v = re.match(r"ridepush (\S+) \(commit (\S+)\)", version)
        assert re.search(r'^ridepush_build_info\{version="%s",commit="%s"\} 1$' % (re.escape(v.group(1)), re.escape(v.group(2))),
                         text, re.M)


def test_alerting_rules_pass_promtool_check_and_their_unit_tests():
    rc, out = promtool("check", "rules", os.path.join(PROM, "ridepush-rules.yml"))
    assert rc == 0 and "SUCCESS: 7 rules found" in out, out
    rc, out = promtool("check", "config", os.path.join(PROM, "prometheus.yml"))
    assert rc == 0 and "SUCCESS: 1 rule files found" in out, out
    rc, out = promtool("test", "rules", os.path.join(PROM, "ridepush-rules.test.yml"))
    assert rc == 0 and "SUCCESS" in out, out
    # Each of the seven alerts has a test case that expects it to fire.
    import yaml
    rules = yaml.safe_load(open(os.path.join(PROM, "ridepush-rules.yml")))
    tests = yaml.safe_load(open(os.path.join(PROM, "ridepush-rules.test.yml")))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    fired = {c["alertname"] for t in tests["tests"] for c in t["alert_rule_test"] if c["exp_alerts"]}
    assert alerts == fired == {"RidePushTicksLate", "RidePushTickerStalled", "RidePushSlowConsumerDisconnectsRising",
                               "RidePushStoreUnavailable", "RidePushNodeDegraded", "RidePushDown",
                               "RidePushConnectionsNearFileLimit"}


PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "le", "job", "instance", "state", "type",
                "result", "without", "on", "ignoring", "and", "or", "unless", "max", "min", "avg", "count",
                "irate", "label_values", "version", "commit"}  # not metrics; `up` is Prometheus' own


def metric_names(expr):
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names in a by()/selector, string contents or $variables."""
    expr = re.sub(r'"[^"]*"', '""', expr)           # label values
    expr = re.sub(r"\$\w+|\$\{\w+\}", "", expr)      # Grafana variables
    expr = re.sub(r"\[[^\]]*\]", "", expr)           # ranges
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)           # selectors
    names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", expr))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"e\d*", n)}


def exposed_series(text):
    """Every series name /metrics can produce: families, plus _bucket/_sum/_count of histograms."""
    out = set()
    for name, kind in families(text).items():
        out.add(name)
        if kind == "histogram":
            out |= {name + "_bucket", name + "_sum", name + "_count"}
    return out


def test_dashboard_and_rules_query_only_metrics_that_metrics_exposes():
    dash = json.load(open(DASHBOARD, encoding="utf-8"))
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    titles = [p["title"] for p in dash["panels"]]
    for wanted in ("Connections", "Subscribers", "Rides by state", "Tick lateness p50 / p99",
                   "Fan-out duration p50 / p99", "Transitions and requests by result", "Slow consumers and coalesced ticks"):
        assert wanted in titles
    assert len(exprs) == 18
    import yaml
    rules = yaml.safe_load(open(os.path.join(PROM, "ridepush-rules.yml")))
    rule_exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    with Server() as srv:
        _, _, text, conn = scrape(srv.port)
        conn.close()
    exposed = exposed_series(text)
    used = set()
    for e in exprs + rule_exprs:
        names = metric_names(e)
        assert names, e
        used |= names
        assert names <= exposed | {"up"}, (e, names - exposed)
    # The extractor is not vacuous: it finds the metrics and would flag an old name.
    assert {"ridepush_tick_lateness_seconds_bucket", "process_open_fds", "ridepush_control_messages_total"} <= used
    assert metric_names("rate(ridepush_tick_lateness_milliseconds_bucket{job=\"$job\"}[5m])") == \
        {"ridepush_tick_lateness_milliseconds_bucket"}
