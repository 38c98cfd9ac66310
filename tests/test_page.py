"""The browser page (issue 3) end to end: a real headless Chromium (Debian chromium +
chromium-driver, driven by Selenium) against the real `ridepush serve`. Every wait is an
explicit WebDriverWait with a bound; the page's numbers are read from stable ids and
data-* attributes (data-seconds is the server's `elapsed`, never a client count)."""
import base64
import hashlib
import hmac
import json
import os
import re
import signal
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

import browser as B
from rp import Client, Server

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
KO_TIME = re.compile(r"^(?:(\d+)시간 )?(\d+)분 (\d+)초$")


# ---- helpers -------------------------------------------------------------------------

def ko_seconds(s):
    """'3분 12초' / '1시간 3분 12초' -> seconds, so the text is checked, not only data-*."""
    m = KO_TIME.match(s)
    assert m, "이용 시간 not in 'N분 M초' form: %r" % s
    return int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + int(m.group(3))


def record_sends(drv):
    """Wrap WebSocket.send to keep every frame the page sends (DevTools evaluation is not
    subject to the page's CSP). Call before the socket is used for the frames of interest."""
    drv.execute_script("""
        if (!window.__sent) {
          window.__sent = [];
          const orig = WebSocket.prototype.send;
          WebSocket.prototype.send = function (d) { window.__sent.push(String(d)); return orig.call(this, d); };
        }""")


def sent(drv):
    return [json.loads(x) for x in drv.execute_script("return window.__sent || []")]


def click(drv, el_id):
    B.wait_enabled(drv, el_id).click()


def watch_advance(drv, steps, timeout=None):
    """Wait until the shown elapsed (data-seconds) has changed `steps` times; return the
    values in order. A MutationObserver in the page records every render, so a slow
    WebDriver round trip on a loaded machine cannot hide or merge ticks."""
    drv.execute_script("""
        const el = document.getElementById('elapsed');
        window.__seen = [el.dataset.seconds];
        if (!window.__seenObs) {
          window.__seenObs = new MutationObserver(() => {
            const v = el.dataset.seconds;
            if (window.__seen[window.__seen.length - 1] !== v) window.__seen.push(v);
          });
          window.__seenObs.observe(el, {attributes: true, attributeFilter: ['data-seconds']});
        }""")
    get = lambda d: [int(v) for v in d.execute_script("return window.__seen") if v not in (None, "")]  # noqa: E731
    B.wait(drv, lambda d: len(get(d)) > steps, timeout or steps + 5,
           "elapsed did not advance %d times: %r" % (steps, get(drv)))
    return get(drv)


def assert_second_by_second(seen):
    diffs = [b - a for a, b in zip(seen, seen[1:])]
    assert all(d > 0 for d in diffs), "elapsed went backwards: %r" % seen
    # One tick per second; a loaded CI machine may merge two polls once, never more.
    assert sum(1 for d in diffs if d != 1) <= 1 and max(diffs) <= 2, "not second by second: %r" % seen


def wait_paused_grows(drv, by=2, timeout=8):
    """Paused rides keep ticking (paused seconds grow); wait for `by` of them."""
    start = int(B.attr(drv, "elapsed", "data-paused"))
    B.wait(drv, lambda d: int(B.attr(d, "elapsed", "data-paused")) >= start + by, timeout,
           "paused seconds did not grow")


def no_page_errors(drv, allow=()):
    """No CSP violations or script errors in the console (favicon 404s aside, and what the
    test expects, e.g. refused connections while the server is down)."""
    allow = ("favicon",) + tuple(allow)
    bad = [e["message"] for e in B.console_errors(drv) if not any(a in e["message"] for a in allow)]
    assert not bad, bad


def start_ride(drv, base):
    drv.get(base + "/")
    click(drv, "btn-start")
    B.wait_state(drv, "riding")
    B.wait(drv, lambda d: "ride=" in d.current_url, 5, "URL never became the watch link")
    return B.text(drv, "ride-id")


# ---- tests ---------------------------------------------------------------------------

def test_rent_pause_resume_return(server, browsers):
    d = browsers(B.DESKTOP)
    d.get(server.http + "/")
    assert d.execute_script("return document.documentElement.lang") == "ko"
    start = B.wait_enabled(d, "btn-start")
    assert start.text == "대여하기"
    B.screenshot(d, "rent-1280-start")

    # A double click sends one start, not two: the button is disabled while it is in flight.
    record_sends(d)
    ActionChains(d).double_click(start).perform()
    B.wait_state(d, "riding")
    ride = B.text(d, "ride-id")
    assert ride and d.current_url.endswith("/?ride=" + ride)
    starts = [m for m in sent(d) if m["type"] == "start"]
    assert len(starts) == 1, starts

    assert B.text(d, "state-badge") == "이용 중"
    assert B.text(d, "fare") == "500원"
    rate = B.text(d, "rate-line")
    assert "잠금 해제 500원" in rate and "분당 180원" in rate, rate
    dialog = B.by_id(d, "ride-dialog")
    assert dialog.get_attribute("role") == "dialog"
    assert B.text(d, dialog.get_attribute("aria-labelledby")) == "킥보드 이용"
    assert B.by_id(d, "btn-pause").is_enabled() and B.by_id(d, "btn-end").is_enabled()
    assert not B.by_id(d, "btn-resume").is_enabled()

    # 이용 시간 advances second by second, and the text says what the server said.
    seen = watch_advance(d, 3)
    assert_second_by_second(seen)
    assert ko_seconds(B.text(d, "elapsed")) == B.seconds(d)
    assert B.text(d, "fare") == "500원"
    B.screenshot(d, "rent-1280-riding")

    # Pause: the time freezes while the server keeps ticking (paused seconds grow).
    click(d, "btn-pause")
    B.wait_state(d, "paused")
    assert B.text(d, "state-badge") == "일시정지"
    frozen = B.seconds(d)
    wait_paused_grows(d, 2)
    assert B.seconds(d) == frozen and ko_seconds(B.text(d, "elapsed")) == frozen
    assert B.by_id(d, "btn-resume").is_enabled() and not B.by_id(d, "btn-pause").is_enabled()
    B.screenshot(d, "rent-1280-paused")

    # Resume: it moves again from where it stopped.
    click(d, "btn-resume")
    B.wait_state(d, "riding")
    seen = watch_advance(d, 2)
    assert seen[0] in (frozen, frozen + 1), (frozen, seen)
    assert_second_by_second(seen)

    # Return: the receipt replaces the controls.
    click(d, "btn-end")
    B.wait_state(d, "ended")
    B.wait(d, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt")
    assert B.text(d, "state-badge") == "반납 완료"
    assert not B.by_id(d, "controls").is_displayed()
    rows = d.find_elements(By.CSS_SELECTOR, "#receipt-lines tr")
    assert rows and rows[0].get_attribute("data-label") == "unlock"
    # Named as the CLI names it (ridepush ride: "잠금 해제").
    assert rows[0].text.replace("\n", " ") == "잠금 해제 500원"
    assert B.text(d, "receipt-total") == "500원"
    assert "직접 반납" in B.text(d, "receipt-reason")
    B.screenshot(d, "rent-1280-receipt")

    # Every request carried its own UUID id.
    ids = [m["id"] for m in sent(d) if "id" in m]
    assert ids and all(UUID.match(i) for i in ids) and len(set(ids)) == len(ids), ids
    no_page_errors(d)

    # The server agrees with what the page showed.
    with Client(server.ws) as c:
        st = c.request({"type": "subscribe", "ride": ride})
    assert st["state"] == "ended" and st["fare"] == 500
    assert st["receipt"]["fare"] == int(B.attr(d, "receipt-total", "data-minor"))


def test_second_browser_sees_same_numbers_and_end(server, browsers):
    a = browsers(B.DESKTOP)
    ride = start_ride(a, server.http)

    # The share button yields the watch link; the phone opens exactly that link.
    click(a, "btn-share")
    B.wait(a, lambda d: B.attr(d, "share-url", "value"), 5, "no share link")
    url = B.attr(a, "share-url", "value")
    assert url.startswith(server.http + "/?ride=" + ride), url
    B.wait(a, lambda d: B.text(d, "share-status") in ("복사됨", "아래 링크를 복사하세요"), 5)

    b = browsers(B.PHONE)
    b.get(url)
    B.wait_state(b, "riding")
    assert B.text(b, "ride-id") == ride

    # Same ticks: both show the same elapsed (reads are ~ms apart, so allow one tick).
    for _ in range(3):
        watch_advance(b, 1)
        sa, sb = B.seconds(a), B.seconds(b)
        assert abs(sa - sb) <= 1, (sa, sb)
        assert B.text(a, "fare") == B.text(b, "fare") == "500원"
    B.screenshot(b, "watch-360-riding")

    # A pauses: B freezes on exactly the same number.
    click(a, "btn-pause")
    B.wait_state(b, "paused", 5)
    wait_paused_grows(b, 1)
    assert B.seconds(a) == B.seconds(b)
    assert B.text(b, "state-badge") == "일시정지"

    # A returns: B sees the end and the same receipt, without doing anything.
    click(a, "btn-end")
    B.wait_state(b, "ended", 5)
    B.wait(b, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt on the watcher")
    assert B.text(b, "receipt-total") == B.text(a, "receipt-total") == "500원"
    assert B.text(b, "elapsed") == B.text(a, "elapsed")
    B.screenshot(b, "watch-360-receipt")
    B.screenshot(a, "watch-1280-owner-receipt")
    no_page_errors(a)
    no_page_errors(b)


def test_server_restart_page_recovers(tmp_path, browsers):
    store = str(tmp_path / "rides.db")
    s1 = Server(store=store).start()
    try:
        d = browsers(B.PHONE)
        ride = start_ride(d, s1.http)
        watch_advance(d, 2)
        before = B.seconds(d)
        port = s1.port
    finally:
        s1.stop()

    # Down: the page says so and keeps the last numbers (dimmed), never inventing seconds.
    B.wait_conn(d, "reconnecting", 5)
    assert B.seconds(d) == before
    assert B.by_id(d, "btn-pause").is_enabled() is False
    B.screenshot(d, "restart-360-reconnecting")

    s2 = Server(store=store, port=port).start()
    try:
        # Back: it reconnects by itself (backoff is at most 5 s), resubscribes, and is
        # correct again — same as a fresh client subscribing to the server.
        B.wait_conn(d, "online", 15)
        B.wait_state(d, "riding", 5)
        watch_advance(d, 1, 5)
        assert B.seconds(d) >= before
        with Client(s2.ws) as c:
            st = c.request({"type": "subscribe", "ride": ride})
            tick = c.wait_for(lambda m: m.get("type") == "tick", 3)
        watch_advance(d, 1, 5)
        assert abs(B.seconds(d) - tick["elapsed"]) <= 1, (B.seconds(d), tick)
        assert st["state"] == "riding"
        assert not B.by_id(d, "error").is_displayed()
        assert B.by_id(d, "btn-pause").is_enabled()
        B.screenshot(d, "restart-360-recovered")
        no_page_errors(d, allow=("ERR_CONNECTION_REFUSED",))
    finally:
        s2.stop()


def test_request_in_flight_is_retried_with_same_id(tmp_path, browsers):
    """A pause sent just before the server dies is resent after the reconnect with the same
    id (so a server that saw it would replay its reply instead of pausing twice)."""
    store = str(tmp_path / "rides.db")
    s1 = Server(store=store).start()
    d = browsers(B.DESKTOP)
    try:
        B.record_sockets(d)
        start_ride(d, s1.http)
        watch_advance(d, 1)
        # Freeze the server so the pause is written to its socket but never answered.
        os.kill(s1.proc.pid, signal.SIGSTOP)
        click(d, "btn-pause")
        B.wait(d, lambda d: B.attr(d, "controls", "aria-busy") == "true", 3, "no request in flight")
        assert not B.by_id(d, "btn-pause").is_enabled() and not B.by_id(d, "btn-end").is_enabled()
        s1.kill9()
    except BaseException:
        if s1.proc.poll() is None:
            os.kill(s1.proc.pid, signal.SIGCONT)
            s1.stop()
        raise
    s2 = Server(store=store, port=s1.port).start()
    try:
        B.wait_state(d, "paused", 20)
        pauses = [m for m in sent(d) if m["type"] == "pause"]
        assert len(pauses) == 2 and pauses[0]["id"] == pauses[1]["id"], pauses
        assert len(d.execute_script("return window.__ws")) >= 2
        B.wait_conn(d, "online", 5)
    finally:
        s2.stop()


def test_silent_server_shows_reconnecting(server, browsers):
    """No tick for 3 s -> "reconnecting"; the numbers stay the server's last ones."""
    d = browsers(B.DESKTOP)
    start_ride(d, server.http)
    watch_advance(d, 1)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        last = B.seconds(d)
        B.wait_conn(d, "reconnecting", 6)
        assert B.seconds(d) == last
        assert "다시 연결" in B.text(d, "conn")
        B.screenshot(d, "silent-1280-reconnecting")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    B.wait_conn(d, "online", 15)
    watch_advance(d, 1, 5)


@pytest.mark.parametrize("size,tag", [(B.PHONE, "360"), (B.DESKTOP, "1280")])
def test_server_error_is_shown(server, browsers, size, tag):
    d = browsers(size)
    d.get(server.http + "/?ride=does-not-exist")
    err = B.wait(d, lambda d: B.by_id(d, "error").is_displayed() and B.by_id(d, "error"), 10,
                 "no error shown")
    assert err.get_attribute("data-code") == "ride_not_found"
    assert err.get_attribute("role") == "alert"
    assert "라이드를 찾을 수 없습니다" in err.text and "does-not-exist" in err.text, err.text
    # Nothing to watch, so a new rental is offered instead of an empty dialog.
    assert not B.by_id(d, "ride-dialog").is_displayed()
    B.wait_enabled(d, "btn-start", 5)
    B.screenshot(d, "error-%s-ride-not-found" % tag)
    # The message can be dismissed.
    click(d, "error-close")
    B.wait(d, lambda d: not B.by_id(d, "error").is_displayed(), 3)
    no_page_errors(d)


def test_english_toggle(server, browsers):
    d = browsers(B.PHONE)
    d.get(server.http + "/")
    toggle = B.wait_enabled(d, "lang-toggle")
    assert toggle.text == "English"
    toggle.click()
    B.wait(d, lambda d: d.execute_script("return document.documentElement.lang") == "en", 3)
    assert B.text(d, "btn-start") == "Rent"
    assert B.text(d, "lang-toggle") == "한국어"
    click(d, "btn-start")
    B.wait_state(d, "riding")
    watch_advance(d, 1)
    assert re.match(r"^\d+ min \d+ s$", B.text(d, "elapsed")), B.text(d, "elapsed")
    assert B.text(d, "fare") == "₩500"
    assert B.text(d, "state-badge") == "Riding"
    assert B.text(d, "rate-line") == "₩500 to unlock + ₩180/min"
    B.screenshot(d, "english-360-riding")
    # The choice survives a reload (same watch link).
    d.refresh()
    B.wait_state(d, "riding")
    assert B.text(d, "btn-pause") == "Pause"
    # And back to Korean.
    click(d, "lang-toggle")
    B.wait(d, lambda d: B.text(d, "btn-pause") == "일시정지", 3)
    assert B.text(d, "fare") == "500원"


def test_token_leaves_the_url(server, browsers):
    """Issue 15 item 9: a link's ?token=… is moved to sessionStorage and stripped from the
    address bar at once; the socket URL carries no token (it goes in the first `auth` frame);
    the links the page makes carry none; a reload still authenticates from sessionStorage.
    (Auth is off here, so the server accepts any token.)"""
    d = browsers(B.DESKTOP)
    B.record_sockets(d)
    d.get(server.http + "/?token=t0k.en-1")
    assert d.current_url == server.http + "/", d.current_url
    assert d.execute_script("return sessionStorage.getItem('rp.token')") == "t0k.en-1"
    click(d, "btn-start")
    B.wait_state(d, "riding")
    socks = d.execute_script("return window.__ws")
    assert socks and socks[0]["url"] == server.ws, socks
    assert socks[0]["protocols"] == "ride.v1"
    frames = [json.loads(x) for x in d.execute_script("return window.__sent")]
    assert frames[0]["type"] == "auth" and frames[0]["token"] == "t0k.en-1", frames[0]
    assert UUID.match(frames[0]["id"])
    ride = B.text(d, "ride-id")
    assert d.current_url == "%s/?ride=%s" % (server.http, ride)
    assert B.attr(d, "btn-new", "href") == server.http + "/"
    assert B.attr(d, "home-link", "href") == server.http + "/"
    assert "t0k" not in d.execute_script("return document.documentElement.outerHTML")
    # A reload keeps the token in this tab (sessionStorage), not in the URL.
    d.refresh()
    B.wait_state(d, "riding")
    assert d.current_url == "%s/?ride=%s" % (server.http, ride)
    socks = d.execute_script("return window.__ws")
    assert socks[-1]["url"] == server.ws
    frames = [json.loads(x) for x in d.execute_script("return window.__sent")]
    assert frames[0]["type"] == "auth" and frames[0]["token"] == "t0k.en-1", frames[0]
    assert frames[1]["type"] == "subscribe" and frames[1]["ride"] == ride
    # The form nginx redirects to (token in the fragment, never sent to a server) works too.
    d.get(server.http + "/?ride=" + ride + "#token=t0k.en-2")
    B.wait_state(d, "riding")
    assert d.current_url == "%s/?ride=%s" % (server.http, ride)
    assert d.execute_script("return sessionStorage.getItem('rp.token')") == "t0k.en-2"
    no_page_errors(d)


def test_auth_share_link_is_watch_only(browsers):
    """With tokens on: the rider's link (printed by the server) rents; the share link the
    page copies carries a watch token, shows the live ride without controls; a link with
    no token gets a readable "unauthorized" and the page stops retrying."""
    s = Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": ""}).start()  # no secret: the server makes one
    try:
        # The URL line follows the 'serving' line; the output reader may lag a moment.
        deadline = time.monotonic() + 5
        urls = []
        while not urls and time.monotonic() < deadline:
            urls = [m.group(0) for m in (re.search(r"https?://\S+[?&]token=\S+", l) for l in list(s.lines)) if m]
            time.sleep(0.05)
        assert urls, "server printed no page URL with a token:\n" + "\n".join(s.lines)
        a = browsers(B.DESKTOP)
        a.get(urls[0])
        click(a, "btn-start")
        B.wait_state(a, "riding")
        ride = B.text(a, "ride-id")
        click(a, "btn-share")
        B.wait(a, lambda d: B.attr(d, "share-url", "value"), 5, "no share link")
        share = B.attr(a, "share-url", "value")
        assert share.startswith(s.http + "/?ride=" + ride + "&token="), share

        b = browsers(B.PHONE)
        b.get(share)
        assert b.current_url == s.http + "/?ride=" + ride, "the share token stays in the URL"
        B.wait_state(b, "riding")
        watch_advance(b, 1)
        # Issue 18 item 2: a watcher sees only what a watcher can do.
        assert not B.by_id(b, "controls").is_displayed()
        assert not B.by_id(b, "start-panel").is_displayed()
        assert not B.by_id(b, "btn-share").is_displayed(), "a watcher's share answers forbidden"
        assert B.text(b, "watch-note") == "공유받은 라이드를 보고 있습니다 (보기 전용)."
        B.screenshot(b, "auth-360-watcher")
        click(a, "btn-end")
        B.wait_state(b, "ended", 5)
        B.wait(b, lambda d: B.by_id(d, "receipt").is_displayed(), 5)
        assert not B.by_id(b, "btn-new").is_displayed(), "a watch token cannot rent again"
        assert not B.by_id(b, "btn-share").is_displayed()
        B.screenshot(b, "auth-360-watcher-ended")
        # The home link with a watch token: never an empty page, say why and what to do.
        B.by_id(b, "home-link").click()
        B.wait(b, lambda d: B.by_id(d, "notice-panel").is_displayed(), 5, "blank page for a watcher at /")
        assert B.attr(b, "notice-panel", "data-kind") == "watch"
        assert B.text(b, "notice-title") == "보기 전용 링크입니다"
        assert "본인의 링크" in B.text(b, "notice-text")
        assert not B.by_id(b, "start-panel").is_displayed()
        B.screenshot(b, "auth-360-watcher-home")

        # Issue 18 item 3: no token on a server that needs one -> told at once how to get in.
        c = browsers(B.PHONE)
        c.get(s.http + "/?ride=" + ride)
        B.wait(c, lambda d: B.by_id(d, "notice-panel").is_displayed(), 5, "no notice without a token")
        assert B.attr(c, "notice-panel", "data-kind") == "token"
        assert B.text(c, "notice-title") == "들어가려면 토큰이 담긴 링크가 필요합니다"
        assert "?token=" in B.text(c, "notice-text") and "공유 링크" in B.text(c, "notice-text")
        B.wait_conn(c, "stopped", 5)
        assert not B.by_id(c, "error").is_displayed()
        B.screenshot(c, "auth-360-no-token")
        no_page_errors(a)
        no_page_errors(b)
    finally:
        s.stop()


SECRET = "page-test-secret-0123456789-abcdefghijkl"  # >= 32 bytes


def hs256(claims, secret=SECRET):
    """A token as a deployment's own login service would mint it (RIDEPUSH_JWT_SECRET)."""
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    signing_input = enc(b'{"alg":"HS256","typ":"JWT"}') + "." + enc(json.dumps(claims).encode())
    return signing_input + "." + enc(hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest())


def test_auth_configured_secret_rider_token(browsers):
    """With RIDEPUSH_JWT_SECRET set (as deployed): the page opened with a rider's control
    token rents, pauses, resumes and returns; the ride belongs to that rider (another rider's
    token is refused it); a page with a forged token is told "unauthorized" and stops."""
    s = Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    try:
        now = int(time.time())
        token = hs256({"sub": "rider-pat", "scope": "control", "exp": now + 3600, "iat": now})
        assert not any("?token=" in l for l in s.lines), "a configured secret prints no token"
        d = browsers(B.PHONE)
        d.get(s.http + "/?token=" + token)
        click(d, "btn-start")
        B.wait_state(d, "riding")
        ride = B.text(d, "ride-id")
        assert d.current_url == "%s/?ride=%s" % (s.http, ride)
        watch_advance(d, 2)
        click(d, "btn-pause")
        B.wait_state(d, "paused")
        click(d, "btn-resume")
        B.wait_state(d, "riding")
        # A reload (the watch link with the token) reattaches with controls.
        d.refresh()
        B.wait_state(d, "riding")
        assert B.by_id(d, "controls").is_displayed()
        with Client(s.ws + "?token=" + token) as me, \
                Client(s.ws + "?token=" + hs256({"sub": "rider-sam", "scope": "control", "exp": now + 3600})) as other:
            assert me.request({"type": "get", "ride": ride})["state"] == "riding"
            assert other.request({"type": "end", "ride": ride})["code"] == "forbidden"
            assert other.request({"type": "subscribe", "ride": ride})["code"] == "forbidden"
        click(d, "btn-end")
        B.wait_state(d, "ended")
        B.wait(d, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt")
        assert B.text(d, "receipt-total") == "500원"
        no_page_errors(d)

        forged = hs256({"sub": "rider-pat", "scope": "control", "exp": now + 3600}, secret="x" * 40)
        f = browsers(B.PHONE)
        f.get("%s/?ride=%s&token=%s" % (s.http, ride, forged))
        B.wait(f, lambda d: B.by_id(d, "notice-panel").is_displayed(), 10, "forged token: no notice")
        assert B.attr(f, "notice-panel", "data-kind") == "dead"
        assert B.text(f, "notice-title") == "이 링크는 더 이상 작동하지 않습니다"
        B.wait_conn(f, "stopped", 5)
    finally:
        s.stop()


def test_formats_through_intl(server, browsers):
    """The page's formatting (i18n.js) in the real browser: hours only past 60 minutes,
    money from minor units with the currency's own exponent, grouping from Intl."""
    d = browsers(B.PHONE)
    d.get(server.http + "/")
    B.wait_enabled(d, "btn-start")
    f = lambda js, *a: d.execute_script("return window.RP_I18N." + js, *a)  # noqa: E731
    assert f("duration('ko', 192)") == "3분 12초"
    assert f("duration('ko', 3599)") == "59분 59초"
    assert f("duration('ko', 3725)") == "1시간 2분 5초"
    assert f("duration('en', 3725)") == "1 h 2 min 5 s"
    assert f("money('ko', 1040, 'KRW')") == "1,040원"
    assert f("money('ko', 1234567, 'KRW')") == "1,234,567원"
    assert f("money('en', 1040, 'KRW')") == "₩1,040"
    assert f("money('en', 1234, 'USD')") == "$12.34"
    assert f("money('ko', 200, 'USD')") == "US$2.00"


def test_phone_layout_and_keyboard(server, browsers):
    d = browsers(B.PHONE)
    d.get(server.http + "/")
    B.wait_enabled(d, "btn-start")
    # Keyboard only: Tab to 대여하기 and press Enter.
    body = d.find_element(By.TAG_NAME, "body")
    body.click()
    for _ in range(6):
        ActionChains(d).send_keys(Keys.TAB).perform()
        if d.switch_to.active_element.get_attribute("id") == "btn-start":
            break
    assert d.switch_to.active_element.get_attribute("id") == "btn-start"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    B.wait_state(d, "riding")
    # Focus stays in the dialog (on 일시정지), and Space pauses.
    B.wait(d, lambda d: d.switch_to.active_element.get_attribute("id") == "btn-pause", 3,
           "focus did not move to 일시정지")
    ActionChains(d).send_keys(Keys.SPACE).perform()
    B.wait_state(d, "paused")
    B.wait(d, lambda d: d.switch_to.active_element.get_attribute("id") == "btn-resume", 3)

    # Fits 360 px: nothing scrolls sideways, touch targets are big enough.
    assert d.execute_script("return document.documentElement.scrollWidth") <= 360
    for el_id in ("btn-pause", "btn-resume", "btn-end", "btn-share"):
        h = d.execute_script("return document.getElementById(arguments[0]).getBoundingClientRect().height", el_id)
        assert h >= 44, (el_id, h)
    # The per-second numbers are not announced; state changes are (polite live region).
    assert B.attr(d, "elapsed", "role") == "timer"
    assert B.by_id(d, "elapsed").get_attribute("aria-live") in (None, "off")
    assert B.attr(d, "ride-status", "aria-live") == "polite"
    assert B.text(d, "ride-status") == "일시정지되었습니다."
    B.screenshot(d, "layout-360-paused-focus")
    # Tab to 반납하기, Enter: the receipt shows and focus lands on 새로 대여하기.
    ActionChains(d).send_keys(Keys.TAB).perform()
    assert d.switch_to.active_element.get_attribute("id") == "btn-end"
    ActionChains(d).send_keys(Keys.ENTER).perform()
    B.wait_state(d, "ended")
    B.wait(d, lambda d: d.switch_to.active_element.get_attribute("id") == "btn-new", 3,
           "focus did not move to 새로 대여하기")
    assert d.switch_to.active_element.get_attribute("href") == server.http + "/"
    assert d.execute_script("return document.documentElement.scrollWidth") <= 360
    B.screenshot(d, "layout-360-receipt")
    no_page_errors(d)


def wait_figures_grey(drv, timeout=10):
    return B.wait(drv, lambda d: float(d.execute_script(
        "return getComputedStyle(document.getElementById('elapsed')).opacity")) < 0.6, timeout,
        "the figures are not greyed")


def test_restart_with_new_secret_is_never_shown_live(tmp_path, browsers):
    """Issue 18 item 1: `make run` makes a new secret on every start, so after a restart the
    page's token is refused (4401). The figures must stay greyed, the page must say the link
    no longer works and what to do, and nothing may say "reconnected"."""
    store = str(tmp_path / "rides.db")
    s1 = Server(store=store, auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    now = int(time.time())
    token = hs256({"sub": "rider-pat", "scope": "control", "exp": now + 3600, "iat": now})
    d = browsers(B.PHONE)
    try:
        d.get(s1.http + "/?token=" + token)
        click(d, "btn-start")
        B.wait_state(d, "riding")
        watch_advance(d, 2)
        assert float(d.execute_script("return getComputedStyle(document.getElementById('elapsed')).opacity")) == 1
    finally:
        s1.stop()
    s2 = Server(store=store, port=s1.port, auth="jwt",
                env={"RIDEPUSH_JWT_SECRET": SECRET[::-1]}).start()
    try:
        B.wait_conn(d, "stopped", 20)
        B.wait(d, lambda d: B.by_id(d, "link-dead").is_displayed(), 5, "no dead-link notice")
        wait_figures_grey(d, 3)
        assert B.text(d, "conn") == "연결 끊김"
        text = B.text(d, "link-dead")
        assert "이 링크는 더 이상 작동하지 않습니다." in text, text
        assert "새 링크를 여세요" in text and "?token=" in text, text
        assert "마지막으로 받은 값" in text, text
        assert B.text(d, "ride-status") == "이 링크는 더 이상 작동하지 않습니다."
        assert "다시 연결되었습니다" not in d.find_element(By.TAG_NAME, "body").text
        assert not B.by_id(d, "error").is_displayed()
        for el_id in ("btn-pause", "btn-end"):
            assert not B.by_id(d, el_id).is_enabled()
        assert not B.by_id(d, "btn-share").is_displayed()
        # Frozen means frozen: the numbers do not move, and stay grey, while the server bills on.
        shown = B.seconds(d)
        time.sleep(2.2)
        assert B.seconds(d) == shown
        wait_figures_grey(d, 1)
        # Issue 26: at 360 px the Korean words of the notice stay whole (keep-all).
        for el in ("dead-title", "dead-text"):
            assert B.broken_words(d, el) == [], (el, B.broken_words(d, el))
        B.screenshot(d, "restart-360-link-dead")
        # English says the same.
        click(d, "lang-toggle")
        B.wait(d, lambda d: "This link no longer works." in B.text(d, "link-dead"), 3)
        assert "Open a new link" in B.text(d, "link-dead")
        no_page_errors(d, allow=("ERR_CONNECTION_REFUSED",))
    finally:
        s2.stop()


def test_bare_url_on_auth_server_says_how_to_get_in(browsers):
    """Issue 18 item 3: the bare URL of a server with tokens: no enabled 대여하기 that fails
    later, but at once a notice saying to open the printed ?token= link."""
    s = Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    try:
        d = browsers(B.DESKTOP)
        d.get(s.http + "/")
        B.wait(d, lambda d: B.by_id(d, "notice-panel").is_displayed(), 3, "no notice at once")
        assert B.attr(d, "notice-panel", "data-kind") == "token"
        assert not B.by_id(d, "start-panel").is_displayed()
        assert not B.by_id(d, "btn-start").is_enabled()
        assert "터미널에 출력된 주소" in B.text(d, "notice-text")
        assert B.text(d, "conn") == "연결 끊김"
        B.screenshot(d, "bare-1280-no-token")
        no_page_errors(d)
    finally:
        s.stop()


def test_paused_for_and_billed_labels_and_no_share_after_end(server, browsers):
    """Issue 18 item 4: while paused the page shows how long the pause has lasted; the
    receipt says which time was billed; the share button goes once the ride has ended."""
    d = browsers(B.DESKTOP)
    start_ride(d, server.http)
    assert not B.by_id(d, "paused-for").is_displayed()
    click(d, "btn-pause")
    B.wait_state(d, "paused")
    wait_paused_grows(d, 2)
    B.wait(d, lambda d: B.by_id(d, "paused-for").is_displayed(), 3, "no paused time shown")

    def shown_pause(d):
        secs = int(B.attr(d, "paused-for", "data-seconds"))
        return secs, B.text(d, "paused-for")
    secs, txt = shown_pause(d)
    assert secs >= 2 and secs == int(B.attr(d, "elapsed", "data-paused")), (secs, B.attr(d, "elapsed", "data-paused"))
    assert txt.startswith("일시정지 ") and "째" in txt and "요금이 붙지 않습니다" in txt, txt
    assert ko_seconds(txt.split(" · ")[0][len("일시정지 "):-1]) == secs, txt
    B.screenshot(d, "paused-1280-paused-for")
    click(d, "btn-resume")
    B.wait_state(d, "riding")
    assert not B.by_id(d, "paused-for").is_displayed()
    assert B.by_id(d, "btn-share").is_displayed()
    # A second pause shows its own length (from the state's paused_since), not the total.
    first = int(B.attr(d, "elapsed", "data-paused"))
    click(d, "btn-pause")
    B.wait_state(d, "paused")
    wait_paused_grows(d, 1)
    B.wait(d, lambda d: B.by_id(d, "paused-for").is_displayed(), 3)
    total = int(B.attr(d, "elapsed", "data-paused"))
    this = int(B.attr(d, "paused-for", "data-seconds"))
    assert total > first and this < total and abs(this - (total - first)) <= 1, (first, total, this)
    click(d, "btn-end")
    B.wait_state(d, "ended")
    B.wait(d, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt")
    assert not B.by_id(d, "btn-share").is_displayed(), "share button after the end"
    times = B.text(d, "receipt-times")
    # The default plan bills completed minutes and no pause: a ride of seconds was billed
    # only its unlock, so neither time says "(과금)", and no "일시정지 요금 0원" line.
    assert B.attr(d, "receipt-times", "data-pause-billed") == "false"
    assert B.attr(d, "receipt-times", "data-riding-billed") == "false"
    assert "(과금)" not in times, times
    parts = times.split(" · ")
    assert [p for p in parts if p.startswith("이용")][0].endswith("(요금 없음)"), times
    paused_part = [p for p in parts if p.startswith("일시정지")]
    assert len(paused_part) == 1 and paused_part[0].endswith("(요금 없음)"), times
    rows = {r.get_attribute("data-label"): r.text.replace("\n", " ")
            for r in d.find_elements(By.CSS_SELECTOR, "#receipt-lines tr")}
    assert rows == {"unlock": "잠금 해제 500원", "riding": "주행 0분 0원"}, rows
    B.screenshot(d, "paused-1280-receipt-labels")
    no_page_errors(d)


def test_page_links_with_tokens_never_reach_nginx_logs(tmp_path):
    """Issue 15 item 9 behind nginx (deploy/nginx/ridepush.conf, the real file): a link with
    a token is answered by nginx itself with the token moved into the fragment, so no
    request line with a token goes upstream, and none is written to the access or the error
    log even while RidePush is down (a 502 logs the whole request line)."""
    from test_deploy import Nginx
    srv = Server().start()
    ng = Nginx(tmp_path, srv.port).start()
    try:
        status, _, headers = ng.get("/?ride=r-1&token=SECRET-PAGE-TOKEN")
        assert status == 302 and headers["Location"] == "/?ride=r-1#token=SECRET-PAGE-TOKEN", (status, dict(headers))
        status, _, headers = ng.get("/ops/?token=SECRET-OPS-TOKEN")
        assert status == 302 and headers["Location"] == "/ops/?ride=#token=SECRET-OPS-TOKEN", (status, dict(headers))
        status, body, _ = ng.get("/?ride=r-1")
        assert status == 200 and b"<html" in body.lower()
        srv.stop()
        # RidePush down: the page link still never reaches the upstream (no 502 line with
        # its token); the asset and socket requests the page makes carry none.
        status, _, headers = ng.get("/?ride=r-1&token=SECRET-WHILE-DOWN")
        assert status == 302, status
        for path in ("/ws", "/app.js", "/ops/"):
            status, _, _ = ng.get(path)
            assert status == 502, (path, status)
        site_errors = ng.logs / "ridepush.error.log"
        deadline = time.monotonic() + 5
        logs = ""
        while time.monotonic() < deadline and logs.count("upstream") < 3:
            time.sleep(0.1)
            logs = site_errors.read_text() if site_errors.exists() else ""
        logs += ng.error_log()
        assert logs.count("upstream") >= 3, logs
        access = (ng.logs / "ridepush.access.log").read_text()
        for secret in ("SECRET-PAGE-TOKEN", "SECRET-OPS-TOKEN", "SECRET-WHILE-DOWN"):
            assert secret not in logs, logs
            assert secret not in access, access
    finally:
        ng.stop()
        srv.stop()


# ---- issue 26: another rider's ride, receipts per plan, Korean line breaks ---------------

@pytest.mark.parametrize("size,tag", [(B.PHONE, "360"), (B.DESKTOP, "1280")])
def test_another_riders_ride_is_a_notice_not_a_banner(browsers, size, tag):
    """A link to someone else's ride (forbidden) shows, in place of the ride modal, a notice
    saying whose it is not and what to do, with a new rental for a rider, the way an unknown
    ride shows the start panel; no error banner over an empty page. A share link for
    another ride says so without offering a rental."""
    s = Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    try:
        now = int(time.time())
        ann = hs256({"sub": "rider-ann", "scope": "control", "exp": now + 3600, "iat": now})
        bo = hs256({"sub": "rider-bo", "scope": "control", "exp": now + 3600, "iat": now})
        with Client(s.ws + "?token=" + ann) as c:
            theirs = c.request({"type": "start"})["ride"]
            other = c.request({"type": "start"})["ride"]
        d = browsers(size)
        d.get("%s/?ride=%s&token=%s" % (s.http, theirs, bo))
        B.wait(d, lambda d: B.attr(d, "notice-panel", "data-kind") == "forbidden", 10, "no forbidden notice")
        assert B.by_id(d, "notice-panel").is_displayed()
        assert not B.by_id(d, "ride-dialog").is_displayed()
        assert not B.by_id(d, "error").is_displayed(), B.text(d, "error")
        assert B.text(d, "notice-title") == "다른 라이더의 라이드입니다"
        text = B.text(d, "notice-text")
        assert theirs in text and "공유 링크" in text, text
        assert d.execute_script("return document.body.dataset.mode") == "notice"
        assert B.attr(d, "notice-new", "href") == s.http + "/"
        width, inner = B.page_width(d)
        assert width <= inner == size[0], (width, inner)
        if tag == "360":
            for el in ("notice-title", "notice-text"):
                assert B.broken_words(d, el) == [], (el, B.broken_words(d, el))
        B.screenshot(d, "forbidden-%s-notice" % tag)
        # English says the same.
        click(d, "lang-toggle")
        B.wait(d, lambda d: B.text(d, "notice-title") == "This is another rider's ride", 3)
        click(d, "lang-toggle")
        # The rental it offers works: the start panel, then a ride of this rider's own.
        B.wait_enabled(d, "notice-new").click()
        B.wait_enabled(d, "btn-start", 5)
        assert not B.by_id(d, "notice-panel").is_displayed()
        click(d, "btn-start")
        B.wait_state(d, "riding")
        assert B.text(d, "ride-id") not in (theirs, other)
        no_page_errors(d)

        # A share link (watch token) for one ride, opened on another: no rental offered.
        watch = hs256({"sub": "share:" + other, "scope": "watch", "rides": [other], "exp": now + 3600, "iat": now})
        w = browsers(size)
        w.get("%s/?ride=%s&token=%s" % (s.http, theirs, watch))
        B.wait(w, lambda d: B.attr(d, "notice-panel", "data-kind") == "forbidden", 10, "watcher: no forbidden notice")
        assert "이 공유 링크로 볼 수 없습니다" in B.text(w, "notice-text")
        assert not B.by_id(w, "notice-new").is_displayed()
        assert not B.by_id(w, "start-panel").is_displayed() and not B.by_id(w, "error").is_displayed()
        B.screenshot(w, "forbidden-%s-watcher" % tag)
        no_page_errors(w)
    finally:
        s.stop()


PLANS = os.path.join(os.path.dirname(__file__), "..", "plans.example.json")


def ride_on_plan(server, drv, plan):
    """Start a ride on `plan` (the page's start button takes the default plan), watch it in
    the page, ride at least a second, pause at least a second, return: the receipt."""
    with Client(server.ws) as c:
        ride = c.request({"type": "start", "plan": plan})["ride"]
    drv.get(server.http + "/?ride=" + ride)
    B.wait_state(drv, "riding")
    B.wait(drv, lambda d: B.seconds(d) >= 1, 5, "no riding second")
    click(drv, "btn-pause")
    B.wait_state(drv, "paused")
    wait_paused_grows(drv, 1)
    click(drv, "btn-end")
    B.wait_state(drv, "ended")
    B.wait(drv, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt")
    with Client(server.ws) as c:
        receipt = c.request({"type": "get", "ride": ride})["receipt"]
    shown = [(r.get_attribute("data-label"), r.text.replace("\n", " "))
             for r in drv.find_elements(By.CSS_SELECTOR, "#receipt-lines tr")]
    return receipt, shown, B.text(drv, "receipt-times").split(" · ")


def test_receipt_lines_and_billed_times_per_plan(browsers):
    """Issue 26 item 7: a plan billing started minutes and pauses (seoul-day) shows its pause
    line and "(과금)" beside both times; a plan billing completed minutes and no pause
    (seoul-completed) omits the server's "pause 0" line and says neither time was billed."""
    s = Server("--plans", PLANS).start()
    try:
        d = browsers(B.PHONE)
        receipt, shown, times = ride_on_plan(s, d, "seoul-day")
        assert [(l["label"], l["amount"]) for l in receipt["lines"]] == [("unlock", 500), ("riding", 150), ("pause", 50)], receipt
        assert shown == [("unlock", "잠금 해제 500원"), ("riding", "주행 1분 150원"), ("pause", "일시정지 요금 (과금 1분) 50원")], shown
        assert B.text(d, "receipt-total") == "700원"
        assert times[1].startswith("이용 ") and times[1].endswith("(과금)"), times
        assert times[2].startswith("일시정지 ") and times[2].endswith("(과금)"), times
        assert B.attr(d, "receipt-times", "data-riding-billed") == "true"
        assert B.attr(d, "receipt-times", "data-pause-billed") == "true"
        assert "일시정지 분당 50원" in B.text(d, "rate-line")
        B.screenshot(d, "receipt-360-pause-billed")

        receipt, shown, times = ride_on_plan(s, d, "seoul-completed")
        # The server lists a pause line of 0 (the ride was paused); the page leaves it out.
        assert [(l["label"], l["amount"]) for l in receipt["lines"]] == [("unlock", 500), ("riding", 0), ("pause", 0)], receipt
        assert shown == [("unlock", "잠금 해제 500원"), ("riding", "주행 0분 0원")], shown
        assert B.text(d, "receipt-total") == "500원"
        assert times[1].endswith("(요금 없음)") and times[2].endswith("(요금 없음)"), times
        assert "(과금)" not in " ".join(times)
        assert B.attr(d, "receipt-times", "data-riding-billed") == "false"
        B.screenshot(d, "receipt-360-nothing-billed")
        # English: the same lines, named as the CLI names them ("unlock").
        click(d, "lang-toggle")
        B.wait(d, lambda d: B.text(d, "receipt-times").split(" · ")[1].endswith("(not billed)"), 3)
        rows = [r.text.replace("\n", " ") for r in d.find_elements(By.CSS_SELECTOR, "#receipt-lines tr")]
        assert rows == ["Unlock ₩500", "Riding 0 min ₩0"], rows
        no_page_errors(d)
    finally:
        s.stop()


def test_korean_notices_keep_words_whole_at_360(browsers):
    """Korean breaks between words at 360 px (word-break: keep-all): the no-token and the
    refused-link notices, measured from the rendered characters; the same text with the
    browser's default breaking does split a word, so the measurement can fail."""
    s = Server(auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    try:
        d = browsers(B.PHONE)
        d.get(s.http + "/")
        B.wait(d, lambda d: B.attr(d, "notice-panel", "data-kind") == "token", 5)
        for el in ("notice-title", "notice-text"):
            assert B.broken_words(d, el) == [], (el, B.broken_words(d, el))
        assert d.execute_script("return getComputedStyle(document.getElementById('notice-text')).wordBreak") == "keep-all"
        B.screenshot(d, "notice-360-no-token")
        forged = hs256({"sub": "rider-pat", "scope": "control", "exp": int(time.time()) + 600}, secret="z" * 40)
        d.get(s.http + "/?ride=r-1&token=" + forged)
        B.wait(d, lambda d: B.attr(d, "notice-panel", "data-kind") == "dead", 10)
        for el in ("notice-title", "notice-text"):
            assert B.broken_words(d, el) == [], (el, B.broken_words(d, el))
        B.screenshot(d, "notice-360-dead")
        d.execute_script("document.getElementById('notice-text').style.wordBreak = 'normal'")
        assert B.broken_words(d, "notice-text"), "the test cannot see a mid-word break"
        # In English nothing changes: keep-all is for Korean only.
        click(d, "lang-toggle")
        B.wait(d, lambda d: d.execute_script("return document.documentElement.lang") == "en", 3)
        assert d.execute_script("return getComputedStyle(document.body).wordBreak") == "normal"
    finally:
        s.stop()
