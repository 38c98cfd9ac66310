"""`ridepush ride simulate ID --gpx track.gpx` (issue 28, item 5): the track's points reach
the server as `position` messages in order, with the track's coordinates, at its recorded pace
divided by --speed; the server's ticks and zone pushes print as `ride watch` prints them. The
positions are checked by a small ride.v1 stand-in defined here, and against the real server
the track becomes the ride's trace. Bad tracks
and options get a line and column or a range before anything connects."""
import json
import os
import signal
import subprocess
import threading
import time

from websockets.sync.server import serve

from rp import BIN, ROOT, Client, Server

TRACK = os.path.join(ROOT, "tests", "fixtures", "seoul-city-hall.gpx")
# The fixture's points and when each is due, in ms after the first, at --speed 1.
POINTS = [(37.5665, 126.978), (37.5666, 126.9781), (37.5667, 126.97825), (37.56685, 126.9784),
          (37.567, 126.9785), (37.5671, 126.9786)]
DUE = [0, 2000, 4000, 7500, 9500, 10500]
PLAN = {"id": "default", "name": "Standard", "currency": "KRW", "price": 500,
        "per_min": [{"start": 0, "rate": 180, "interval": 1}], "billing": "completed"}


def run_cli(*args, timeout=30):
    env = {k: v for k, v in os.environ.items() if k not in ("RIDEPUSH_TOKEN", "LANG", "LC_ALL")}
    return subprocess.run([BIN, "ride", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)


class PositionRecorder:
    """Just enough ride.v1 for simulate: subscribe and get answer a state, every position is
    recorded with its arrival time and answered (as the issue's server would) by a tick with
    the distance so far and the position; the fourth position enters a zone."""

    def __init__(self, ride="r-gpx"):
        self.ride = ride
        self.lock = threading.Lock()
        self.positions = []      # (monotonic seconds, message)
        self.other = []
        self.distance = 0
        self.t0 = int(time.time() * 1000)
        self.srv = serve(self._handler, "127.0.0.1", 0, subprotocols=["ride.v1"])
        self.port = self.srv.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    @property
    def ws(self):
        return "ws://127.0.0.1:%d/ws" % self.port

    def close(self):
        self.srv.shutdown()
        self.thread.join(5)

    def _state(self, id_):
        m = {"type": "state", "id": id_, "ride": self.ride, "state": "riding", "elapsed": 0, "paused": 0,
             "fare": 500, "currency": "KRW", "at": int(time.time() * 1000), "started_at": self.t0,
             "ended_at": None, "paused_since": None, "owner": "u1", "distance": self.distance, "plan": PLAN}
        return json.dumps(m)

    def _handler(self, ws):
        seq = 0
        for frame in ws:
            m = json.loads(frame)
            if m.get("type") == "position":
                with self.lock:
                    self.positions.append((time.monotonic(), m))
                    n = len(self.positions)
                    self.distance += 12
                seq += 1
                now = int(time.time() * 1000)
                ws.send(json.dumps({"type": "tick", "ride": self.ride, "state": "riding", "elapsed": n, "paused": 0,
                                    "fare": 500, "currency": "KRW", "distance": self.distance,
                                    "position": [m["lat"], m["lon"]], "seq": seq, "at": now}))
                if n == 4:
                    ws.send(json.dumps({"type": "zone", "ride": self.ride, "zone": "Deoksugung",
                                        "rules": {"ride_start_allowed": False, "ride_end_allowed": False,
                                                  "ride_through_allowed": True, "maximum_speed_kph": 15}}))
            elif m.get("type") == "end" and m.get("ride") == self.ride:
                self.other.append(m)
                ws.send(self._state(m["id"]).replace('"state": "riding"', '"state": "ended"'))
            elif m.get("type") in ("subscribe", "get") and m.get("ride") == self.ride:
                self.other.append(m)
                ws.send(self._state(m["id"]))
            else:
                self.other.append(m)
                ws.send(json.dumps({"type": "error", "id": m.get("id"), "code": "unknown_type", "message": "not here"}))


def test_simulate_reports_every_point_in_order_at_the_tracks_pace():
    rec = PositionRecorder()
    try:
        started = time.time() * 1000
        out = run_cli("simulate", "r-gpx", "--gpx", TRACK, "--speed", "10", "--url", rec.ws, "--lang", "en")
        finished = time.time() * 1000
    finally:
        rec.close()
    assert out.returncode == 0, (out.stdout, out.stderr)
    got = [m for _, m in rec.positions]
    assert [(m["lat"], m["lon"]) for m in got] == POINTS, got
    assert all(m["ride"] == "r-gpx" and m["accuracy"] == 5 and set(m) == {"type", "ride", "lat", "lon", "at", "accuracy"}
               for m in got), got
    # Stamped when sent (the server keeps only newer fixes), so increasing and within the run.
    stamps = [m["at"] for m in got]
    assert stamps == sorted(stamps) and started - 1000 <= stamps[0] and stamps[-1] <= finished + 1000, stamps
    # Paced from the recorded times / 10: never early (a few ms of timer slack), and late by
    # less than a busy shared machine stalls; the last point well before the track's 10.5 s at
    # --speed 1, so --speed is what set the pace.
    arrived = [t for t, _ in rec.positions]
    for i in range(1, len(DUE)):
        gap_ms = (arrived[i] - arrived[0]) * 1000
        assert gap_ms >= DUE[i] / 10 - 15, (i, gap_ms)
        assert gap_ms <= DUE[i] / 10 + 1500, (i, gap_ms)
    # What watch prints: the snapshot, lines as the distance grows, the zone change.
    lines = out.stdout.splitlines()
    assert lines[0] == "r-gpx riding 0m 0s · 500 KRW · 0 m", lines
    assert "r-gpx riding 0m 6s · 500 KRW · 72 m" in lines, lines
    assert 'r-gpx zone "Deoksugung": no starting here · no ending here · max 15 km/h' in lines, lines
    assert lines.index('r-gpx zone "Deoksugung": no starting here · no ending here · max 15 km/h') > lines.index(
        "r-gpx riding 0m 3s · 500 KRW · 36 m")
    assert out.stderr.strip() == "sent 6 positions from %s over 1.1 s" % TRACK, out.stderr
    # The last request is the get that proves every position was read before exiting.
    # (then the feed's unsubscribe on the way out).
    assert [m["type"] for m in rec.other][:2] == ["subscribe", "get"], rec.other
    assert {m["type"] for m in rec.other[2:]} <= {"unsubscribe"}, rec.other


def test_ctrl_c_stops_a_simulation_quietly():
    rec = PositionRecorder()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("RIDEPUSH_TOKEN", "LANG", "LC_ALL")}
        p = subprocess.Popen([BIN, "ride", "simulate", "r-gpx", "--gpx", TRACK, "--url", rec.ws, "--lang", "en"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 10
            while len(rec.positions) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(rec.positions) == 2, "at --speed 1 the second point is due after 2 s"
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=5)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        assert p.returncode == 130
        assert err == ""
        time.sleep(0.3)
        assert len(rec.positions) == 2, "nothing is sent after Ctrl-C"
    finally:
        rec.close()


def test_against_the_real_server_the_track_becomes_the_rides_trace():
    """The real server takes the positions (issue 28): at --speed 0.9 every point is at least
    1.1 s after the one before (simulate stamps them when sent), so each counts, and the ride's
    distance is the track's haversine length."""
    import math

    def haversine(a, b):
        p1, p2 = math.radians(a[0]), math.radians(b[0])
        h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(b[1] - a[1]) / 2) ** 2
        return 2 * 6_371_008.8 * math.asin(math.sqrt(h))
    with Server() as srv, Client(srv.ws) as c:
        r = c.request({"type": "start", "ride": "r-sim", "plan": "default"})
        assert r["type"] == "state", r
        out = run_cli("simulate", "r-sim", "--gpx", TRACK, "--speed", "0.9", "--url", srv.ws, "--lang", "en")
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert out.stderr.startswith("sent 6 positions from %s over " % TRACK), out.stderr
        state = c.request({"type": "get", "ride": "r-sim"})
        expected = sum(haversine(a, b) for a, b in zip(POINTS, POINTS[1:]))
        assert state["distance"] == round(expected), (state, expected)
        assert state["position"]["lat"] == POINTS[-1][0] and state["position"]["lon"] == POINTS[-1][1]


def test_bad_tracks_and_options_are_refused_before_connecting(tmp_path):
    bad = tmp_path / "bad.gpx"
    bad.write_text('<?xml version="1.0"?>\n<gpx>\n <trk><trkseg>\n  <trkpt lat="37.5" lon="127">\n  </trkseg></trk>\n</gpx>\n')
    # No server listens at this URL: each refusal comes before any connection is tried.
    url = "ws://127.0.0.1:9/ws"
    cases = [
        (["--gpx", str(bad)], "ride simulate: %s: line 5, column 3: </trkseg> where </trkpt> was expected (opened at line 4, column 3)\n" % bad),
        (["--gpx", TRACK, "--speed", "0"], "ride simulate: --speed 0: expected a number from 0.01 to 1000 (10 plays the track 10 times faster)\n"),
        (["--gpx", str(tmp_path / "missing.gpx")], "ride simulate: --gpx %s: cannot read the file\n" % (tmp_path / "missing.gpx")),
        ([], "ride simulate: give the track with --gpx PATH (a GPX file with <trkpt lat lon><time>)\n"),
    ]
    for extra, message in cases:
        out = run_cli("simulate", "r-1", "--url", url, *extra, timeout=10)
        assert (out.returncode, out.stdout, out.stderr) == (2, "", message)
    empty = tmp_path / "empty.gpx"
    empty.write_text('<gpx><wpt lat="1" lon="2"/></gpx>')
    out = run_cli("simulate", "r-1", "--url", url, "--gpx", str(empty), timeout=10)
    assert out.returncode == 2 and "no <trkpt> in the file" in out.stderr, out.stderr
    out = run_cli("watch", "r-1", "--url", url, "--speed", "2", timeout=10)
    assert (out.returncode, out.stderr) == (2, "ride watch: --speed is for simulate only\n")
    out = run_cli("pause", "r-1", "--url", url, "--force", timeout=10)
    assert (out.returncode, out.stderr) == (2, "ride pause: --force is for end only\n")


def test_end_force_sends_the_operators_force_and_plain_end_does_not():
    rec = PositionRecorder()
    try:
        forced = run_cli("end", "r-gpx", "--force", "--url", rec.ws, "--lang", "en")
        plain = run_cli("end", "r-gpx", "--url", rec.ws, "--lang", "en")
    finally:
        rec.close()
    assert forced.returncode == 0 and plain.returncode == 0, (forced.stderr, plain.stderr)
    ends = [m for m in rec.other if m["type"] == "end"]
    assert [{k: v for k, v in m.items() if k != "id"} for m in ends] == [
        {"type": "end", "ride": "r-gpx", "force": True}, {"type": "end", "ride": "r-gpx"}], ends
