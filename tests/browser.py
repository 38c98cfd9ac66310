"""Headless Chromium helpers for the page tests: a Selenium driver on Debian's chromium and
chromium-driver, bounded waits on the page's stable ids, and screenshots under rp.OUT."""
import os
import shutil

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import rp

CHROMIUM = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN") or shutil.which("chromedriver") or "/usr/bin/chromedriver"

PHONE = (360, 780)
DESKTOP = (1280, 900)


def make_driver(size=DESKTOP, lang="ko-KR"):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--no-default-browser-check", "--disable-extensions",
              "--hide-scrollbars", "--force-device-scale-factor=1",
              "--window-size=%d,%d" % size, "--lang=%s" % lang):
        opts.add_argument(a)
    # --lang alone does not always reach navigator.languages in headless mode.
    opts.add_experimental_option("prefs", {"intl.accept_languages": lang})
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    drv.set_page_load_timeout(15)
    drv.set_script_timeout(10)
    # headless window-size is the outer size on some versions; pin the viewport exactly.
    drv.rp_size = size
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": size[0], "height": size[1], "deviceScaleFactor": 1,
                         "mobile": size[0] < 600})
    return drv


def screenshot(drv, name):
    """Full-page PNG under <RIDEPUSH_OUT>/screenshots/<name>.png; returns the path. The
    viewport is stretched to the page height for the shot and put back afterwards."""
    d = os.path.join(rp.OUT, "screenshots")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name + ".png")
    w, h = drv.rp_size
    full = drv.execute_script("return Math.ceil(document.documentElement.scrollHeight)")
    drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                        {"width": w, "height": max(h, full), "deviceScaleFactor": 1, "mobile": w < 600})
    try:
        drv.save_screenshot(path)
    finally:
        drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": w < 600})
    return path


def by_id(drv, el_id):
    return drv.find_element(By.ID, el_id)


def text(drv, el_id):
    return drv.find_element(By.ID, el_id).text


def attr(drv, el_id, name):
    return drv.find_element(By.ID, el_id).get_attribute(name)


def wait(drv, pred, timeout=10, msg=""):
    """Poll pred(drv) every 100 ms until truthy; the bound is explicit."""
    w = WebDriverWait(drv, timeout, poll_frequency=0.1,
                      ignored_exceptions=(StaleElementReferenceException,))
    return w.until(lambda d: pred(d), message=msg)


def seconds(drv):
    """The server's elapsed seconds as shown (data-seconds), or None."""
    v = attr(drv, "elapsed", "data-seconds")
    return int(v) if v not in (None, "") else None


def wait_state(drv, state, timeout=10):
    return wait(drv, lambda d: attr(d, "ride-dialog", "data-state") == state, timeout,
                "ride state never became %r (is %r)" % (state, attr(drv, "ride-dialog", "data-state")))


def wait_conn(drv, conn, timeout=10):
    return wait(drv, lambda d: attr(d, "conn", "data-conn") == conn, timeout,
                "connection never became %r (is %r)" % (conn, attr(drv, "conn", "data-conn")))


def wait_enabled(drv, el_id, timeout=10):
    return wait(drv, lambda d: d.find_element(By.ID, el_id).is_enabled()
                and d.find_element(By.ID, el_id).is_displayed() and d.find_element(By.ID, el_id),
                timeout, "#%s never became enabled" % el_id)


def record_sockets(drv):
    """From the next page load on, keep every WebSocket URL the page opens and every frame it
    sends (window.__ws, window.__sent). Injected through DevTools, which the page's CSP does
    not govern; the page itself is unchanged."""
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        (() => {
          const W = window.WebSocket;
          window.__ws = []; window.__sent = [];
          const send = W.prototype.send;
          W.prototype.send = function (d) { window.__sent.push(String(d)); return send.call(this, d); };
          window.WebSocket = function (url, protocols) {
            window.__ws.push({url: String(url), protocols: protocols});
            return new W(url, protocols);
          };
          window.WebSocket.prototype = W.prototype;
          Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
        })();"""})


def console_errors(drv):
    """SEVERE browser console entries (CSP violations, script errors)."""
    try:
        return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
    except WebDriverException:
        return []


def page_width(drv):
    """(scrollWidth of the document, innerWidth): equal or less means no sideways scroll."""
    return drv.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")


def cut(drv, selector):
    """The elements matching selector whose content is wider than their box (cut off or
    spilling out), or whose box leaves the viewport on either side, as short descriptions."""
    return drv.execute_script("""
        const out = [];
        for (const el of document.querySelectorAll(arguments[0])) {
          if (!el.getClientRects().length) continue;          // not rendered
          const r = el.getBoundingClientRect();
          const what = (el.id || el.dataset.ride || el.className) + ' ' + JSON.stringify(el.textContent.trim().slice(0, 40));
          if (el.scrollWidth > el.clientWidth) out.push(what + ': content ' + el.scrollWidth + ' > box ' + el.clientWidth);
          if (r.left < -0.5 || r.right > window.innerWidth + 0.5) out.push(what + ': box ' + r.left + '..' + r.right + ' outside 0..' + window.innerWidth);
        }
        return out;""", selector)


def broken_words(drv, el_id):
    """Places where a line of the element's text ends between two Hangul syllables of one
    word (작동하지 않습|니다), found from the rendered characters' boxes: a character that
    starts lower than the one just before it in the same text node begins a new line."""
    return drv.execute_script("""
        const el = document.getElementById(arguments[0]);
        const hangul = (c) => c >= '\\uac00' && c <= '\\ud7a3';
        const out = [];
        const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        while (walk.nextNode()) {
          const node = walk.currentNode;
          const text = node.data;
          let prev = null;
          for (let i = 0; i < text.length; i++) {
            const range = document.createRange();
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const rects = range.getClientRects();
            if (!rects.length) { prev = null; continue; }     // collapsed: not adjacent
            const box = rects[rects.length - 1];
            if (prev && box.top >= prev.bottom - 1 && hangul(text[i - 1]) && hangul(text[i])) {
              out.push(text.slice(Math.max(0, i - 6), i) + '|' + text.slice(i, i + 4));
            }
            prev = box;
          }
        }
        return out;""", el_id)
