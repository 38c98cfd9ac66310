"""A stand-in for `ridepush serve` that speaks the few ride.v1 messages the map pages need,
for browser tests of what the real server does not send yet (positions, distance, zone
messages, end_not_allowed). It serves public/ with the real server's CSP, GET /zones from a
file (404 without one) and /ws on the same port, so the pages run unchanged.

The test drives it: `move()` pushes a tick with a new position (ticks otherwise go out once a
second without one, as the server's do when the position did not change), `refuse_end`
makes the next `end` fail with end_not_allowed naming a zone. Everything the page sent is in
`received`. Loopback only; one daemon thread serves, one ticks, both stop on close()."""
import json
import logging
import mimetypes
import os
import threading
import time

from websockets.datastructures import Headers
from websockets.http11 import Response
from websockets.sync.server import serve

# The real server's policy (Sources/RidePushServer/Hub.swift): the pages must work under it.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
       "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

PLAN = {"id": "default", "name": "Standard", "currency": "KRW", "price": 500,
        "per_min": [{"start": 0, "rate": 180, "interval": 1}], "billing": "completed"}


# Every plain HTTP answer ends the "handshake" with a status other than 101, which websockets
# logs as a failed handshake with a traceback; those are the files being served, not errors.
_QUIET = logging.getLogger("fake_ride")
_QUIET.setLevel(logging.CRITICAL)


class FakeRideServer:
    def __init__(self, public_dir, zones_path=None, ride="r-map", t0=1764430000000):
        self.public = os.path.realpath(public_dir)
        self.zones_path = zones_path
        self.ride_id = ride
        self.t0 = t0
        self.lock = threading.Lock()
        self.conns = set()
        self.received = []
        self.http_paths = []
        self.state = None          # None until `start`
        self.elapsed = 0
        self.seq = 0
        self.position = None       # {lat, lon, at}
        self.distance = None
        self.refuse_end = None     # zone name: the next end is refused
        self.fleet = None          # list of ride dicts for watch_all (ops page)
        self.stopped = threading.Event()
        self.srv = serve(self._handler, "127.0.0.1", 0, process_request=self._http,
                         subprotocols=["ride.v1"], max_size=1 << 20, logger=_QUIET)
        self.port = self.srv.socket.getsockname()[1]
        self.threads = [threading.Thread(target=self.srv.serve_forever, daemon=True),
                        threading.Thread(target=self._ticker, daemon=True)]
        for t in self.threads:
            t.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def close(self):
        self.stopped.set()
        self.srv.shutdown()
        for t in self.threads:
            t.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- HTTP: the page's files and /zones ----
    def _http(self, conn, request):
        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None
        self.http_paths.append(path)
        if path == "/rides":
            return self._response(200, b'{"rides":[],"next":null}', "application/json")
        if path == "/metrics":
            return self._response(200, b"", "text/plain; version=0.0.4")
        if path == "/zones":
            if not self.zones_path:
                return self._response(404, b'{"error":"no zones"}', "application/json")
            with open(self.zones_path, "rb") as f:
                return self._response(200, f.read(), "application/json")
        rel = path.lstrip("/")
        if rel == "" or rel.endswith("/"):
            rel += "index.html"
        full = os.path.realpath(os.path.join(self.public, rel))
        if not full.startswith(self.public + os.sep) or not os.path.isfile(full):
            return self._response(404, b"not found", "text/plain")
        with open(full, "rb") as f:
            body = f.read()
        ctype = mimetypes.guess_type(full)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "image/svg+xml"):
            ctype += "; charset=utf-8"
        return self._response(200, body, ctype)

    @staticmethod
    def _response(status, body, ctype):
        reason = {200: "OK", 404: "Not Found"}[status]
        h = Headers([("Content-Type", ctype), ("Content-Length", str(len(body))),
                     ("Content-Security-Policy", CSP), ("Cache-Control", "no-store"), ("Connection", "close")])
        return Response(status, reason, h, body)

    # ---- ride.v1 ----
    def _now(self):
        return self.t0 + self.elapsed * 1000 + self.seq

    def _numbers(self):
        m = {"ride": self.ride_id, "state": self.state, "elapsed": self.elapsed, "paused": 0,
             "fare": 500 + 180 * (self.elapsed // 60), "currency": "KRW", "at": self._now()}
        if self.distance is not None:
            m["distance"] = self.distance
        return m

    def _state(self, id_=None, extra=None):
        m = {"type": "state"}
        if id_ is not None:
            m["id"] = id_
        m.update(self._numbers())
        m.update({"started_at": self.t0, "ended_at": None, "paused_since": None, "owner": "u1", "plan": PLAN})
        if self.position is not None:
            m["position"] = dict(self.position)
        if extra:
            m.update(extra)
        return m

    def _handler(self, ws):
        with self.lock:
            self.conns.add(ws)
        try:
            for raw in ws:
                msg = json.loads(raw)
                with self.lock:
                    self.received.append(msg)
                    reply = self._answer(msg)
                for r in reply:
                    ws.send(json.dumps(r))
        except Exception:
            pass
        finally:
            with self.lock:
                self.conns.discard(ws)

    def _answer(self, m):
        t, id_ = m.get("type"), m.get("id")
        if t == "auth":
            return [{"type": "authenticated", "id": id_, "sub": "u1", "scope": "control"}]
        if t == "start":
            self.state = "riding"
            return [self._state(id_, {"ride": self.ride_id})]
        if t in ("subscribe", "get"):
            if self.fleet is not None and t == "get":
                r = next((x for x in self.fleet if x["ride"] == m.get("ride")), None)
                if r is None:
                    return [{"type": "error", "id": id_, "code": "ride_not_found", "message": "no such ride"}]
                doc = dict(r, type="state", id=id_, at=self._now(), plan=PLAN, journal=[
                    {"event": "start", "at": r.get("started_at", self.t0)}])
                return [doc]
            if self.state is None or m.get("ride") != self.ride_id:
                return [{"type": "error", "id": id_, "code": "ride_not_found", "message": "no such ride"}]
            return [self._state(id_)]
        if t == "end":
            if self.refuse_end:
                zone, self.refuse_end = self.refuse_end, None
                return [{"type": "error", "id": id_, "code": "end_not_allowed",
                         "message": 'rides may not end in zone "%s"' % zone}]
            self.state = "ended"
            fare = 500 + 180 * (self.elapsed // 60)
            receipt = {"elapsed": self.elapsed, "paused": 0, "fare": fare, "currency": "KRW", "started_at": self.t0,
                       "ended_at": self._now(), "reason": "rider", "distance": self.distance or 0,
                       "lines": [{"label": "unlock", "amount": 500},
                                 {"label": "riding", "minutes": self.elapsed // 60, "amount": fare - 500}]}
            return [self._state(id_, {"ended_at": self._now(), "receipt": receipt})]
        if t == "watch_all" and self.fleet is not None:
            riding = sum(1 for r in self.fleet if r["state"] == "riding")
            paused = sum(1 for r in self.fleet if r["state"] == "paused")
            return [{"type": "snapshot", "id": id_, "seq": 1, "at": self._now(), "more": False,
                     "counts": {"riding": riding, "paused": paused, "ended": 0}, "rides": self.fleet}]
        return [{"type": "error", "id": id_, "code": "unknown_type", "message": "not in the fake"}]

    def broadcast(self, msg):
        data = json.dumps(msg)
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.send(data)
            except Exception:
                pass

    def _tick(self, position=None):
        with self.lock:
            self.seq += 1
            if self.state is None:
                return
            m = {"type": "tick", "seq": self.seq}
            m.update(self._numbers())
            if position is not None:
                m["position"] = position
        self.broadcast(m)

    def _ticker(self):
        # Once a second, as the server ticks; keeps the page's 3 s watchdog quiet.
        while not self.stopped.wait(1.0):
            with self.lock:
                if self.state == "riding":
                    self.elapsed += 1
            self._tick()

    def move(self, lat, lon, distance, compact=True):
        """A new position (and the server's distance for it): one tick carrying it, in the
        compact form [lat, lon] or as {lat, lon, at}."""
        with self.lock:
            at = self._now()
            self.position = {"lat": lat, "lon": lon, "at": at}
            self.distance = distance
        self._tick([lat, lon] if compact else {"lat": lat, "lon": lon, "at": at})

    def zone(self, name, end_allowed=True, through_allowed=True, speed=None):
        self.broadcast({"type": "zone", "ride": self.ride_id, "zone": name,
                        "rules": {"ride_start_allowed": end_allowed, "ride_end_allowed": end_allowed,
                                  "ride_through_allowed": through_allowed, "maximum_speed_kph": speed}})

    def fleet_frame(self):
        """One `fleet` frame from self.fleet, each row with its position as an 8th element."""
        with self.lock:
            self.seq += 1
            rows = [[r["ride"], r["state"], r["elapsed"], r["paused"], r["fare"], r.get("remaining"),
                     r.get("watchers", 0), [r["position"]["lat"], r["position"]["lon"]]] for r in self.fleet]
            riding = sum(1 for r in self.fleet if r["state"] == "riding")
            m = {"type": "fleet", "seq": self.seq, "at": self._now(),
                 "counts": {"riding": riding, "paused": len(self.fleet) - riding, "ended": 0}, "rows": rows}
        self.broadcast(m)

    def sent(self, type_):
        with self.lock:
            return [m for m in self.received if m.get("type") == type_]
