"""Both pages under axe-core (issue 37, item 8), in headless Chromium against the real
`ridepush serve`: every state a rider or an operator sees, at 360 and 1280 px, has no serious
or critical violation (contrast, dl/dt/dd structure, ARIA roles, autocomplete, …). And what a
screen reader hears: transitions and warnings reach a live region, the per-second elapsed
time and fare never do.

axe-core is the engine bundled by axe-selenium-python (tests/requirements.txt). Each state's
full result is written to <RIDEPUSH_OUT>/axe/<page>-<state>-<width>.json, and a screenshot
to <RIDEPUSH_OUT>/screenshots/a11y-<page>-<state>-<width>.png."""
import json
import os
import time

import pytest
from axe_selenium_python import Axe
from selenium.webdriver.common.by import By

import browser as B
import rp
from rp import Client, Server
from test_page import SECRET, hs256

SIZES = [(B.PHONE, "360"), (B.DESKTOP, "1280")]
BLOCKING = ("serious", "critical")


def token(sub, ops=False):
    now = int(time.time())
    claims = {"sub": sub, "scope": "control", "exp": now + 3600, "iat": now}
    if ops:
        claims["ops"] = True
    return hs256(claims)


@pytest.fixture(scope="module")
def srv():
    """One server with tokens on (as deployed) for every state of both pages."""
    s = Server("--control-rate", "100000", auth="jwt", env={"RIDEPUSH_JWT_SECRET": SECRET}).start()
    try:
        yield s
    finally:
        s.stop()


class Audit:
    """Runs axe over the page as it is now and keeps every violation found, by state."""

    def __init__(self, drv, page, width):
        self.drv, self.page, self.width = drv, page, width
        self.found = {}          # state -> [(rule id, impact, [targets])]

    def check(self, state):
        axe = Axe(self.drv)
        # axe is injected after the page's own scripts ran, through WebDriver, which the
        # page's CSP does not govern; the page itself is unchanged.
        axe.inject()
        # The axe-core that axe-selenium-python bundles for Python 3.11 (3.1.1) takes
        # autocomplete="off" for a field's purpose and fails it on every input but type=text;
        # the HTML standard allows on/off on any input, and axe-core's next releases do too
        # (dequelabs/axe-core#1109, #1121). Told so for the console's two such fields only.
        self.drv.execute_script("axe.configure({checks: [{id: 'autocomplete-appropriate', "
                                "options: {off: ['search', 'password']}}]});")
        res = self.drv.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']}).then(done, (e) => done({error: String(e)}));")
        assert "error" not in res, res
        d = os.path.join(rp.OUT, "axe")
        os.makedirs(d, exist_ok=True)
        name = "%s-%s-%s" % (self.page, state, self.width)
        with open(os.path.join(d, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(res["violations"], f, indent=1, ensure_ascii=False)
        B.screenshot(self.drv, "a11y-" + name)
        self.found[state] = [(v["id"], v["impact"], [t for n in v["nodes"] for t in n["target"]][:4])
                             for v in res["violations"]]
        return self.found[state]

    def assert_clean(self):
        bad = {s: [v for v in vs if v[1] in BLOCKING] for s, vs in self.found.items()}
        bad = {s: vs for s, vs in bad.items() if vs}
        assert not bad, "serious/critical axe violations on %s at %s px: %s" % (
            self.page, self.width, json.dumps(bad, indent=1, ensure_ascii=False))


# What a screen reader is told: the element is in (or is) a live region, and how.
LIVE_OF = """
    let el = document.getElementById(arguments[0]);
    const implicit = {status: 'polite', alert: 'assertive', log: 'polite', timer: 'off', marquee: 'off'};
    for (; el && el.nodeType === 1; el = el.parentElement) {
      const live = el.getAttribute('aria-live');
      if (live) return live;
      const role = el.getAttribute('role');
      if (role && role in implicit) return implicit[role];
    }
    return 'off';"""


def live_of(drv, el_id):
    return drv.execute_script(LIVE_OF, el_id)


def record_announcements(drv, *el_ids):
    """From now on keep every text the live regions take (window.__said[id])."""
    drv.execute_script("""
        window.__said = {};
        for (const o of window.__saidObs || []) o.disconnect();
        window.__saidObs = [];
        for (const id of arguments[0]) {
          const el = document.getElementById(id);
          window.__said[id] = [];
          const o = new MutationObserver(() => window.__said[id].push(el.textContent));
          o.observe(el, {childList: true, characterData: true, subtree: true});
          window.__saidObs.push(o);
        }""", list(el_ids))


def said(drv, el_id="ride-status"):
    return drv.execute_script("return window.__said[arguments[0]]", el_id)


def wait_ticks(drv, n, field="data-seconds"):
    """Wait until n ticks have been shown: the server's elapsed seconds (data-seconds) while
    riding, its paused seconds (data-paused) while paused."""
    first = int(B.attr(drv, "elapsed", field))
    B.wait(drv, lambda d: int(B.attr(d, "elapsed", field)) >= first + n, n + 5,
           "%s did not advance %d s" % (field, n))


# ---- the rider's page -----------------------------------------------------------------------

@pytest.mark.parametrize("size,tag", SIZES)
def test_rider_page_states_are_accessible(srv, browsers, size, tag):
    d = browsers(size)
    a = Audit(d, "rider", tag)
    tok = token("a11y-rider-" + tag)
    d.get(srv.http + "/?token=" + tok)

    # Idle: the start panel.
    B.wait_enabled(d, "btn-start")
    a.check("idle")

    # Riding. The seconds and the fare are not in a live region; the status line is, and
    # says "riding" once, not again with every tick.
    B.wait_enabled(d, "btn-start").click()
    B.wait_state(d, "riding")
    B.wait(d, lambda d: B.text(d, "ride-status") != "", 3, "no status announced")
    assert live_of(d, "ride-status") == "polite"
    assert live_of(d, "elapsed") == "off" and live_of(d, "fare") == "off"
    assert live_of(d, "remaining-text") == "off" and live_of(d, "paused-for") == "off"
    record_announcements(d, "ride-status")
    wait_ticks(d, 3)
    assert said(d) == [], "re-announced while the seconds ticked: %r" % said(d)
    a.check("riding")

    # Paused: the transition is announced once; the pause's own seconds keep counting unheard.
    B.wait_enabled(d, "btn-pause").click()
    B.wait_state(d, "paused")
    B.wait(d, lambda d: B.by_id(d, "paused-for").is_displayed(), 4, "no paused time shown")
    wait_ticks(d, 2, "data-paused")
    assert said(d) == ["일시정지되었습니다."], said(d)
    a.check("paused")

    # Ended, with its receipt.
    B.wait_enabled(d, "btn-end").click()
    B.wait_state(d, "ended")
    B.wait(d, lambda d: B.by_id(d, "receipt").is_displayed(), 5, "no receipt")
    assert said(d)[1:] == ["반납이 완료되었습니다."], said(d)
    a.check("ended-receipt")

    # A server error (a ride that does not exist): the banner is an alert.
    d.get(srv.http + "/?ride=does-not-exist")
    B.wait(d, lambda d: B.by_id(d, "error").is_displayed(), 10, "no error shown")
    assert live_of(d, "error-text") == "assertive"
    a.check("error")
    a.assert_clean()


@pytest.mark.parametrize("size,tag", SIZES)
def test_rider_page_announces_the_limit_warning_once(srv, browsers, size, tag):
    """A ride with a time limit: the 1-minute warning is announced once in the live region,
    and the warning's own line (whose minutes and seconds follow the ticks) is not live."""
    sub = "a11y-warn-" + tag
    with Client(srv.ws) as c:
        assert c.request({"type": "auth", "token": token(sub)})["type"] == "authenticated"
        # 1-minute warning 6 s after the start: time for the page to load and subscribe.
        ride = c.request({"type": "start", "limit": 66})["ride"]
        d = browsers(size)
        d.get(srv.http + "/?ride=%s&token=%s" % (ride, token(sub)))
        B.wait_state(d, "riding")
        record_announcements(d, "ride-status", "warning-live")
        # Three ticks past the 1-minute warning (the 5-minute one may come before the
        # recording starts, or after: the page may subscribe after the first tick or before).
        B.wait(d, lambda d: float(B.attr(d, "remaining-bar", "value")) <= 57, 20, "never reached 57 s left")
        assert B.by_id(d, "warning").is_displayed()
        assert live_of(d, "warning") == "off" and live_of(d, "warning-live") == "polite"
        # Each warning said once, in the words shown when it came, never again as the time
        # left in the warning's line counted down; the state line said nothing meanwhile.
        warned = said(d, "warning-live")
        assert [t for t in warned if t.startswith("1분 0초 후 자동으로 반납")] == [warned[-1]], warned
        assert len(warned) <= 2 and len(set(warned)) == len(warned), warned
        assert said(d) == [], said(d)
        a = Audit(d, "rider", tag)
        a.check("warning")
        a.assert_clean()
        c.request({"type": "end", "ride": ride})


# ---- the operator console -------------------------------------------------------------------

@pytest.mark.parametrize("size,tag", SIZES)
def test_console_states_are_accessible(srv, browsers, size, tag):
    sub = "a11y-fleet-" + tag
    with Client(srv.ws) as c:
        assert c.request({"type": "auth", "token": token(sub)})["type"] == "authenticated"
        rides = [c.request({"type": "start", "limit": 3600})["ride"] for _ in range(4)]
        assert c.request({"type": "pause", "ride": rides[1]})["type"] == "state"
        assert c.request({"type": "end", "ride": rides[2]})["type"] == "state"
        d = browsers(size)
        a = Audit(d, "console", tag)
        # No token yet: the panel that asks for one.
        d.get(srv.http + "/ops/")
        B.wait(d, lambda d: B.by_id(d, "token-panel").is_displayed(), 10, "no token panel")
        a.check("token-panel")
        d.get(srv.http + "/ops/?token=" + token("a11y-ops", ops=True))
        B.wait(d, lambda d: B.attr(d, "conn", "data-conn") == "online", 10, "console never online")
        B.wait(d, lambda d: set(rides) <= set(d.execute_script("return window.RP_OPS.view()")), 10,
               "the rides are not all in the table")
        a.check("fleet-table")

        # The chart once it has points: drawn, with a text name.
        B.wait(d, lambda d: d.execute_script("return window.RP_OPS.history()") >= 3, 8, "no chart points")
        assert B.attr(d, "chart", "aria-label")
        a.check("chart")

        # A ride's detail, with its journal; then an ended ride's, with its receipt.
        d.find_element(By.CSS_SELECTOR, '#grid-body tr[data-ride="%s"]' % rides[1]).click()
        B.wait(d, lambda d: [li.get_attribute("data-event") for li in d.find_elements(
            By.CSS_SELECTOR, "#detail-journal li")] == ["start", "pause"], 5, "no journal")
        a.check("detail")
        d.find_element(By.CSS_SELECTOR, '#grid-body tr[data-ride="%s"]' % rides[2]).click()
        B.wait(d, lambda d: B.by_id(d, "detail-receipt-box").is_displayed(), 5, "no receipt in the detail")
        a.check("detail-receipt")

        # The confirmation before an operator's end.
        d.find_element(By.CSS_SELECTOR, '#grid-body tr[data-ride="%s"]' % rides[0]).click()
        B.wait_enabled(d, "op-end").click()
        B.wait(d, lambda d: B.by_id(d, "confirm").is_displayed(), 3, "no confirmation")
        a.check("confirm")
        B.by_id(d, "confirm-cancel").click()
        a.assert_clean()
        for r in (rides[0], rides[1], rides[3]):
            c.request({"type": "end", "ride": r})
