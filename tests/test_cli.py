"""`ridepush ride` as a newcomer meets it (issue 18, items 5-6; issue 15, the Origin header):
from `make run`'s printed command to a working device client, one language per run, complete
lines with paused time and time left, a quiet Ctrl-C, a wrong port that names the URL."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from rp import BIN, ROOT, Server
from test_sdk import Lines
from test_security import ENV, control

HANGUL = re.compile(r"[\uac00-\ud7a3]")


def ride(*args, env=None, timeout=30):
    e = {k: v for k, v in os.environ.items() if k not in ("RIDEPUSH_TOKEN", "LANG", "LC_ALL")}
    e.update(env or {})
    return subprocess.run([BIN, "ride", *args], capture_output=True, text=True, env=e, timeout=timeout, cwd=ROOT)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_serve_prints_a_device_client_command_that_works_as_printed(monkeypatch):
    monkeypatch.delenv("RIDEPUSH_JWT_SECRET", raising=False)
    with Server(auth="jwt") as srv:
        printed = [l for l in srv.lines if l.startswith("ridepush: device client: ")]
        assert len(printed) == 1, srv.lines
        m = re.fullmatch(r"ridepush: device client: RIDEPUSH_TOKEN=(\S+) (\S+) ride start --url (\S+)", printed[0])
        assert m, printed[0]
        token, binary, url = m.groups()
        assert binary == BIN and url == srv.ws
        page = [l for l in srv.lines if l.startswith("ridepush: open ")][0]
        assert page.endswith("?token=" + token), "the same token as the page's"
        out = ride("start", "--url", url, "--lang", "en", env={"RIDEPUSH_TOKEN": token})
        assert out.returncode == 0, out.stderr
        assert re.fullmatch(r"r-[0-9a-z]+ riding 0m [01]s · 500 KRW\n", out.stdout), out.stdout
        assert out.stderr == ""


def test_without_a_token_the_cli_says_how_to_give_one():
    with Server(auth="jwt", env=ENV) as srv:
        out = ride("start", "--url", srv.ws, "--lang", "en")
        assert out.returncode == 1
        assert out.stdout == ""
        assert out.stderr.startswith("the server refused the connection: authenticate first"), out.stderr
        assert "--token TOKEN or RIDEPUSH_TOKEN" in out.stderr
        assert "the token= part of the page URL" in out.stderr
        ko = ride("start", "--url", srv.ws, env={"LANG": "ko_KR.UTF-8"})
        assert ko.returncode == 1
        assert "--token TOKEN 또는 RIDEPUSH_TOKEN" in ko.stderr and "token= 부분" in ko.stderr, ko.stderr
        ok = ride("start", "--url", srv.ws, "--lang", "en", "--token", control("u1"))
        assert ok.returncode == 0, ok.stderr


EN_LINE = re.compile(r"r-w (riding|paused) \d+m \d+s · [\d,]+ KRW( · paused \d+m \d+s)? · \d+m \d+s left")
KO_LINE = re.compile(r"r-w (이용 중|일시정지) \d+분 \d+초 · [\d,]+원( · 일시정지 \d+분 \d+초)? · 남은 시간 \d+분 \d+초")


def elapsed(l, lang):
    m = re.match(r"r-w \S+(?: 중)? (\d+)분 (\d+)초" if lang == "ko" else r"r-w \S+ (\d+)m (\d+)s", l)
    return int(m.group(1)) * 60 + int(m.group(2)) if m else None


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_watch_prints_complete_lines_in_one_language_with_paused_time_and_time_left(lang):
    # LC_ALL empty: LANG decides (LC_ALL would win over it).
    env = {"LANG": "ko_KR.UTF-8" if lang == "ko" else "en_US.UTF-8", "LC_ALL": ""}
    line_re = KO_LINE if lang == "ko" else EN_LINE
    warn_re = re.compile(r"r-w 시간 제한까지 (5분 [0-2]초|4분 5\d초) 남았습니다" if lang == "ko"
                         else r"r-w (5m [0-2]s|4m 5\ds) left before the time limit")
    with Server() as srv:
        assert ride("start", "--ride", "r-w", "--limit", "302", "--url", srv.ws, env=env).returncode == 0
        w = Lines([BIN, "ride", "watch", "r-w", "--url", srv.ws], env=env)
        try:
            got = []
            w.until(lambda l: any(warn_re.fullmatch(x) for _, x in got) and (elapsed(l, lang) or 0) >= 2, 8, got)
            assert ride("pause", "r-w", "--url", srv.ws, env=env).returncode == 0
            paused = " · 일시정지 0분 2초 · " if lang == "ko" else " · paused 0m 2s · "
            w.until(lambda l: paused in l, 6, got)
            w.proc.send_signal(signal.SIGINT)
            assert w.proc.wait(5) == 130
            time.sleep(0.2)
            assert w.err == [], "Ctrl-C prints nothing (no libwebsockets log line)"
        finally:
            w.stop()
        lines = [l for _, l in got]
        first = (r"r-w 이용 중 0분 [01]초 · 500원 · 남은 시간 5분 [12]초" if lang == "ko"
                 else r"r-w riding 0m [01]s · 500 KRW · 5m [12]s left")
        assert re.fullmatch(first, lines[0]), lines
        for a, b in zip(lines, lines[1:]):
            assert a != b, "no line printed twice: %r" % lines
        for l in lines:
            assert warn_re.fullmatch(l) or line_re.fullmatch(l), l
            if lang == "en":
                assert not HANGUL.search(l), l
            else:
                assert not re.search(r"[A-Za-z]", l.replace("r-w", "")), l
        # While paused the riding time stands still and the pause time grows.
        p = [l for l in lines if paused.strip(" ·") in l]
        assert len({elapsed(l, lang) for l in p}) == 1, p


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_receipt_is_in_the_same_language(lang):
    with Server() as srv:
        assert ride("start", "--ride", "r-rc", "--url", srv.ws).returncode == 0
        out = ride("end", "r-rc", "--distance", "1200", "--url", srv.ws, "--lang", lang)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        if lang == "en":
            assert re.fullmatch(r"r-rc ended 0m [01]s · 500 KRW", lines[0]), lines
            assert lines[1:] == ["  unlock 500 KRW", "  riding 0 min 0 KRW", "  total 500 KRW (returned by the rider)"]
        else:
            assert re.fullmatch(r"r-rc 반납 완료 0분 [01]초 · 500원", lines[0]), lines
            assert lines[1:] == ["  잠금 해제 500원", "  주행 0분 0원", "  합계 500원 (반납)"]
        # The page calls the unlock line the same (public/i18n.js: the Korean table, then the
        # English; the CLI writes English in lower case).
        ko_label, en_label = re.findall(r"'receipt\.unlock': '([^']*)'", open(os.path.join(ROOT, "public", "i18n.js"), encoding="utf-8").read())
        assert lines[1] == ("  %s 500 KRW" % en_label.lower() if lang == "en" else "  %s 500원" % ko_label)


def test_a_wrong_port_names_the_url():
    url = "ws://127.0.0.1:%d/ws" % free_port()
    t = time.monotonic()
    out = ride("get", "r-1", "--url", url, "--wait", "2", "--lang", "en")
    assert out.returncode == 1
    assert time.monotonic() - t < 6
    assert re.fullmatch(re.escape("cannot connect to " + url + ": ") + r".+ \(gave up after 2 s\)\n", out.stderr), out.stderr
    ko = ride("get", "r-1", "--url", url, "--wait", "2", "--lang", "ko")
    assert ko.stderr == url + " 에 2초 동안 연결할 수 없었습니다\n"


def test_the_cli_sends_no_origin_so_allow_origin_does_not_lock_it_out():
    with Server("--allow-origin", "https://rides.example.com", auth="jwt", env=ENV) as srv:
        # The allow-list is in force: a browser from elsewhere is refused.
        from rp import Client
        with pytest.raises(Exception):
            Client(srv.ws + "?token=" + control("u1"), origin="http://127.0.0.1:%d" % srv.port)
        out = ride("start", "--ride", "r-o", "--url", srv.ws, "--token", control("u1"), "--lang", "en")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("r-o riding ")


from test_security import certs  # noqa: E402,F401  (the self-signed certificate fixture)


def test_wss_with_a_self_signed_certificate_needs_insecure(certs):
    with Server("--tls-cert", certs["cert"], "--tls-key", certs["key"], auth="jwt", env=ENV) as srv:
        assert srv.ws.startswith("wss://")
        ok = ride("start", "--ride", "r-tls", "--url", srv.ws, "--token", control("u1"), "--insecure", "--lang", "en")
        assert ok.returncode == 0, ok.stderr
        assert ok.stdout.startswith("r-tls riding ")
        # Without --insecure the certificate is checked, and this one is trusted by nobody.
        refused = ride("get", "r-tls", "--url", srv.ws, "--token", control("u1"), "--wait", "3", "--lang", "en")
        assert refused.returncode == 1
        assert refused.stderr.startswith("cannot connect to " + srv.ws + ": "), refused.stderr


# ----------------------------------------------------------------------------------------
# Issue 26 item 5: the server's answer, shown at once

RETRY_EN = re.compile(r"unavailable: (.+); retrying in (\d+) s \((\d)/5\)")


def test_an_unavailable_store_is_shown_at_once_retried_and_then_reported_with_the_servers_message(tmp_path):
    from test_durability import fill, mounted_tmpfs
    with mounted_tmpfs(tmp_path / "small", "size=2m") as small:
        path = str(small / "rides.db")
        with Server(store=path) as srv:
            assert ride("start", "--ride", "r-u", "--url", srv.ws).returncode == 0
            filler = fill(str(small))
            # --wait 4: retries after 1 s and 2 s fit (answers at 1 s and 3 s); the next (4 s)
            # would come after the deadline, so the command stops at about 3 s with the answer.
            t = time.monotonic()
            out = ride("pause", "r-u", "--url", srv.ws, "--wait", "4", "--lang", "en")
            took = time.monotonic() - t
            assert out.returncode == 1 and out.stdout == "", out
            lines = out.stderr.splitlines()
            assert [RETRY_EN.fullmatch(l).group(2, 3) for l in lines[:2]] == [("1", "1"), ("2", "2")], lines
            assert path in RETRY_EN.fullmatch(lines[0]).group(1), "the server's own message"
            assert len(lines) == 3 and lines[2].startswith("error unavailable: ") and path in lines[2], lines
            assert 2.5 < took < 6, took
            ko = ride("pause", "r-u", "--url", srv.ws, "--wait", "2", "--lang", "ko")
            assert ko.returncode == 1
            assert ko.stderr.splitlines()[0].startswith("서버가 지금 기록할 수 없습니다 (") and "1초 후 다시 시도합니다 (1/5)" in ko.stderr
            assert ko.stderr.splitlines()[-1].startswith("오류: 서버가 지금 기록할 수 없습니다 ("), ko.stderr

            # Shown at once, then space again: the same request (same id) is applied on a retry.
            p = Lines([BIN, "ride", "pause", "r-u", "--url", srv.ws, "--lang", "en"])
            try:
                t = time.monotonic()
                p.until_err(lambda l: RETRY_EN.fullmatch(l) is not None, 5)
                assert time.monotonic() - t < 3, "the first answer is printed at once, not after --wait"
                assert RETRY_EN.fullmatch(p.err[0][1]).group(3) == "1", p.err
                os.unlink(filler)
                _, line = p.next(15)
                assert re.fullmatch(r"r-u paused \d+m \d+s · [\d,]+ KRW · paused 0m [01]s", line), line
                assert p.proc.wait(5) == 0
            finally:
                p.stop()
            assert srv.get("/rides/r-u")[1]["state"] == "paused"
