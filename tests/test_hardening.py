"""Issue 15 over real sockets: no request may stop the clock (bounded quotes, rate-limited),
the wall clock's steps do not move rides, /healthz tells the truth."""
import http.client
import os
import time

from rp import ROOT, Client, Server

PLANS = os.path.join(ROOT, "plans.example.json")


def test_capped_quote_at_the_bound_is_exact_and_the_clock_keeps_ticking():
    with Server("--plans", PLANS) as s, Client(s.ws) as watcher, Client(s.ws) as c:
        ride = c.request({"type": "start", "ride": "r-q", "plan": "plan3"})
        assert ride["type"] == "state"
        watcher.request({"type": "subscribe", "ride": "r-q"})
        # 10^9 s = 23,149 twelve-hour windows begun, each at its cap of 15.00.
        status, body, _ = s.get("/quote?plan=plan3&seconds=1000000000")
        assert status == 200, body
        assert body["fare"] == 23149 * 1500
        assert sum(line["amount"] for line in body["lines"]) == body["fare"]
        ws = c.request({"type": "quote", "plan": "plan3", "seconds": 1000000000})
        assert ws["fare"] == 23149 * 1500 and ws["lines"] == body["lines"]
        # The query of the review (Int64.max seconds) is outside the one bound, on both paths.
        started = time.monotonic()
        status, body, _ = s.get("/quote?plan=plan3&seconds=9223372036854775807")
        assert status == 400 and body["error"]["code"] == "bad_request"
        assert "1000000000" in body["error"]["message"]
        e = c.request({"type": "quote", "plan": "plan3", "seconds": 9223372036854775807})
        assert (e["type"], e["code"]) == ("error", "bad_request")
        assert s.get("/quote?plan=plan3&seconds=5&paused=1000000001")[0] == 400
        assert time.monotonic() - started < 2
        # Ticks kept coming through all of it: two consecutive seconds after the quotes.
        a = watcher.wait_for(lambda m: m.get("type") == "tick", 3)
        b = watcher.wait_for(lambda m: m.get("type") == "tick", 3)
        assert b["at"] - a["at"] == 1000 and b["elapsed"] - a["elapsed"] == 1


def test_http_quotes_are_rate_limited_per_address():
    with Server("--control-rate", "3") as s:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
        for attempt in range(3):
            time.sleep(1.05)  # a fresh one-second window
            started = time.monotonic()
            statuses = []
            for _ in range(10):
                conn.request("GET", "/quote?seconds=60")
                r = conn.getresponse()
                body = r.read()
                statuses.append(r.status)
                if r.status == 429:
                    assert b'"rate_limited"' in body
            if time.monotonic() - started < 0.9:
                break
        assert statuses == [200] * 3 + [429] * 7
        # Other paths are not limited by it.
        assert s.get("/healthz")[0] == 200


def test_ws_quotes_count_against_the_control_rate():
    with Server("--control-rate", "3") as s, Client(s.ws) as c:
        for attempt in range(3):
            time.sleep(1.05)
            started = time.monotonic()
            for i in range(5):
                c.send({"type": "quote", "id": "a%d-%d" % (attempt, i), "seconds": 60})
            replies = [c.wait_for(lambda m, i=i: m.get("id") == "a%d-%d" % (attempt, i)) for i in range(5)]
            if time.monotonic() - started < 0.9:
                break
        assert [m["type"] for m in replies] == ["quote"] * 3 + ["error"] * 2
        assert all(m["code"] == "rate_limited" for m in replies[3:])
