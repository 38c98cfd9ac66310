"""Fare plans over real sockets (issue 5): quotes over WebSocket and HTTP against the same
table the unit tests pin (Tests/RideCoreTests/FareTests.swift), GET /plans, plan_not_found,
rides billed in a plan's currency, time limits with warnings and auto-end, and malformed
plans files refused at start."""
import decimal
import json
import os
import subprocess
import time
import urllib.request

import pytest

from rp import BIN, ROOT, Client, Server

# The plans of FareTests.swift, written as GBFS. "default" is the built-in plan written out
# (500 KRW + 180 KRW per completed minute): a plans file is served as given, so the table's
# "default" rows need it in the file; being first, it is the default. "plan2" and "plan3" are
# the GBFS v3.1-RC3 system_pricing_plans examples 1 and 2. "krw-paused*" are PauseFareTests' plans.
PLANS = {
    "last_updated": "2026-07-01T00:00:00Z",
    "ttl": 0,
    "version": "3.1-RC3",
    "data": {"plans": [
        {"plan_id": "default", "name": [{"text": "Standard", "language": "en"}], "currency": "KRW",
         "price": 500, "per_min_pricing": [{"start": 0, "rate": 180, "interval": 1}],
         "_ridepush_billing": "completed"},
        {"plan_id": "plan2", "name": [{"text": "One-Way", "language": "en"}], "currency": "USD",
         "price": 2.00, "is_taxable": False,
         "description": [{"text": "First half-hour: $2, second half-hour: $3, beyond one hour: $0.10/min",
                          "language": "en"}],
         "per_min_pricing": [{"start": 30, "end": 60, "rate": 3.00, "interval": 0},
                             {"start": 60, "rate": 0.10, "interval": 1}]},
        {"plan_id": "plan3", "name": [{"text": "Simple Rate", "language": "en"}], "currency": "CAD",
         "price": 3.00, "is_taxable": True,
         "description": [{"text": "$3 unlock fee, $0.25 per kilometer and 0.50 per minute, capped at $15 per 12-hour period.",
                          "language": "en"}],
         "per_km_pricing": [{"start": 0, "rate": 0.25, "interval": 1}],
         "per_min_pricing": [{"start": 0, "rate": 0.50, "interval": 1}],
         "fare_capping": {"duration": 720, "price": 15.00}},
        {"plan_id": "krw-started", "name": [{"text": "Started minutes", "language": "en"}], "currency": "KRW",
         "price": 500, "per_min_pricing": [{"start": 0, "rate": 180, "interval": 1}],
         "_ridepush_billing": "started"},
        {"plan_id": "eur-completed", "name": [{"text": "Completed minutes", "language": "en"}], "currency": "EUR",
         "price": 1.00, "per_min_pricing": [{"start": 0, "rate": 0.25, "interval": 1}],
         "_ridepush_billing": "completed"},
        {"plan_id": "first-ten-free", "name": [{"text": "First 10 min free", "language": "en"}], "currency": "EUR",
         "price": 1.00, "per_min_pricing": [{"start": 0, "rate": 0.30, "interval": 1},
                                            {"start": 0, "end": 10, "rate": -0.30, "interval": 1}]},
        {"plan_id": "over-discounted", "name": [{"text": "Voucher", "language": "en"}], "currency": "EUR",
         "price": 0.50, "per_min_pricing": [{"start": 0, "rate": -2.00, "interval": 0}]},
        {"plan_id": "krw-paused", "name": [{"text": "Paid pauses", "language": "en"}], "currency": "KRW",
         "price": 500, "per_min_pricing": [{"start": 0, "rate": 180, "interval": 1}],
         "_ridepush_billing": "completed", "_ridepush_pause_rate": 50, "_ridepush_max_pause": 30},
        {"plan_id": "krw-paused-started", "name": [{"text": "Paid pauses, started", "language": "en"}],
         "currency": "KRW", "price": 500, "per_min_pricing": [{"start": 0, "rate": 180, "interval": 1}],
         "_ridepush_billing": "started", "_ridepush_pause_rate": 50},
    ]},
}


def t(m, s=0):
    return m * 60 + s


# (plan, riding seconds, paused seconds, fare in minor units, currency): FareTests.swift's
# FareTableTests and PauseFareTests rows, figure for figure (the rows with metres are left
# out: quotes bill time only).
TABLE = [
    # default KRW plan, completed minutes
    ("default", t(0), 0, 500, "KRW"),
    ("default", t(0, 59), 0, 500, "KRW"),
    ("default", t(1), 0, 680, "KRW"),
    ("default", t(1, 1), 0, 680, "KRW"),
    ("default", t(59, 59), 0, 11120, "KRW"),
    ("default", t(60), 0, 11300, "KRW"),
    # KRW per started minute
    ("krw-started", t(0), 0, 500, "KRW"),
    ("krw-started", t(0, 59), 0, 680, "KRW"),
    ("krw-started", t(1), 0, 680, "KRW"),
    ("krw-started", t(1, 1), 0, 860, "KRW"),
    ("krw-started", t(59, 59), 0, 11300, "KRW"),
    ("krw-started", t(60), 0, 11300, "KRW"),
    ("krw-started", t(60, 1), 0, 11480, "KRW"),
    # EUR per completed minute
    ("eur-completed", t(0), 0, 100, "EUR"),
    ("eur-completed", t(0, 59), 0, 100, "EUR"),
    ("eur-completed", t(1), 0, 125, "EUR"),
    ("eur-completed", t(1, 1), 0, 125, "EUR"),
    ("eur-completed", t(59, 59), 0, 1575, "EUR"),
    ("eur-completed", t(60), 0, 1600, "EUR"),
    # GBFS example 1: USD half-hour plan
    ("plan2", t(0), 0, 200, "USD"),
    ("plan2", t(0, 59), 0, 200, "USD"),
    ("plan2", t(1), 0, 200, "USD"),
    ("plan2", t(1, 1), 0, 200, "USD"),
    ("plan2", t(30), 0, 200, "USD"),
    ("plan2", t(30, 1), 0, 500, "USD"),
    ("plan2", t(59, 59), 0, 500, "USD"),
    ("plan2", t(60), 0, 500, "USD"),
    ("plan2", t(60, 1), 0, 510, "USD"),
    ("plan2", t(61), 0, 510, "USD"),
    ("plan2", t(61, 1), 0, 520, "USD"),
    ("plan2", t(90), 0, 800, "USD"),
    # GBFS example 2: CAD plan with a 12-hour cap
    ("plan3", t(0), 0, 300, "CAD"),
    ("plan3", t(0, 59), 0, 350, "CAD"),
    ("plan3", t(1), 0, 350, "CAD"),
    ("plan3", t(1, 1), 0, 400, "CAD"),
    ("plan3", t(23), 0, 1450, "CAD"),
    ("plan3", t(23, 1), 0, 1500, "CAD"),
    ("plan3", t(59, 59), 0, 1500, "CAD"),
    ("plan3", t(60), 0, 1500, "CAD"),
    ("plan3", t(600), 0, 1500, "CAD"),
    ("plan3", t(720), 0, 1500, "CAD"),
    ("plan3", t(720, 1), 0, 1550, "CAD"),
    ("plan3", t(743), 0, 2650, "CAD"),
    ("plan3", t(780), 0, 3000, "CAD"),
    # negative rate segments
    ("first-ten-free", t(0), 0, 100, "EUR"),
    ("first-ten-free", t(0, 59), 0, 100, "EUR"),
    ("first-ten-free", t(1), 0, 100, "EUR"),
    ("first-ten-free", t(1, 1), 0, 100, "EUR"),
    ("first-ten-free", t(5), 0, 100, "EUR"),
    ("first-ten-free", t(10), 0, 100, "EUR"),
    ("first-ten-free", t(10, 1), 0, 130, "EUR"),
    ("first-ten-free", t(15), 0, 250, "EUR"),
    ("first-ten-free", t(59, 59), 0, 1600, "EUR"),
    ("first-ten-free", t(60), 0, 1600, "EUR"),
    ("over-discounted", t(0), 0, 50, "EUR"),
    ("over-discounted", t(0, 1), 0, 0, "EUR"),
    ("over-discounted", t(0, 59), 0, 0, "EUR"),
    ("over-discounted", t(1), 0, 0, "EUR"),
    ("over-discounted", t(1, 1), 0, 0, "EUR"),
    ("over-discounted", t(59, 59), 0, 0, "EUR"),
    ("over-discounted", t(60), 0, 0, "EUR"),
    # pause billing
    ("default", t(10), t(30), 2300, "KRW"),
    ("krw-paused", t(10), t(0, 59), 2300, "KRW"),
    ("krw-paused", t(10), t(1, 30), 2350, "KRW"),
    ("krw-paused", t(10), t(10), 2800, "KRW"),
    ("krw-paused-started", t(10), t(0, 1), 2350, "KRW"),
    ("krw-paused-started", t(10), t(1, 1), 2400, "KRW"),
]

# Receipt lines, as ReceiptLineTests pins them (and, for plan3 at 60:00, as the cap rule gives).
LINES = {
    ("default", t(1, 1), 0): [{"label": "unlock", "amount": 500},
                              {"label": "riding", "minutes": 1, "amount": 180}],
    ("plan2", t(61, 1), 0): [{"label": "unlock", "amount": 200},
                             {"label": "riding", "segment": 0, "amount": 300},
                             {"label": "riding", "segment": 1, "minutes": 2, "amount": 20}],
    ("plan2", t(30), 0): [{"label": "unlock", "amount": 200},
                          {"label": "riding", "segment": 0, "amount": 0},
                          {"label": "riding", "segment": 1, "minutes": 0, "amount": 0}],
    ("krw-paused", t(10), t(1, 30)): [{"label": "unlock", "amount": 500},
                                      {"label": "riding", "minutes": 10, "amount": 1800},
                                      {"label": "pause", "minutes": 1, "amount": 50}],
    ("over-discounted", t(5), 0): [{"label": "unlock", "amount": 50},
                                   {"label": "riding", "amount": -200},
                                   {"label": "floor", "amount": 150}],
    ("plan3", t(10), 0): [{"label": "unlock", "amount": 300},
                          {"label": "riding", "minutes": 10, "amount": 500},
                          {"label": "distance", "km": 0, "amount": 0}],
    ("plan3", t(60), 0): [{"label": "unlock", "amount": 300},
                          {"label": "riding", "minutes": 60, "amount": 3000},
                          {"label": "distance", "km": 0, "amount": 0},
                          {"label": "cap", "amount": -1800}],
}

# What each row's lines must look like beyond summing to the fare: the labels in order.
LABELS = {
    "default": ["unlock", "riding"], "krw-started": ["unlock", "riding"], "eur-completed": ["unlock", "riding"],
    "plan2": ["unlock", "riding", "riding"], "plan3": ["unlock", "riding", "distance"],
    "first-ten-free": ["unlock", "riding", "riding"], "over-discounted": ["unlock", "riding"],
    "krw-paused": ["unlock", "riding", "pause"], "krw-paused-started": ["unlock", "riding", "pause"],
}


@pytest.fixture(scope="module")
def plans_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("plans") / "plans.json"
    p.write_text(json.dumps(PLANS))
    return str(p)


FAST = ("--control-rate", "100000")


@pytest.fixture(scope="module")
def fares(plans_file):
    # The fare table asks hundreds of quotes in a burst: lift the per-address quote rate.
    with Server("--plans", plans_file, *FAST) as s:
        yield s


def http_quote(server, plan, seconds, paused=0):
    q = "/quote?seconds=%d" % seconds
    if plan is not None:
        q += "&plan=" + plan
    if paused:
        q += "&paused=%d" % paused
    return server.get(q)


def check_lines(plan, seconds, paused, fare, lines):
    assert sum(ln["amount"] for ln in lines) == fare, lines
    labels = [ln["label"] for ln in lines]
    cap_or_floor = [lb for lb in labels if lb in ("cap", "floor")]
    want = LABELS[plan] + (["pause"] if paused and "pause" not in LABELS[plan] else [])  # a pause line once paused
    assert labels[:len(labels) - len(cap_or_floor)] == want, labels
    if (plan, seconds, paused) in LINES:
        assert lines == LINES[(plan, seconds, paused)]


def test_quotes_over_ws_and_http_match_the_unit_table(fares):
    seen = {}
    with Client(fares.ws) as c:
        for plan, seconds, paused, fare, currency in TABLE:
            msg = {"type": "quote", "plan": plan, "seconds": seconds}
            if paused:
                msg["paused"] = paused
            ws = c.request(msg)
            status, http, _ = http_quote(fares, plan, seconds, paused)
            assert status == 200, http
            assert ws.pop("id").startswith("q")
            assert ws == http, (plan, seconds, paused)
            assert (ws["type"], ws["plan"], ws["seconds"], ws["paused"]) == ("quote", plan, seconds, paused)
            assert (ws["fare"], ws["currency"]) == (fare, currency), (plan, seconds, paused)
            check_lines(plan, seconds, paused, fare, ws["lines"])
            seen[(plan, seconds, paused)] = ws
    # Every pinned receipt was asked for (the plan2/over-discounted/plan3 extras here).
    with Client(fares.ws) as c:
        for (plan, seconds, paused), lines in LINES.items():
            if (plan, seconds, paused) not in seen:
                ws = c.request({"type": "quote", "plan": plan, "seconds": seconds, "paused": paused})
                assert ws["lines"] == lines
                assert ws["lines"] == http_quote(fares, plan, seconds, paused)[1]["lines"]


def test_quote_without_a_plan_uses_the_default_plan(fares):
    with Client(fares.ws) as c:
        ws = c.request({"type": "quote", "seconds": 61})
    status, http, _ = http_quote(fares, None, 61)
    assert status == 200
    assert ws["plan"] == http["plan"] == "default"
    assert ws["fare"] == http["fare"] == 680 and ws["lines"] == http["lines"]


def test_unknown_plan_is_plan_not_found(fares):
    with Client(fares.ws) as c:
        e = c.request({"type": "quote", "id": "nq", "plan": "no-such-plan", "seconds": 60})
        assert (e["type"], e["id"], e["code"]) == ("error", "nq", "plan_not_found")
        assert "no-such-plan" in e["message"]
        s = c.request({"type": "start", "id": "ns", "plan": "no-such-plan"})
        assert (s["type"], s["code"]) == ("error", "plan_not_found")
        # The connection stays usable.
        assert c.request({"type": "quote", "plan": "plan2", "seconds": 0})["fare"] == 200
    status, body, hdrs = http_quote(fares, "no-such-plan", 60)
    assert status == 404 and "json" in hdrs["Content-Type"]
    assert body["error"]["code"] == "plan_not_found" and "no-such-plan" in body["error"]["message"]


def test_http_quote_refuses_bad_numbers(fares):
    for q in ("/quote?plan=plan2", "/quote?plan=plan2&seconds=-1", "/quote?plan=plan2&seconds=x",
              "/quote?plan=plan2&seconds=5&paused=-2"):
        status, body, _ = fares.get(q)
        assert status == 400 and body["error"]["code"] == "bad_request", q


def raw_get(server, path):
    with urllib.request.urlopen(server.http + path, timeout=5) as r:
        return r.status, r.read()


def test_plans_document_is_gbfs_and_reparses_to_the_same_prices(fares, tmp_path):
    status, raw = raw_get(fares, "/plans")
    assert status == 200
    doc = json.loads(raw, parse_float=decimal.Decimal)  # keep "2.00" as written
    assert doc["version"] == "3.1-RC3" and doc["ttl"] == 0
    assert isinstance(doc["last_updated"], str) and doc["last_updated"].endswith("Z")
    plans = {p["plan_id"]: p for p in doc["data"]["plans"]}
    assert list(plans) == [p["plan_id"] for p in PLANS["data"]["plans"]], "the file's plans, nothing added"
    d = plans["default"]
    assert (d["currency"], d["price"], d["_ridepush_billing"]) == ("KRW", 500, "completed")
    assert d["per_min_pricing"] == [{"start": 0, "rate": 180, "interval": 1}]
    u = plans["plan2"]
    assert (u["currency"], str(u["price"]), u["is_taxable"]) == ("USD", "2.00", False)
    assert [(s["start"], str(s["rate"]), s["interval"], s.get("end")) for s in u["per_min_pricing"]] == \
        [(30, "3.00", 0, 60), (60, "0.10", 1, None)]
    assert u["_ridepush_billing"] == "started"  # no field in the file: GBFS's reading
    assert u["name"] == [{"text": "One-Way", "language": "en"}]
    c = plans["plan3"]
    assert (c["currency"], str(c["price"]), c["is_taxable"]) == ("CAD", "3.00", True)
    assert (c["fare_capping"]["duration"], str(c["fare_capping"]["price"])) == (720, "15.00")
    assert [(s["start"], str(s["rate"]), s["interval"]) for s in c["per_km_pricing"]] == [(0, "0.25", 1)]
    assert str(plans["first-ten-free"]["per_min_pricing"][1]["rate"]) == "-0.30"
    p = plans["krw-paused"]
    assert (p["_ridepush_pause_rate"], p["_ridepush_max_pause"]) == (50, 30)
    assert "_ridepush_max_pause" not in plans["krw-paused-started"]
    # The document is itself a plans file: a server loading it quotes the same table.
    again = tmp_path / "again.json"
    again.write_bytes(raw)
    with Server("--plans", str(again), *FAST) as s2:
        for plan, seconds, paused, fare, currency in TABLE:
            status, q, _ = http_quote(s2, plan, seconds, paused)
            assert status == 200 and (q["fare"], q["currency"]) == (fare, currency), (plan, seconds, paused)
        status, raw2 = raw_get(s2, "/plans")
        doc2 = json.loads(raw2, parse_float=decimal.Decimal)
        assert doc2["data"] == doc["data"]


def test_example_plans_file_lists_its_max_pause():
    with Server("--plans", os.path.join(ROOT, "plans.example.json")) as s:
        status, doc, _ = s.get("/plans")
        plans = {p["plan_id"]: p for p in doc["data"]["plans"]}
        assert plans["seoul-day"]["_ridepush_max_pause"] == 30
        assert plans["seoul-day"]["_ridepush_max_ride"] == 180
        assert s.get("/quote?plan=plan2&seconds=3661")[1]["fare"] == 520
        assert s.get("/quote?plan=plan3&seconds=3600")[1]["fare"] == 1500


def just_after_a_whole_second():
    """Ticks fire on whole wall-clock seconds: start a ride early in a second so the
    subscriber is in place before the first tick (and the first tick says elapsed 0)."""
    frac = time.time() % 1
    if not 0.05 <= frac <= 0.4:
        time.sleep((1.05 - frac) % 1)


def test_ride_on_a_usd_plan_ticks_in_usd(fares):
    with Client(fares.ws) as dev, Client(fares.ws) as watch:
        st = dev.request({"type": "start", "ride": "r-usd", "plan": "plan2"})
        assert (st["state"], st["fare"], st["currency"]) == ("riding", 200, "USD")
        assert st["plan"]["id"] == "plan2" and st["plan"]["currency"] == "USD" and st["plan"]["price"] == 200
        assert "remaining" not in st and "limit" not in st
        watch.request({"type": "subscribe", "ride": "r-usd"})
        for _ in range(2):
            tk = watch.wait_for(lambda m: m["type"] == "tick" and m["ride"] == "r-usd", timeout=3)
            assert (tk["currency"], tk["fare"]) == ("USD", 200) and "remaining" not in tk
        end = dev.request({"type": "end", "ride": "r-usd"})
        r = end["receipt"]
        assert (r["fare"], r["currency"], r["reason"]) == (200, "USD", "rider")
        assert r["lines"] == LINES[("plan2", t(30), 0)]


def test_time_limit_counts_down_warns_once_and_ends_the_ride(fares):
    with Client(fares.ws) as dev, Client(fares.ws) as watch:
        just_after_a_whole_second()
        st = dev.request({"type": "start", "ride": "r-lim", "plan": "plan2", "limit": 3})
        assert (st["limit"], st["remaining"], st["currency"]) == (3, 3, "USD")
        watch.request({"type": "subscribe", "ride": "r-lim"})
        ticks, warnings = [], []
        deadline = time.monotonic() + 8
        while True:
            assert time.monotonic() < deadline, (ticks, warnings)
            m = watch.wait_for(lambda m: m.get("ride") == "r-lim" and m["type"] in ("tick", "warning", "state"), timeout=3)
            if m["type"] == "tick":
                ticks.append(m)
            elif m["type"] == "warning":
                warnings.append(m)
            else:
                ended = m
                break
        remaining = [tk["remaining"] for tk in ticks]
        assert remaining[-2:] == [2, 1] and remaining == sorted(remaining, reverse=True), remaining
        assert all(tk["remaining"] == 3 - tk["elapsed"] for tk in ticks)
        assert all((tk["currency"], tk["fare"]) == ("USD", 200) for tk in ticks)
        # Under a minute left from the start: one warning (the 1-minute one), not two.
        assert len(warnings) == 1 and 1 <= warnings[0]["remaining"] <= 3, warnings
        assert ended["state"] == "ended" and "id" not in ended
        r = ended["receipt"]
        assert (r["reason"], r["elapsed"], r["fare"], r["currency"]) == ("time_limit", 3, 200, "USD")
        assert ended["ended_at"] - ended["started_at"] == 3000, "ended at the limit instant"
        # The ride is over: no more ticks, and the device cannot end it again.
        again = dev.request({"type": "end", "ride": "r-lim"})
        assert (again["type"], again["code"]) == ("error", "invalid_transition")
        with pytest.raises(TimeoutError):
            watch.wait_for(lambda m: m["type"] == "tick" and m["ride"] == "r-lim", timeout=1.5)


def test_warnings_at_five_minutes_and_one_minute(fares):
    with Client(fares.ws) as dev, Client(fares.ws) as watch:
        just_after_a_whole_second()
        dev.request({"type": "start", "ride": "r-warn", "limit": 62})
        watch.request({"type": "subscribe", "ride": "r-warn"})
        first = watch.wait_for(lambda m: m["type"] == "warning", timeout=3)
        assert first["ride"] == "r-warn" and 60 < first["remaining"] <= 62  # the 5-minute one
        second = watch.wait_for(lambda m: m["type"] == "warning", timeout=4)
        assert second["ride"] == "r-warn" and second["remaining"] == 60    # the 1-minute one
        with pytest.raises(TimeoutError):
            watch.wait_for(lambda m: m["type"] == "warning", timeout=1.5)
        watch.wait_for(lambda m: m["type"] == "tick" and m["remaining"] < 60, timeout=3)  # counting on
        dev.request({"type": "end", "ride": "r-warn"})


def test_plan_max_ride_limits_a_start_without_limit():
    with Server("--plans", os.path.join(ROOT, "plans.example.json")) as s, Client(s.ws) as c:
        st = c.request({"type": "start", "plan": "seoul-day"})
        assert (st["limit"], st["remaining"]) == (180 * 60, 180 * 60)
        st = c.request({"type": "start", "plan": "seoul-day", "limit": 30})
        assert st["limit"] == 30, "the smaller of the plan's maximum and the start's limit"


# --- malformed plans files ---------------------------------------------------------------

def usd(plan_id="ok-usd", **extra):
    p = {"plan_id": plan_id, "name": "OK", "currency": "USD", "price": 1.00,
         "per_min_pricing": [{"start": 0, "rate": 0.10, "interval": 1}]}
    p.update(extra)
    return p


BAD = [
    ("unknown-currency", json.dumps({"data": {"plans": [usd(), usd("bad-cur", currency="XYZ")]}}),
     ['plan "bad-cur"', "currency", '"XYZ"', "ISO 4217"]),
    ("too-many-decimals", json.dumps({"data": {"plans": [usd("bad-usd", per_min_pricing=[
        {"start": 0, "rate": 0.10, "interval": 1}, {"start": 10, "rate": 0.005, "interval": 1}])]}}),
     ['plan "bad-usd"', "per_min_pricing[1].rate", "0.005", "USD", "decimals"]),
    ("missing-plan-id", json.dumps({"data": {"plans": [usd(), {k: v for k, v in usd().items() if k != "plan_id"}]}}),
     ["data.plans[1]", "plan_id", "is required"]),
    ("not-json", '{"data": {"plans": [ {"plan_id": "x", ',
     ["system_pricing_plans", "invalid JSON"]),
]


@pytest.mark.parametrize("name,text,expected", BAD, ids=[b[0] for b in BAD])
def test_malformed_plans_file_stops_the_server(tmp_path, name, text, expected):
    path = tmp_path / (name + ".json")
    path.write_text(text)
    cmd = [BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--public", os.path.join(ROOT, "public"),
           "--store", "memory", "--auth", "none", "--plans", str(path)]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=15, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert time.monotonic() - started < 10
    assert "serving" not in out
    assert "--plans " + str(path) in out
    for piece in expected:
        assert piece in out, (piece, out)
    assert len(out.strip().splitlines()) <= 3, "one clear message, not a trace"


def test_quote_with_absurd_seconds_does_not_crash_the_server(fares):
    # Int64.max seconds used to trap in the fare engine and take the whole server down.
    status, body, _ = fares.get("/quote?plan=default&seconds=9223372036854775807")
    assert fares.proc.poll() is None, "server died"
    assert status in (200, 400), body
    assert fares.get("/healthz")[0] == 200


# ----------------------------------------------------------------------------------------
# Issue 26: a plans file is published as given, and a start without a plan uses the file's

PARIS = {
    "last_updated": "2026-07-01T00:00:00Z", "ttl": 0, "version": "3.1-RC3",
    "data": {"plans": [
        {"plan_id": "paris-minute", "name": [{"text": "À la minute", "language": "fr"}], "currency": "EUR",
         "price": 1.00, "is_taxable": True, "description": [{"text": "1 € + 0,25 €/min", "language": "fr"}],
         "per_min_pricing": [{"start": 0, "rate": 0.25, "interval": 1}]},
        {"plan_id": "paris-pass", "name": [{"text": "Pass", "language": "fr"}], "currency": "EUR",
         "price": 0.00, "is_taxable": True, "description": [{"text": "0,20 €/min", "language": "fr"}],
         "per_min_pricing": [{"start": 0, "rate": 0.20, "interval": 1}]},
    ]},
}


@pytest.mark.parametrize("marked", [None, "paris-pass"])
def test_a_eur_plans_file_is_listed_as_given_and_a_start_without_a_plan_bills_in_eur(tmp_path, marked):
    doc = json.loads(json.dumps(PARIS))
    for p in doc["data"]["plans"]:
        if p["plan_id"] == marked:
            p["_ridepush_default"] = True
    path = tmp_path / "system_pricing_plans.json"
    path.write_text(json.dumps(doc))
    expected = marked or "paris-minute"
    with Server("--plans", str(path)) as srv:
        status, listed, _ = srv.get("/plans")
        assert status == 200
        assert [p["plan_id"] for p in listed["data"]["plans"]] == ["paris-minute", "paris-pass"], "no default KRW plan added"
        assert {p["currency"] for p in listed["data"]["plans"]} == {"EUR"}
        assert [p.get("_ridepush_default", False) for p in listed["data"]["plans"]] == \
            [p["plan_id"] == marked for p in doc["data"]["plans"]]
        with Client(srv.ws) as c:
            ride = c.request({"type": "start", "ride": "r-paris"})
            assert ride["type"] == "state", ride
            assert (ride["currency"], ride["plan"]["id"]) == ("EUR", expected), ride
            assert ride["fare"] == (100 if expected == "paris-minute" else 0)
            q = c.request({"type": "quote", "seconds": 120})
            assert (q["plan"], q["currency"]) == (expected, "EUR"), q
            assert c.request({"type": "start", "ride": "r-krw", "plan": "default"})["code"] == "plan_not_found"
            ended = c.request({"type": "end", "ride": "r-paris"})
            assert ended["receipt"]["currency"] == "EUR", ended
        line = next(l for l in srv.lines if l.startswith("ridepush: plans from "))
        assert line.endswith(': paris-minute "À la minute" EUR, paris-pass "Pass" EUR'), line


def test_a_plans_file_with_no_plan_or_two_defaults_is_refused_at_start(tmp_path):
    for plans, says in (([], "data.plans: has no plans; give at least one"),
                        ([dict(PARIS["data"]["plans"][0], _ridepush_default=True),
                          dict(PARIS["data"]["plans"][1], _ridepush_default=True)],
                         'plan "paris-pass": _ridepush_default: only one plan may be the default')):
        path = tmp_path / "plans.json"
        path.write_text(json.dumps({"version": "3.1-RC3", "data": {"plans": plans}}))
        r = subprocess.run([BIN, "serve", "--plans", str(path), "--store", "memory", "--port", "0", "--auth", "none"],
                           capture_output=True, text=True, timeout=15, cwd=ROOT)
        assert r.returncode == 2 and says in r.stderr, r.stderr
