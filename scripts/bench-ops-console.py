#!/usr/bin/env python3
"""City scale (issue 29): does the operator console stay responsive with N open rides? Not a
test: prints figures for BENCHMARKS.md.

    .venv/bin/python scripts/bench-ops-console.py [--rides 100000] [--seconds 6] [--width 1280]
                                                  [--bin .build/release/ridepush] [--json]

RidePush runs as `make run` starts it (a fresh SQLite file, JWT auth, ./public), with the
limits bench-city.py lifts so one client may start N rides; `ridepush bench --transitions
--open-rides N` starts the rides with an operator token and leaves them open. Then the console
opens in headless Chromium (tests/browser.py, the page tests' driver) with an ops token, and
this reports:
- open: seconds from asking for the page to its counts showing N open rides;
- for `--seconds` of scrolling the table by 97 px a frame: requestAnimationFrame intervals
  (p50/p95/p99/max), long tasks (count, total ms, longest), rows in the DOM;
- per `fleet` frame: its bytes and the whole message handler (JSON.parse included), timed by a
  wrapper injected through DevTools (the page is unchanged), and the page's own
  RP_OPS.feedCost() (handle and render, JSON.parse excluded);
- the main thread's script and task time per second (CDP Performance.getMetrics), the JS heap
  (CDP Runtime.getHeapUsage), the load average before and after;
- a full-page screenshot (<RIDEPUSH_OUT>/screenshots/ops-<width>-<N>-rides.png).
Every process started here is ended here, by PID; every wait is bounded."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import jwt_secret, load, ops_token, start_serve, stop  # noqa: E402

# Injected before the page's own scripts (DevTools is not governed by the page's CSP): every
# WebSocket message's size and the time its onmessage handler took, for `fleet` frames.
PROBE = """
(() => {
  const W = window.WebSocket;
  const P = window.__probe = {fleet: [], snapshotBytes: 0, snapshotFrames: 0, firstFleetAt: 0};
  window.WebSocket = function (url, protocols) {
    const ws = new W(url, protocols);
    let handler = null;
    Object.defineProperty(ws, 'onmessage', {
      get() { return handler; },
      set(f) {
        handler = f;
        ws.addEventListener('message', (ev) => {
          const d = ev.data;
          const t = performance.now();
          f.call(ws, ev);
          const ms = performance.now() - t;
          if (typeof d !== 'string') return;
          if (d.startsWith('{"type":"fleet"')) {
            P.fleet.push({bytes: d.length, ms, at: t});
            if (P.fleet.length > 600) P.fleet.shift();
          } else if (d.startsWith('{"type":"snapshot"')) { P.snapshotBytes += d.length; P.snapshotFrames++; }
        });
      },
    });
    return ws;
  };
  window.WebSocket.prototype = W.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""

SCROLL = """
const done = arguments[arguments.length - 1];
const ms = arguments[0];
const wrap = document.getElementById('grid-wrap');
const gaps = []; let last = 0; const longs = [];
let want = wrap.scrollTop; let jumps = 0;   // the browser moving the scroll (anchoring) is a jump
const lt = new PerformanceObserver((l) => { for (const e of l.getEntries()) longs.push(e.duration); });
try { lt.observe({entryTypes: ['longtask']}); } catch (e) {}
const fleet0 = window.__probe.fleet.length ? window.__probe.fleet[window.__probe.fleet.length - 1].at : 0;
const t0 = performance.now();
function step(t) {
  if (last) gaps.push(t - last);
  last = t;
  if (Math.abs(wrap.scrollTop - want) > 1) jumps++;
  want = (want + 97) % Math.max(1, wrap.scrollHeight - wrap.clientHeight);
  wrap.scrollTop = want;
  if (t - t0 < ms) requestAnimationFrame(step);
  else {
    lt.disconnect();
    done({gaps, longs, jumps, dom: window.RP_OPS.domRows(), feed: window.RP_OPS.feedCost(),
          fleet: window.__probe.fleet.filter((f) => f.at > fleet0 && f.at >= t0),
          elapsed: performance.now() - t0});
  }
}
requestAnimationFrame(step);"""


def q(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))] if sorted_values else 0.0


def self_times(profile, top):
    """The `top` functions by self time in a CDP CPU profile: [(ms, 'name file:line')]."""
    ms = {}
    nodes = {n["id"]: n for n in profile["nodes"]}
    deltas = profile.get("timeDeltas", [])
    for sample, dt in zip(profile.get("samples", []), deltas[1:] + [0]):
        f = nodes[sample]["callFrame"]
        key = "%s %s:%d" % (f["functionName"] or "(anonymous)", os.path.basename(f["url"]), f["lineNumber"] + 1)
        ms[key] = ms.get(key, 0) + dt / 1000
    return sorted(((v, k) for k, v in ms.items()), reverse=True)[:top]


def metrics(drv):
    return {m["name"]: m["value"] for m in drv.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}


def open_count(drv):
    """riding + paused as the page's count cards hold them (data-n), or None before the snapshot."""
    return drv.execute_script("""
        const n = (id) => { const v = document.getElementById(id).dataset.n; return v === '' || v === undefined ? null : Number(v); };
        const r = n('count-riding'), p = n('count-paused');
        return r === null || p === null ? null : r + p;""")


def measure(args, port, token):
    import browser as B
    out = {}
    drv = B.make_driver((args.width, args.height), "ko-KR")
    try:
        drv.set_page_load_timeout(60)
        drv.set_script_timeout(args.seconds + 60)
        drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
        drv.execute_cdp_cmd("Performance.enable", {})
        t0 = time.monotonic()
        drv.get("http://127.0.0.1:%d/ops/?token=%s" % (port, token))
        out["loaded_s"] = time.monotonic() - t0
        deadline = t0 + args.open_timeout
        shown = None
        while time.monotonic() < deadline:
            shown = open_count(drv)
            if shown is not None and shown >= args.rides:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the console showed %r open rides after %d s, not %d" % (shown, args.open_timeout, args.rides))
        out["counts_s"] = time.monotonic() - t0
        out["counts"] = drv.execute_script(
            "return ['riding','paused','ended','near','long'].map((k) => document.getElementById('count-' + k).textContent)")
        out["table_rows"] = drv.execute_script("return window.RP_OPS.rows()")
        out["snapshot"] = drv.execute_script("return [window.__probe.snapshotFrames, window.__probe.snapshotBytes]")
        if args.sort:
            # Sorted by a column that moves every second (elapsed, fare, time left), each fleet
            # frame re-sorts the whole table; by start time or id it never does.
            drv.find_element(B.By.CSS_SELECTOR, '#grid-head th[data-col="%s"] button' % args.sort).click()
            B.wait(drv, lambda d: d.find_element(B.By.CSS_SELECTOR, '#grid-head th[data-col="%s"]' % args.sort)
                   .get_attribute("aria-sort") == "ascending", 30, "never sorted by %s" % args.sort)
        time.sleep(args.settle)
        out["load_before"] = load()
        if args.profile:
            drv.execute_cdp_cmd("Profiler.enable", {})
            drv.execute_cdp_cmd("Profiler.setSamplingInterval", {"interval": 200})
            drv.execute_cdp_cmd("Profiler.start", {})
        m0, c0 = metrics(drv), time.monotonic()
        s = drv.execute_async_script(SCROLL, args.seconds * 1000)
        m1, c1 = metrics(drv), time.monotonic()
        if args.profile:
            out["profile"] = self_times(drv.execute_cdp_cmd("Profiler.stop", {})["profile"], args.profile)
        out["load_after"] = load()
        gaps = sorted(s["gaps"])
        longs = sorted(s["longs"])
        fleet = s["fleet"]
        wall = c1 - c0
        out.update({
            "seconds": s["elapsed"] / 1000, "frames": len(gaps),
            "frame_ms": {"p50": statistics.median(gaps) if gaps else 0, "p95": q(gaps, 0.95), "p99": q(gaps, 0.99),
                         "max": gaps[-1] if gaps else 0},
            "long_tasks": {"n": len(longs), "total_ms": sum(longs), "max_ms": longs[-1] if longs else 0},
            "dom_rows": s["dom"], "scroll_jumps": s["jumps"],
            "fleet_frames": len(fleet),
            "fleet_bytes": max((f["bytes"] for f in fleet), default=0),
            "fleet_message_ms": {"p50": statistics.median([f["ms"] for f in fleet]) if fleet else 0,
                                 "max": max((f["ms"] for f in fleet), default=0)},
            "feed_cost": s["feed"],
            "script_ms_per_s": (m1["ScriptDuration"] - m0["ScriptDuration"]) * 1000 / wall,
            "task_ms_per_s": (m1["TaskDuration"] - m0["TaskDuration"]) * 1000 / wall,
            "layouts": m1["LayoutCount"] - m0["LayoutCount"],
        })
        # What is on screen once the scrolling stops: the first row under the table's head.
        time.sleep(0.5)
        out["on_screen"] = drv.execute_script("""
            const wrap = document.getElementById('grid-wrap');
            const w = wrap.getBoundingClientRect();
            const el = document.elementFromPoint(w.left + 40, w.top + document.getElementById('grid-head').offsetHeight + 10);
            const tr = el && el.closest('tr.row');
            const first = document.querySelector('#grid-body tr.row:not([hidden])');
            return {scrollTop: wrap.scrollTop, row: tr ? tr.dataset.ride : null, at: el ? el.tagName : null,
                    wrapTop: w.top, firstRowTop: first ? first.getBoundingClientRect().top : null,
                    spacerTop: document.getElementById('spacer-top').firstChild.style.height,
                    rowH: first ? first.getBoundingClientRect().height : null};""")
        heap = drv.execute_cdp_cmd("Runtime.getHeapUsage", {})
        out["heap_mb"] = {"used": heap["usedSize"] / 1e6, "total": heap["totalSize"] / 1e6}
        out["dom_nodes"] = m1.get("Nodes")
        out["screenshot"] = os.path.normpath(B.screenshot(drv, "ops-%d-%d-rides%s" % (args.width, args.rides, "-by-" + args.sort if args.sort else "")))
        out["errors"] = [e.get("message", "")[:200] for e in B.console_errors(drv)]
    finally:
        drv.quit()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rides", type=int, default=100000)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--settle", type=float, default=3, help="seconds between the counts showing N and the measurement")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--sort", default="", help="click this column's head first (e.g. fare); default: the page's own order")
    ap.add_argument("--profile", type=int, default=0, help="also print the N functions with the most self time (CDP Profiler)")
    ap.add_argument("--open-timeout", type=int, default=120)
    ap.add_argument("--bin", default=os.environ.get("RIDEPUSH_BIN", os.path.join(ROOT, ".build/release/ridepush")))
    ap.add_argument("--public", default=os.path.join(ROOT, "public"))
    ap.add_argument("--json", action="store_true", help="one JSON line instead of text")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ridepush-console-")
    secret = jwt_secret(tmp)
    token = ops_token(args.bin, secret, ttl="1h")
    version = subprocess.run([args.bin, "--version"], stdout=subprocess.PIPE, text=True, timeout=30).stdout.strip()
    proc, port = start_serve([args.bin, "serve", "--port", "0", "--store", os.path.join(tmp, "city.db"), "--create-store",
                              "--auth", "jwt", "--jwt-secret-file", secret, "--public", args.public,
                              "--control-rate", "1000000", "--max-connections-per-ip", "100000"])
    try:
        t0 = time.monotonic()
        r = subprocess.run([args.bin, "bench", "--transitions", "--open-rides", str(args.rides), "-n", "16", "--depth", "8",
                            "--url", "ws://127.0.0.1:%d/ws" % port, "--token", token, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError("bench --open-rides failed: %s %s" % (r.stdout, r.stderr))
        opened = json.loads(r.stdout)
        started_s = time.monotonic() - t0
        out = measure(args, port, token)
    finally:
        stop(proc)
    out.update({"rides": args.rides, "opened": opened["open_rides"], "started_s": started_s, "version": version,
                "utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "width": args.width, "sort": args.sort or "started_at"})
    if args.json:
        print(json.dumps(out))
        return
    f, lt, fc, fm = out["frame_ms"], out["long_tasks"], out["feed_cost"], out["fleet_message_ms"]
    print("# %s UTC, %s, %d cores, %d open rides started in %.1f s; %d px, sorted by %s"
          % (out["utc"], version, os.cpu_count(), out["opened"], started_s, args.width, out["sort"]))
    print("open             page loaded %.2f s; counts show %d open rides %.2f s after asking for the page "
          "(snapshot %d frames, %.1f MB); table %d rides; cards %s"
          % (out["loaded_s"], args.rides, out["counts_s"], out["snapshot"][0], out["snapshot"][1] / 1e6, out["table_rows"],
             " / ".join(out["counts"])))
    print("scrolling %.1f s  %d frames; frame interval p50 %.1f ms, p95 %.1f, p99 %.1f, max %.1f; long tasks %d (%.0f ms, "
          "longest %.0f ms); rows in DOM %d; DOM nodes %s; scroll moved by the browser %d times; after: row %s under the head"
          % (out["seconds"], out["frames"], f["p50"], f["p95"], f["p99"], f["max"], lt["n"], lt["total_ms"], lt["max_ms"],
             out["dom_rows"], out["dom_nodes"], out["scroll_jumps"], out["on_screen"]["row"]))
    print("fleet frame      %.1f KB; %d frames in the window; whole message handler (JSON.parse included) p50 %.1f ms, max %.1f; "
          "page's feedCost (%d frames): handle p50 %.1f max %.1f ms, render p50 %.1f max %.1f ms"
          % (out["fleet_bytes"] / 1e3, out["fleet_frames"], fm["p50"], fm["max"], fc["n"], fc["handleP50"], fc["handleMax"],
             fc["renderP50"], fc["renderMax"]))
    print("main thread      script %.0f ms/s, tasks %.0f ms/s; layouts %d; JS heap %.1f MB used of %.1f MB"
          % (out["script_ms_per_s"], out["task_ms_per_s"], out["layouts"], out["heap_mb"]["used"], out["heap_mb"]["total"]))
    print("load average     %s before, %s after" % (out["load_before"], out["load_after"]))
    print("screenshot       %s" % out["screenshot"])
    for ms, name in out.get("profile", []):
        print("profile          %7.1f ms  %s" % (ms, name))
    if out["errors"]:
        print("console errors   %s" % out["errors"])


if __name__ == "__main__":
    main()
