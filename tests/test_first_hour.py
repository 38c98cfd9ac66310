"""What a newcomer and an operator trip over in the first hour (issue 18 items 7-11, and
issue 17's --version and --log-format), through the real binary and real sockets."""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time

import pytest
from websockets.sync.client import connect

from rp import BIN, ROOT, Client, Server
from test_security import ENV, control


def free_port(family=socket.AF_INET, host="127.0.0.1"):
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class Raw:
    """`ridepush serve` with any --host, its output lines kept by a reader thread (so every
    wait is bounded); stopped with SIGTERM."""

    def __init__(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen([BIN, "serve", "--store", "memory", "--public", os.path.join(ROOT, "public"), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e, cwd=ROOT)
        self.lines = []
        self.reader = threading.Thread(target=lambda: [self.lines.append(l.rstrip("\n")) for l in self.proc.stdout],
                                       daemon=True)
        self.reader.start()

    def wait_line(self, pattern, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                m = re.search(pattern, line)
                if m:
                    return m
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError("no line matching %r in:\n%s" % (pattern, "\n".join(self.lines)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.reader.join(5)
        return self.lines


def get(host, port, path, method="GET", headers=None):
    conn = http.client.HTTPConnection(host, port, timeout=5)
    conn.request(method, path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body


def run(*args, timeout=15):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


# ---- --version -------------------------------------------------------------------------------

def test_version_names_the_build_and_healthz_says_the_same():
    r = run("--version")
    assert r.returncode == 0
    m = re.fullmatch(r"ridepush (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n", r.stdout)
    assert m, r.stdout
    # make writes the commit in (BuildStamp.swift); the binary says what was written, and it
    # is a commit of this repository.
    stamp = os.path.join(ROOT, "Sources", "RidePushServer", "BuildStamp.swift")
    if os.path.exists(stamp):
        assert re.search(r'commit = "([^"]+)"', open(stamp).read()).group(1) == m.group(2)
        commit = m.group(2).split("-")[0]
        assert subprocess.run(["git", "-C", ROOT, "cat-file", "-e", commit + "^{commit}"]).returncode == 0
    with Server() as srv:
        status, health, _ = srv.get("/healthz")
    assert status == 200 and (health["version"], health["commit"]) == (m.group(1), m.group(2))


# ---- #18.7: --host ---------------------------------------------------------------------------

def test_host_0000_prints_what_is_bound_and_where_to_open_it():
    port = free_port()
    s = Raw("--host", "0.0.0.0", "--port", str(port), "--auth", "jwt", env=ENV)
    try:
        s.wait_line(r"serving http://0\.0\.0\.0:%d/ \(WebSocket ws://0\.0\.0\.0:%d/ws" % (port, port))
        s.wait_line(r"^ridepush: listening on every IPv4 interface; on this machine: http://127\.0\.0\.1:%d/$" % port)
        assert get("127.0.0.1", port, "/healthz")[0] == 200
    finally:
        lines = s.stop()
    assert not [l for l in lines if "serving http://127.0.0.1" in l], lines


def test_host_localhost_binds_the_loopback_address():
    port = free_port()
    s = Raw("--host", "localhost", "--port", str(port), "--auth", "none")
    try:
        s.wait_line(r"serving http://127\.0\.0\.1:%d/" % port)
        assert get("127.0.0.1", port, "/healthz")[0] == 200
    finally:
        s.stop()


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_host_ipv6_loopback_serves_http_and_websocket_with_real_peer_addresses():
    port = free_port(socket.AF_INET6, "::1")
    s = Raw("--host", "::1", "--port", str(port), "--auth", "none", "--max-connections-per-ip", "1")
    try:
        s.wait_line(r"serving http://\[::1\]:%d/ \(WebSocket ws://\[::1\]:%d/ws" % (port, port))
        status, _, body = get("::1", port, "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        with Client("ws://[::1]:%d/ws" % port) as dev:
            st = dev.request({"type": "start", "ride": "r-v6"})
            assert (st["type"], st["ride"], st["state"]) == ("state", "r-v6", "riding")
            # The per-address limit counts the IPv6 peer: a second socket from ::1 is refused.
            status, _, body = get("::1", port, "/ws", headers={
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
            assert status == 429 and json.loads(body)["error"]["message"] == "more than 1 WebSocket connections from ::1"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        s.stop()


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_host_ipv6_any_listens_on_ipv4_and_ipv6():
    port = free_port(socket.AF_INET6, "::")
    s = Raw("--host", "::", "--port", str(port), "--auth", "jwt", env=ENV)
    try:
        s.wait_line(r"serving http://\[::\]:%d/" % port)
        s.wait_line(r"^ridepush: listening on every interface; on this machine: http://\[::1\]:%d/$" % port)
        assert get("::1", port, "/healthz")[0] == 200
        assert get("127.0.0.1", port, "/healthz")[0] == 200
    finally:
        s.stop()


def test_host_that_is_not_an_address_is_refused_with_examples():
    r = run("serve", "--host", "example.invalid", "--port", "0", "--store", "memory")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("ridepush serve: --host example.invalid: not an IP address or localhost (e.g. 127.0.0.1, "
                        "0.0.0.0 for every IPv4 interface, ::1, or :: for every interface)\n")


# ---- #18.8: the port is taken ----------------------------------------------------------------

def test_port_taken_names_the_flag_and_make_variable():
    with Server() as srv:
        r = run("serve", "--port", str(srv.port), "--store", "memory", "--auth", "none")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == (
        "ridepush serve: port %d on 127.0.0.1 is already in use (another ridepush or program is listening "
        "there): pick another with --port N, or make run PORT=N" % srv.port)
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    assert "--port $(PORT)" in makefile  # PORT= is what make run passes on


# ---- #18.10: HEAD ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/index.html", "/healthz", "/plans", "/quote?seconds=192", "/rides/r-none",
                                  "/no-such-file"])
def test_head_answers_like_get_without_a_body(server, path):
    gs, gh, gb = get("127.0.0.1", server.port, path)
    hs, hh, hb = get("127.0.0.1", server.port, path, method="HEAD")
    assert hs == gs and hb == b""
    assert hh["content-type"] == gh["content-type"]
    assert len(gb) == int(gh["content-length"])
    if path == "/healthz":
        # Its body carries ages in ms (999 -> 1000 changes its length between two requests):
        # HEAD's length must be that of a GET just before or just after it.
        _, _, after = get("127.0.0.1", server.port, path)
        assert int(hh["content-length"]) in (len(gb), len(after))
    else:
        assert int(hh["content-length"]) == len(gb)


def test_head_on_metrics_and_other_methods_get_405_with_allow(server):
    assert get("127.0.0.1", server.port, "/metrics", method="HEAD")[0] == 200
    for method in ("POST", "PUT", "DELETE"):
        status, headers, body = get("127.0.0.1", server.port, "/healthz", method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD"
        assert json.loads(body) == {"error": {"code": "method_not_allowed", "message": "only GET and HEAD are served"}}


# ---- #18.11: /quote, plans -------------------------------------------------------------------

@pytest.mark.parametrize("query,message", [
    ("seconds=-1", "seconds=-1 is negative: whole seconds from 0 to 1000000000"),
    ("seconds=abc", "seconds=abc is not a number: whole seconds from 0 to 1000000000"),
    ("seconds=1.5", "seconds=1.5 has a fraction: whole seconds from 0 to 1000000000"),
    ("seconds=99999999999999999999", "seconds=99999999999999999999 is too large: at most 1000000000 (about 31 years)"),
    ("seconds=60&paused=-3", "paused=-3 is negative: whole seconds from 0 to 1000000000"),
    ("", "seconds= is required: whole seconds of riding, e.g. /quote?seconds=192"),
    ("seconds=60&minutes=1", 'unknown parameter "minutes" (known: plan, seconds, paused)'),
    ("seconds=60&seconds=61", "seconds= is given more than once"),
])
def test_quote_errors_say_what_was_wrong(server, query, message):
    status, body, _ = server.get("/quote" + ("?" + query if query else ""))
    assert (status, body) == (400, {"error": {"code": "bad_request", "message": message}})


def test_quote_still_answers_a_good_query(server):
    status, body, _ = server.get("/quote?plan=default&seconds=192&paused=5")
    assert status == 200 and (body["fare"], body["seconds"], body["paused"]) == (1040, 192, 5)


def test_plans_file_errors_give_line_and_column_and_say_why_it_cannot_be_read(tmp_path):
    bad = tmp_path / "plans.json"
    bad.write_text('{\n  "data": {\n    "plans": [,]\n  }\n}\n')
    r = run("serve", "--plans", str(bad), "--store", "memory", "--port", "0")
    assert r.returncode == 2
    assert r.stderr == "ridepush serve: --plans %s: system_pricing_plans: invalid JSON at line 3, column 15: expected a value\n" % bad
    missing = tmp_path / "nope.json"
    r = run("serve", "--plans", str(missing), "--store", "memory", "--port", "0")
    assert r.stderr == ("ridepush serve: --plans %s: no such file (give the path of a GBFS "
                        "system_pricing_plans.json; see plans.example.json)\n" % missing)
    r = run("serve", "--plans", str(tmp_path), "--store", "memory", "--port", "0")
    assert r.stderr == ("ridepush serve: --plans %s: is a directory; give the path of the JSON file in it "
                        "(e.g. %s/system_pricing_plans.json)\n" % (tmp_path, tmp_path))


def test_startup_lists_the_loaded_plans_and_plans_last_updated_is_when_they_were_loaded():
    path = os.path.join(ROOT, "plans.example.json")
    ids = [p["plan_id"] for p in json.load(open(path))["data"]["plans"]]
    t0 = time.time()
    with Server("--plans", path) as srv:
        deadline = time.monotonic() + 5
        while not [l for l in srv.lines if l.startswith("ridepush: plans from")] and time.monotonic() < deadline:
            time.sleep(0.05)
        line = [l for l in srv.lines if l.startswith("ridepush: plans from")][0]
        assert line.startswith("ridepush: plans from %s: " % path), line
        # The file's plans in file order, nothing added.
        assert re.findall(r'(\S+) "[^"]*" [A-Z]{3}', line[len("ridepush: plans from %s: " % path):]) == ids
        _, first, _ = srv.get("/plans")
        time.sleep(1.2)
        _, second, _ = srv.get("/plans")
    assert first["last_updated"] == second["last_updated"]
    loaded = time.mktime(time.strptime(first["last_updated"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert int(t0) - 1 <= loaded <= int(t0) + 10


def test_builtin_plan_is_listed_at_startup(server):
    deadline = time.monotonic() + 5
    while not [l for l in server.lines if l.startswith("ridepush: plan")] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 'ridepush: plan built in: default "Standard" KRW' in server.lines


# ---- #18.9: refused upgrades -----------------------------------------------------------------

UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def test_refused_upgrades_get_a_status_a_json_reason_and_a_printed_log_line():
    with Server("--allow-origin", "https://ride.example", "--max-connections-per-ip", "1") as srv:
        status, headers, body = get("127.0.0.1", srv.port, "/socket", headers=UPGRADE)
        assert status == 404 and headers["content-type"] == "application/json"
        assert json.loads(body) == {"error": {"code": "not_found", "message": "no WebSocket at /socket; the WebSocket is at /ws"}}
        status, _, body = get("127.0.0.1", srv.port, "/ws", headers=dict(UPGRADE, Origin="https://evil.example"))
        assert (status, json.loads(body)) == (403, {"error": {"code": "forbidden_origin",
                                                              "message": "origin https://evil.example is not allowed (--allow-origin)"}})
        with Client(srv.ws, origin="https://ride.example"):
            status, _, body = get("127.0.0.1", srv.port, "/ws", headers=dict(UPGRADE, Origin="https://ride.example"))
            assert (status, json.loads(body)["error"]["code"]) == (429, "too_many_connections")
        deadline = time.monotonic() + 3
        while len([l for l in srv.lines if "refused WebSocket upgrade" in l]) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    refused = [l for l in srv.lines if "refused WebSocket upgrade" in l]
    assert [re.sub(r"^\[[^\]]+\] ", "", l) for l in refused] == [
        "W: refused WebSocket upgrade from 127.0.0.1 (404): no WebSocket at /socket; the WebSocket is at /ws",
        "W: refused WebSocket upgrade from 127.0.0.1 (403): origin https://evil.example is not allowed (--allow-origin)",
        "W: refused WebSocket upgrade from 127.0.0.1 (429): more than 1 WebSocket connections from 127.0.0.1",
    ], srv.lines


# ---- #17.5: --log-format json ----------------------------------------------------------------

def test_log_format_json_is_one_object_per_line_with_the_fields_that_matter():
    with Server("--log-format", "json", auth="jwt", env=ENV) as srv:
        get("127.0.0.1", srv.port, "/nope", headers=UPGRADE)
        with Client(srv.ws + "?token=" + control("alice")) as dev:
            dev.request({"type": "start", "ride": "r-log"})
        bad = Client(srv.ws + "?token=garbage")
        err = bad.wait_for(lambda m: m.get("type") == "error", 3)
        assert err["code"] == "unauthorized"
        deadline = time.monotonic() + 3
        while not [l for l in srv.lines if "4401" in l] and time.monotonic() < deadline:
            time.sleep(0.05)
        bad.close()
    logs = [json.loads(l) for l in srv.lines if not l.startswith("ridepush: ")]
    assert logs, srv.lines
    for entry in logs:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["time"]), entry
        assert entry["level"] in ("error", "warn", "info") and entry["message"]
    serving = [e for e in logs if e["message"] == "serving"][0]
    assert serving["url"] == "http://127.0.0.1:%d/" % srv.port and serving["version"] and serving["commit"]
    refused = [e for e in logs if e["message"].startswith("refused WebSocket upgrade")][0]
    assert (refused["level"], refused["status"], refused["code"], refused["peer"]) == ("warn", 404, "not_found", "127.0.0.1")
    closed = [e for e in logs if e.get("close_code") == 4401][0]
    assert closed == {"time": closed["time"], "level": "info", "message": "closing connection from 127.0.0.1 with 4401: unauthorized",
                      "peer": "127.0.0.1", "rider": "", "close_code": 4401}
    signal = [e for e in logs if e["message"].startswith("signal ")][0]
    assert (signal["message"], signal["signal"]) == ("signal 15: draining (closing connections)", 15)


def test_log_format_text_is_unchanged_and_a_bad_format_is_refused():
    with Server() as srv:  # auth none: one warning line at start
        deadline = time.monotonic() + 3
        while not [l for l in srv.lines if "authentication is OFF" in l] and time.monotonic() < deadline:
            time.sleep(0.05)
    line = [l for l in srv.lines if "authentication is OFF" in l][0]
    assert re.fullmatch(r"\[\d{4}/\d\d/\d\d \d\d:\d\d:\d\d:\d{4}\] W: authentication is OFF \(--auth none\): anyone who "
                        r"can reach the port may start, end and watch any ride", line), line
    r = run("serve", "--log-format", "xml", "--store", "memory", "--port", "0")
    assert (r.returncode, r.stderr) == (2, "ridepush serve: --log-format xml: expected text or json\n")


# ---- #18.12: a host without systemd ----------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the script runs as root and drops to a user")
def test_run_without_systemd_keeps_env_file_secret_user_and_file_limit():
    import pwd
    import shutil
    import tempfile
    from test_security import SECRET
    base = tempfile.mkdtemp(prefix="ridepush-nosystemd-")
    try:
        os.chmod(base, 0o755)  # the service user must reach its state folder
        etc = os.path.join(base, "etc")
        os.mkdir(etc)
        port = free_port()
        store = os.path.join(base, "state", "ridepush.db")
        with open(os.path.join(etc, "ridepush.env"), "w") as f:
            f.write("RIDEPUSH_HOST=127.0.0.1\nRIDEPUSH_PORT=%d\nRIDEPUSH_PUBLIC=%s\nRIDEPUSH_STORE=%s\nRIDEPUSH_CREATE_STORE=1\n"
                    "RIDEPUSH_AUTH=jwt\nRIDEPUSH_SERVE_ARGS=--control-rate 7 --max-open-rides-per-rider 100\n"
                    % (port, os.path.join(ROOT, "public"), store))
        with open(os.path.join(etc, "jwt-secret"), "w") as f:
            f.write(SECRET)
        os.chmod(os.path.join(etc, "jwt-secret"), 0o600)
        env = dict(os.environ, RIDEPUSH_ETC=etc, RIDEPUSH_BIN=BIN, RIDEPUSH_USER="nobody")
        env.pop("RIDEPUSH_JWT_SECRET", None)
        proc = subprocess.Popen(["bash", os.path.join(ROOT, "deploy", "run-without-systemd.sh")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=base)
        try:
            lines = []
            threading.Thread(target=lambda: [lines.append(l) for l in proc.stdout], daemon=True).start()
            deadline = time.monotonic() + 15
            while not [l for l in lines if "serving" in l] and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            assert [l for l in lines if "serving http://127.0.0.1:%d/" % port in l], lines
            # No random secret was made: the env file's secret signs the tokens it accepts.
            assert not [l for l in lines if "no secret configured" in l], lines
            status = open("/proc/%d/status" % proc.pid).read()
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            assert uid == pwd.getpwnam("nobody").pw_uid
            assert os.stat(os.path.dirname(store)).st_uid == uid and os.path.exists(store)
            limits = open("/proc/%d/limits" % proc.pid).read()
            soft = int(re.search(r"^Max open files\s+(\d+)", limits, re.M).group(1))
            assert soft == min(1048576, int(re.search(r"^Max open files\s+\d+\s+(\d+)", limits, re.M).group(1)))
            with Client("ws://127.0.0.1:%d/ws?token=%s" % (port, control("alice"))) as dev:
                st = dev.request({"type": "start", "ride": "r-nosystemd"})
                assert (st["state"], st["owner"]) == ("riding", "alice")
                # RIDEPUSH_SERVE_ARGS reached the server: its --control-rate 7 is the one quoted.
                for i in range(12):
                    dev.send({"type": "start", "id": "burst-%d" % i})
                replies = [dev.wait_for(lambda m, i=i: m.get("id") == "burst-%d" % i, 3) for i in range(12)]
                limited = [r for r in replies if r["type"] == "error"]
                assert limited and {r["message"] for r in limited} == {"more than 7 control messages per second; slow down"}
            proc.terminate()
            assert proc.wait(10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_run_without_systemd_refuses_without_the_installed_files(tmp_path):
    env = dict(os.environ, RIDEPUSH_ETC=str(tmp_path), RIDEPUSH_BIN=BIN)
    r = subprocess.run(["bash", os.path.join(ROOT, "deploy", "run-without-systemd.sh")], env=env,
                       capture_output=True, text=True, timeout=10)
    expected = ("run-without-systemd: no %s/ridepush.env (deploy/install.sh installs it)\n" % tmp_path
                if os.geteuid() == 0 else
                "run-without-systemd: run it as root: it reads %s/jwt-secret (root-only), then drops to ridepush\n" % tmp_path)
    assert (r.returncode, r.stderr) == (2, expected)


def test_nginx_site_answers_the_acme_challenge_before_redirecting(tmp_path):
    import test_deploy
    if not (shutil_which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pytest.skip("nginx is not installed")
    webroot = tmp_path / "webroot"
    (webroot / ".well-known" / "acme-challenge").mkdir(parents=True)
    (webroot / ".well-known" / "acme-challenge" / "tok-123").write_text("tok-123.thumbprint")
    ng = test_deploy.Nginx(tmp_path / "nginx", free_port())
    conf = tmp_path / "nginx" / "ridepush.conf"
    text = conf.read_text()
    assert text.count("root /var/www/letsencrypt;") == 1
    conf.write_text(text.replace("root /var/www/letsencrypt;", "root %s;" % webroot))
    with ng:
        status, body, headers = ng.get("/.well-known/acme-challenge/tok-123", tls=False)
        assert (status, body, headers["Content-Type"]) == (200, b"tok-123.thumbprint", "text/plain")
        status, _, headers = ng.get("/.well-known/acme-challenge/missing", tls=False)
        assert status == 404
        status, _, headers = ng.get("/rides/r-1?x=1", tls=False)
        assert status == 301 and headers["Location"] == "https://127.0.0.1/rides/r-1?x=1"


def shutil_which(name):
    import shutil
    return shutil.which(name)


# ----------------------------------------------------------------------------------------
# Issue 26: a generated secret that survives restarts, and the links printed at start

def printed_links(lines):
    page = next(re.fullmatch(r"ridepush: open (http://127\.0\.0\.1:\d+/)\?token=(\S+)", l) for l in lines
                if l.startswith("ridepush: open "))
    device = next(re.fullmatch(r"ridepush: device client: RIDEPUSH_TOKEN=(\S+) (\S+) ride start --url (\S+)", l) for l in lines
                  if l.startswith("ridepush: device client: "))
    ops = next(re.fullmatch(r"ridepush: operator console: (http://127\.0\.0\.1:\d+/ops/)\?token=(\S+)", l) for l in lines
               if l.startswith("ridepush: operator console: "))
    assert page and device and ops, lines
    assert device.group(1) == page.group(2), "the device client gets the page's token"
    return page.group(2), ops.group(2), page.group(1), ops.group(1)


def ws_auth(url, token):
    with Client(url) as c:
        return c.request({"type": "auth", "id": "a", "token": token})


def test_a_restart_in_the_same_folder_keeps_every_printed_link_and_ride_watch_working(tmp_path, monkeypatch):
    from test_sdk import Lines
    monkeypatch.delenv("RIDEPUSH_JWT_SECRET", raising=False)
    store = str(tmp_path / "ridepush.db")
    secret_file = tmp_path / "ridepush.secret"
    srv = Server(store=store, auth="jwt").start()
    watch = None
    try:
        token, ops, page, console = printed_links(srv.lines)
        assert any(l == "ridepush: (no secret configured: made one and kept it in %s; the links above work after "
                   "a restart, and ridepush token finds it)" % secret_file for l in srv.lines), srv.lines
        assert oct(os.stat(secret_file).st_mode & 0o777) == "0o600"
        assert re.fullmatch(r"[0-9a-f]{64}\n", secret_file.read_text())
        assert get("127.0.0.1", srv.port, "/ops/")[0] == 200 and console == srv.http + "/ops/"
        env = {"RIDEPUSH_TOKEN": token}
        start = subprocess.run([BIN, "ride", "start", "--ride", "r-keep", "--url", srv.ws, "--lang", "en"],
                               capture_output=True, text=True, timeout=20, env={**os.environ, **env})
        assert start.returncode == 0, start.stderr
        watch = Lines([BIN, "ride", "watch", "r-keep", "--url", srv.ws, "--lang", "en"], env=env)
        watch.until(lambda l: l.startswith("r-keep riding"), 5)

        port = srv.port
        srv.stop()
        srv = Server(store=store, auth="jwt", port=port).start()
        assert any("using the one kept in %s" % secret_file in l for l in srv.lines), srv.lines
        # The links printed before the restart still work: page token and ops token, on
        # HTTP and on the WebSocket.
        assert ws_auth(srv.ws, token)["type"] == "authenticated"
        assert ws_auth(srv.ws, ops)["type"] == "authenticated"
        assert srv.get("/rides/r-keep?token=" + token)[0] == 200
        status, listing, _ = srv.get("/rides?token=" + ops)
        assert status == 200 and "r-keep" in json.dumps(listing), listing
        # ride watch went on through the restart, with the same token, to later figures.
        watch.until_err(lambda l: l == "connected to " + srv.ws, 30)
        watch.until(lambda l: l.startswith("r-keep riding") and int(re.search(r"(\d+)s", l).group(1)) >= 2, 10)
        assert watch.proc.poll() is None
        assert not any("signature" in l for _, l in watch.err), watch.err
        # ridepush token, run in the store's folder, signs for this server; --store from elsewhere too.
        for args, cwd in (([], str(tmp_path)), (["--store", store], ROOT)):
            made = subprocess.run([BIN, "token", "--control", "--sub", "u9", *args], capture_output=True, text=True,
                                  timeout=10, cwd=cwd, env={k: v for k, v in os.environ.items() if k != "RIDEPUSH_STORE"})
            assert made.returncode == 0, made.stderr
            assert ws_auth(srv.ws, made.stdout.strip())["type"] == "authenticated"
    finally:
        if watch:
            watch.stop()
        srv.stop()


def test_store_memory_keeps_a_per_process_secret_and_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.delenv("RIDEPUSH_JWT_SECRET", raising=False)
    with Server(store="memory", auth="jwt") as a:
        first, _, _, _ = printed_links(a.lines)
        assert any("a random one was made for this process" in l for l in a.lines), a.lines
        port = a.port
    with Server(store="memory", auth="jwt", port=port) as b:
        refused = ws_auth(b.ws, first)
        assert refused["type"] == "error" and refused["code"] == "unauthorized", "a new process, a new secret"


def test_bare_ridepush_is_a_usage_error_on_stderr_naming_every_command():
    out = subprocess.run([BIN], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and out.stdout == ""
    for needed in ("ridepush serve", "ride start", "ride pause|resume|get|share ID", "ride end ID", "ride watch ID",
                   "ridepush token", "ridepush bench", "--version"):
        assert needed in out.stderr, (needed, out.stderr)
    helped = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=10)
    assert helped.returncode == 0 and "ride pause|resume|get|share ID" in helped.stdout and helped.stderr == ""


def test_handshake_timeout_is_described_the_same_in_serve_help_and_docs_security():
    helped = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"  --handshake-timeout SECONDS\n((?:\s{20,}.*\n)+)", helped)
    assert m, helped
    in_help = re.sub(r"\s*\(default 10\)$", "", " ".join(m.group(1).split()))
    doc = open(os.path.join(ROOT, "docs", "security.md"), encoding="utf-8").read()
    row = re.search(r"^\| `--handshake-timeout SECONDS` \| 10 \| (.*) \|$", doc, re.M)
    assert row and row.group(1) == in_help, (row and row.group(1), in_help)
    for step in ("TLS handshake", "4401", "1008"):
        assert step in in_help
