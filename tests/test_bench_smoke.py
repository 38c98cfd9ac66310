"""A smoke run of each bench mode (issue 29): benchmarks are not tests, but each mode must run
against the real server in the configuration it claims to measure and report what it did.
Small counts, bounded waits; the figures themselves are not judged here."""
import json
import os
import subprocess
import sys
import tempfile

from rp import BIN, ROOT, Server


def secret_file(d):
    path = os.path.join(d, "secret")
    with open(path, "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(path, 0o600)
    return path


def ops_token(secret):
    return subprocess.run([BIN, "token", "--control", "--ops", "--ttl", "10m", "--jwt-secret-file", secret],
                          stdout=subprocess.PIPE, text=True, check=True, timeout=30).stdout.strip()


def bench(*args, timeout=120):
    r = subprocess.run([BIN, "bench", *args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    assert r.stdout.strip(), r.stderr
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


def test_fan_out_as_make_run_serves_it_with_the_token_in_an_auth_frame():
    with tempfile.TemporaryDirectory() as d:
        secret = secret_file(d)
        token = ops_token(secret)
        with Server("--jwt-secret-file", secret, store=os.path.join(d, "r.db"), auth="jwt") as s:
            rc, out = bench("--url", s.ws, "-n", "60", "--duration", "2", "--token", token, "--auth-frame",
                            "--pid", str(s.proc.pid))
            assert rc == 0
            assert out["connected"] == 60 and out["failed"] == 0, out
            assert out["errors"] == {} and out["missed_in_window"] == 0, out
            assert out["ticks_received"] > 0 and out["server"]["alive"], out
            # The rides the bench started are the store's: 30 riding, owned by the token's subject.
            status, health, _ = s.get("/healthz")
            assert health["rides"]["riding"] == 30
            # Without the auth frame the same token is not sent at all: every start is refused.
            rc, out = bench("--url", s.ws, "-n", "4", "--duration", "1", "--connect-timeout", "10")
            assert out["ticks_received"] == 0, out


def test_wss_fan_out_verifies_the_servers_certificate():
    with tempfile.TemporaryDirectory() as d:
        key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
        with Server("--tls-cert", cert, "--tls-key", key) as s:
            assert s.ws.startswith("wss://")
            rc, out = bench("--url", s.ws, "--ca", cert, "-n", "40", "--duration", "2", "--pid", str(s.proc.pid))
            assert rc == 0 and out["url"].startswith("wss://"), out
            assert out["connected"] == 40 and out["missed_in_window"] == 0 and out["ticks_received"] > 0, out
            # Verification stays on: without the CA the server's self-signed certificate is refused.
            rc, out = bench("--url", s.ws, "-n", "4", "--duration", "1", "--connect-timeout", "10")
            assert out["connected"] == 0 and out["fail_reasons"] == {"tls": 4}, out


def test_open_rides_leaves_that_many_rides_open():
    with tempfile.TemporaryDirectory() as d:
        secret = secret_file(d)
        token = ops_token(secret)
        with Server("--jwt-secret-file", secret, "--control-rate", "1000000", store=os.path.join(d, "r.db"),
                    auth="jwt") as s:
            r = subprocess.run([BIN, "bench", "--transitions", "--open-rides", "250", "-n", "4", "--depth", "4",
                                "--url", s.ws, "--token", token, "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["open_rides"] == 250 and out["errors"] == 0, out
            status, health, _ = s.get("/healthz")
            assert health["rides"]["riding"] == 250


def test_tick_encode_builds_batches_without_a_server():
    """`bench --tick-encode` (issue 29): no sockets, a manual clock; the figures it prints parse,
    every watched ride's tick is in each batch, and an unwatched city encodes nothing."""
    rc, out = bench("--tick-encode", "--rides", "300", "--watched", "120", "--seconds", "3")
    assert rc == 0, out
    assert out["rides"] == 300 and out["watched"] == 120 and out["batches"] == 3, out
    assert out["frames_per_batch"] == 120 and out["bytes_per_batch"] > 120 * 100, out
    assert out["cpu_ms_p50"] >= 0 and out["cpu_ms_max"] >= out["cpu_ms_p50"], out
    rc, out = bench("--tick-encode", "--rides", "50", "--watched", "0", "--seconds", "2")
    assert rc == 0 and out["rides"] == 50 and out["bytes_per_batch"] == 0 and out["frames_per_batch"] == 0, out
    # Without --json: the same figures, for a person.
    r = subprocess.run([BIN, "bench", "--tick-encode", "--rides", "40", "--seconds", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "40 rides, 40 watched, 2 batches" in r.stdout and "CPU per batch: p50" in r.stdout, r.stdout
    assert "bytes per batch: " in r.stdout and "(40 frames" in r.stdout, r.stdout


def test_city_script_runs_end_to_end_on_a_few_rides():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-city.py"), "--rides", "120", "--window", "1",
                        "--stores", "sqlite", "--bin", BIN],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout
    for part in ("started          120 rides", "bytes per open ride", "operator feed    snapshot 120 rides",
                 "GET /rides       120 rides", "restart          serving with 120 rides loaded"):
        assert part in r.stdout, r.stdout


def test_tls_script_runs_each_way_it_can_on_a_few_subscribers():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-tls.py"), "-n", "60", "--window", "4",
                        "--bin", BIN],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=400, cwd=ROOT)
    assert r.returncode == 0, r.stdout
    for way in ("ws ", "wss-ridepush ", "wss-nginx "):
        line = next((l for l in r.stdout.splitlines() if l.startswith(way) and "connected" in l), None)
        assert line and "connected    60 failed    0" in line, r.stdout


def test_positions_bench_reports_what_it_measured():
    """scripts/bench-positions.py (issue 28) on a few rides for a few seconds: SQLite store, JWT,
    the Paris zones; every position it sent was counted, looked up in the zones, and the
    figures it reports are present."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-positions.py"), "--rides", "40", "--conns", "2",
                        "--quiet", "2", "--warmup", "2", "--window", "3", "--bin", BIN, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rides"] == 40 and out["client_sent"] >= 40 * 5, out
    # 40 a second; a 3 s window holds 3 or 4 rounds of them.
    assert 26 <= out["positions_per_s"] <= 54 and out["dropped_per_s"] == 0, out
    assert out["zone_lookups_per_s"] == out["positions_per_s"], out
    assert out["checkpoints_per_s"] >= 0 and out["cpu_us_per_position"] is not None, out
    assert all(v is not None for v in out["lateness_reporting_ms"] + out["lateness_quiet_ms"]), out


def test_ops_console_script_measures_the_console_on_a_few_rides():
    """scripts/bench-ops-console.py (issue 29) on 200 rides for 2 s: the rides it started are
    the console's, it scrolled, saw fleet frames and wrote the screenshot it names."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-ops-console.py"), "--rides", "200",
                        "--seconds", "2", "--settle", "1", "--sort", "fare", "--bin", BIN, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["opened"] == 200 and out["table_rows"] == 200 and out["counts"][0] == "200", out
    assert out["frames"] > 30 and 10 <= out["dom_rows"] <= 60 and out["scroll_jumps"] == 0, out
    assert out["on_screen"]["row"], out["on_screen"]
    assert out["fleet_frames"] >= 1 and out["fleet_bytes"] > 200 * 20 and out["feed_cost"]["n"] >= 1, out
    assert out["heap_mb"]["used"] > 0 and os.path.getsize(out["screenshot"]) > 10000, out
    assert out["errors"] == [], out["errors"]


def test_push_bench_reports_what_it_measured():
    """scripts/bench-push.py (issue 38) on 20 rides for 10 s, each pausing and resuming every 4 s:
    SQLite, JWT, the APNs stand-in over TLS with the private CA. Every ride's registration was
    pushed, every acknowledged transition reached the stand-in exactly once on one reused HTTP/2
    connection, and the figures it reports are present."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench-push.py"), "--rides", "20", "--window", "10",
                        "--period", "4", "--quiet", "2", "--conns", "2", "--watched", "2", "--bin", BIN, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rides"] == 20 and out["registration_pushes"] >= 20, out
    # 20 rides, each pausing every 4 s and resuming 2 s later, for 10 s: 4 transitions a ride,
    # 5 for the half whose offset in the period is under 2 s.
    assert out["transitions_sent"] == 90 and out["transitions_acknowledged"] == out["transitions_sent"], out
    assert out["lost"] == 0 and out["duplicated"] == 0 and out["client_errors"] == 0, out
    assert out["priority10_in_window"] >= out["transitions_sent"] - 10 and out["not_200_in_window"] == 0, out
    assert out["http_versions"] == ["2"] and out["http2_connections"] == 1, out
    assert out["requests_per_connection"] == out["pushes_in_window"], out
    assert out["cpu_us_per_push"] > 0 and out["server_cpu_ms_per_s"] > 0, out
    p50, p99, worst = out["commit_to_receipt_ms"]
    assert 0 <= p50 <= p99 <= worst < 10000, out
    assert out["watched_ticks"] >= 2 * 8 and None not in out["tick_lateness_watched_ms"], out
    assert None not in out["tick_lateness_server_ms"] and out["standin_cpu_ms_per_s"] >= 0, out
