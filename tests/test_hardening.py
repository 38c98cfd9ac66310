"""Issue 15 over real sockets: no request may stop the clock (bounded quotes, rate-limited),
the wall clock's steps do not move rides, /healthz tells the truth."""
import http.client
import os
import re
import subprocess
import time

import pytest

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


# ---- wall-clock steps (defect 2) --------------------------------------------------------

SECRET = "test-secret-for-ridepush-0123456789-abcdef"


def jwt(claims):
    import base64
    import hashlib
    import hmac
    import json

    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(claims).encode())
    return signing_input + "." + b64(hmac.new(SECRET.encode(), signing_input.encode(), hashlib.sha256).digest())


@pytest.fixture
def clockstep(tmp_path):
    """(shim .so, control file): the server's CLOCK_REALTIME = real + the file's ms."""
    so = tmp_path / "clockstep.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    os.path.join(ROOT, "tests", "shims", "clockstep.c"), "-ldl"], check=True, timeout=60)
    control = tmp_path / "offset"
    control.write_text("0")
    return so, control


def next_ticks(client, n, ride):
    """n ticks of `ride` with the monotonic time each arrived."""
    out = []
    for _ in range(n):
        t = client.wait_for(lambda m: m.get("type") == "tick" and m.get("ride") == ride, 3)
        out.append((t, time.monotonic()))
    return out


def assert_steady(ticks):
    """One tick per second that passed: elapsed +1, at +1000, seq +1, arrivals ~1 s apart."""
    for (a, ta), (b, tb) in zip(ticks, ticks[1:]):
        assert b["elapsed"] - a["elapsed"] == 1, (a, b)
        assert b["at"] - a["at"] == 1000 and b["seq"] - a["seq"] == 1, (a, b)
        assert b["seq"] == b["at"] // 1000
        assert b["fare"] >= a["fare"]
        assert 0.5 < tb - ta < 1.6, (tb - ta, a, b)


def test_wall_clock_steps_do_not_move_rides(clockstep):
    so, control = clockstep
    env = {"LD_PRELOAD": str(so), "CLOCKSTEP_FILE": str(control), "RIDEPUSH_JWT_SECRET": SECRET}
    with Server(auth="jwt", env=env) as s:
        now = int(time.time())
        # Token times are judged on the wall clock (issue 25; test_guarantees.py steps one past
        # its exp): this one outlasts the steps below, so only the rides' clock is on trial.
        token = jwt({"sub": "rider-1", "scope": "control", "exp": now + 7200, "iat": now})
        with Client(s.ws + "?token=" + token) as c:
            c.request({"type": "start", "ride": "r-step", "plan": "default"})
            began = time.monotonic()
            c.request({"type": "subscribe", "ride": "r-step"})
            before = next_ticks(c, 3, "r-step")
            assert_steady(before)
            control.write_text("-1800000")  # 30 minutes back
            back = next_ticks(c, 5, "r-step")
            assert_steady(before[-1:] + back)
            control.write_text("1800000")  # 60 minutes forward from there
            forward = next_ticks(c, 5, "r-step")
            assert_steady(back[-1:] + forward)
            # Still authorized: no 4401, and a command still works.
            end = c.request({"type": "end", "ride": "r-step"})
            lasted = time.monotonic() - began
        receipt = end["receipt"]
        assert end["state"] == "ended"
        assert receipt["elapsed"] in (forward[-1][0]["elapsed"], forward[-1][0]["elapsed"] + 1)
        assert abs(receipt["elapsed"] - lasted) <= 2, (receipt, lasted)
        assert receipt["ended_at"] - receipt["started_at"] == pytest.approx(lasted * 1000, abs=2000)
        _, metrics, _ = s.get("/metrics")
        values = dict(line.rsplit(" ", 1) for line in metrics.splitlines() if line and not line.startswith("#"))
        assert values["ridepush_clock_steps_total"] == "2"
        offset = float(values["ridepush_clock_offset_seconds"]) * 1000
        # Slewed 5 ms per second toward the wall: ~+25 ms while back, ~-25 ms while forward.
        assert abs(offset - 1_800_000) < 100, offset
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not any("stepped forward" in ln for ln in s.lines):
            time.sleep(0.05)
    log = "\n".join(s.lines)
    # The shim re-reads its file every 20 ms, so the jump measured may be a millisecond short.
    assert re.search(r"wall clock stepped back by 1(799\d{3}|800\d{3}) ms", log), log
    assert re.search(r"wall clock stepped forward by 3(599\d{3}|600\d{3}) ms", log), log


# ---- /healthz tells the truth (defect 3) ------------------------------------------------

def health(server, timeout=1.0):
    """(status, body) of /healthz, or None when no answer came in `timeout` (a request can
    land on the stalled thread)."""
    import json
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(server.http + "/healthz", timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except (TimeoutError, OSError):
        return None


def wait_health(server, pred, seconds):
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        h = health(server)
        if h is not None:
            seen.append(h)
            if pred(*h):
                return h
        time.sleep(0.2)
    raise AssertionError("no matching /healthz in %ss; last %r" % (seconds, seen[-3:]))


def test_healthz_reports_a_stalled_ticker_and_thread_with_503():
    # Debug builds only: tick round 6 blocks thread 0 (the ticker's) for 8 seconds.
    with Server("--threads", "2", env={"RIDEPUSH_FAULT_STALL_TICKER": "6:8"}) as s:
        status, body = wait_health(s, lambda st, b: True, 5)
        assert status == 200 and body["status"] == "ok", body
        assert body["store"] == "ok" and len(body["thread_loop_age_ms"]) == 2
        assert body["last_tick_age_ms"] <= 5000
        status, body = wait_health(s, lambda st, b: st == 503, 15)
        assert body["status"] == "degraded"
        assert body["last_tick_age_ms"] > 5000, body
        assert body["thread_loop_age_ms"][0] > 5000, body
        assert body["thread_loop_age_ms"][1] <= 5000, body  # it answered this request
        assert body["store"] == "ok"
        # The stall ends: ok again by itself.
        status, body = wait_health(s, lambda st, b: st == 200, 10)
        assert body["status"] == "ok" and body["last_tick_age_ms"] <= 5000, body


def test_healthz_without_a_fault_stays_ok_while_ticking():
    with Server("--threads", "2") as s:
        seen = [wait_health(s, lambda st, b: True, 5) for _ in range(3)]
        time.sleep(2)
        seen.append(wait_health(s, lambda st, b: True, 5))
        assert all(st == 200 and b["status"] == "ok" for st, b in seen), seen
        assert seen[-1][1]["ticks"] >= 2
        assert max(seen[-1][1]["thread_loop_age_ms"]) <= 1500


def test_healthz_reports_a_store_that_cannot_write(tmp_path):
    from test_durability import fill, mounted_tmpfs
    with mounted_tmpfs(tmp_path / "small", "size=2m") as small:
        with Server(store=str(small / "rides.db")) as s, Client(s.ws) as c:
            assert c.request({"type": "start", "ride": "r-1"})["type"] == "state"
            assert health(s)[0] == 200
            filler = fill(str(small))
            e = c.request({"type": "start", "ride": "r-2"})
            assert (e["type"], e["code"]) == ("error", "unavailable"), e
            status, body = health(s)
            assert status == 503 and body["status"] == "degraded" and body["store"] == "failing", body
            assert body["last_tick_age_ms"] <= 5000  # only the store is at fault
            os.unlink(filler)
            assert c.request({"type": "start", "ride": "r-2"})["type"] == "state"
            status, body = health(s)
            assert status == 200 and body["store"] == "ok", body


# ---- a mistyped --store is refused (#15.10) --------------------------------------------

def serve_once(*args, timeout=15):
    from rp import BIN
    p = subprocess.run([BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--auth", "none",
                        "--public", os.path.join(ROOT, "public")] + list(args),
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout + p.stderr


def test_a_missing_store_file_needs_create_store(tmp_path):
    typo = tmp_path / "ridepsuh.db"
    rc, out = serve_once("--store", str(typo))
    assert rc != 0 and "serving" not in out, out
    assert str(typo) in out and "--create-store" in out, out
    assert not typo.exists(), "nothing was created"
    # With it, the file is made; later starts need no flag.
    with Server(store=str(typo)) as s, Client(s.ws) as c:
        assert c.request({"type": "start", "ride": "r-kept"})["type"] == "state"
    assert typo.exists()
    with Server(store=str(typo), create_store=False) as s:
        assert s.get("/rides/r-kept")[0] == 200
    # The environment variable does the same (deploy/ridepush.env sets it for the first start).
    fresh = tmp_path / "fresh.db"
    with Server(store=str(fresh), create_store=False, env={"RIDEPUSH_CREATE_STORE": "1"}):
        pass
    assert fresh.exists()
