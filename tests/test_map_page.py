"""The maps (issue 28 item 4) in real headless Chromium at 360 and 1280 px: the rental modal's
map of the ride's track, position and zones with the refused-end message, and the ops
console's fleet map with 300 rides over MobilityData's Paris zones.

The real server does not send positions yet, so the pages talk to tests/fake_ride.py, which
serves public/ unchanged under the real server's CSP and speaks the few ride.v1 messages
involved (state/tick with `position` and `distance`, `zone`, end_not_allowed, the ops feed).
Geometry is checked in the browser's own SVG: the position marker's centre must lie in the
fill of the zone it is in (SVGGeometryElement.isPointInFill, even-odd holes included), and a
zone's drawn box must have the proportions of its degrees scaled by cos(latitude)."""
import json
import math
import os
import random
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

import browser as B
from fake_ride import FakeRideServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC = os.path.join(ROOT, "public")
PARIS = os.path.join(ROOT, "tests", "fixtures", "gbfs", "geofencing_zones.v3.0.json")


def box_ring(lon0, lat0, lon1, lat1):
    return [[lon0, lat0], [lon1, lat0], [lon1, lat1], [lon0, lat1], [lon0, lat0]]


def feature(name, rings, **rules):
    return {"type": "Feature", "geometry": {"type": "MultiPolygon", "coordinates": [rings]},
            "properties": {"name": [{"text": name, "language": "ko"}], "rules": [rules]}}


# Around Seoul City Hall: a no-parking plaza with a bike rack cut out of it (a hole, where
# ending is allowed again), a no-go strip, a slow street and the operating area around all.
PLAZA = (126.9772, 37.5658, 126.9792, 37.5672)
RACK = (126.9779, 37.5662, 126.9785, 37.5666)
NOGO = (126.9766, 37.5680, 126.9800, 37.5686)
SLOW = (126.9760, 37.5650, 126.9772, 37.5690)
AREA = (126.9700, 37.5600, 126.9860, 37.5740)
SEOUL_ZONES = {
    "version": "3.0", "last_updated": "2026-12-04T12:00:00+09:00", "ttl": 60,
    "data": {
        "geofencing_zones": {"type": "FeatureCollection", "features": [
            feature("시청 광장", [box_ring(*PLAZA), box_ring(*RACK)],
                    ride_start_allowed=False, ride_end_allowed=False, ride_through_allowed=True),
            feature("청계광장", [box_ring(*NOGO)],
                    ride_start_allowed=False, ride_end_allowed=False, ride_through_allowed=False),
            feature("세종대로 서행", [box_ring(*SLOW)],
                    ride_start_allowed=True, ride_end_allowed=True, ride_through_allowed=True, maximum_speed_kph=10),
            feature("운영 구역", [box_ring(*AREA)],
                    ride_start_allowed=True, ride_end_allowed=True, ride_through_allowed=True),
        ]},
        "global_rules": [{"ride_start_allowed": False, "ride_end_allowed": False, "ride_through_allowed": True}],
    },
}

# From the south-east into the plaza (the last three inside it, none in the rack).
TRACK = [(37.5648, 126.9800), (37.5651, 126.9797), (37.5654, 126.9794), (37.5657, 126.9791),
         (37.5660, 126.9788), (37.5663, 126.9786), (37.5667, 126.9780), (37.5669, 126.9776)]
IN_RACK = (37.5664, 126.9782)


def haversine(a, b):
    r = 6371008.8
    p1, p2 = math.radians(a[0]), math.radians(b[0])
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(b[1] - a[1]) / 2) ** 2
    return 2 * r * math.asin(math.sqrt(h))


def inside(box, lat, lon):
    return box[0] <= lon <= box[2] and box[1] <= lat <= box[3]


def test_the_script_is_where_it_says():
    # The fixture's own claims, so the browser checks below test the page, not the data.
    assert not any(inside(PLAZA, *p) for p in TRACK[:4])
    assert all(inside(PLAZA, *p) and not inside(RACK, *p) for p in TRACK[4:])
    assert inside(RACK, *IN_RACK) and not any(inside(NOGO, *p) for p in TRACK)


def geometry(drv):
    """What the ride map drew, read from the SVG."""
    return drv.execute_script("""
        const svg = document.getElementById('ride-map-svg');
        const dot = svg.querySelector('circle.map-position');
        const line = svg.querySelector('polyline.map-track');
        const zones = {};
        for (const p of svg.querySelectorAll('path[data-zone]')) {
          const b = p.getBBox();
          zones[p.dataset.zone] = {kind: p.dataset.kind, name: p.querySelector('title').textContent,
                                   box: [b.x, b.y, b.width, b.height]};
        }
        const pt = dot && new DOMPoint(+dot.getAttribute('cx'), +dot.getAttribute('cy'));
        const within = {};
        if (pt) for (const p of svg.querySelectorAll('path[data-zone]')) within[p.dataset.zone] = p.isPointInFill(pt);
        const vb = svg.viewBox.baseVal;
        return {
          dot: pt && [pt.x, pt.y], within, zones,
          points: line ? line.getAttribute('points').trim().split(/\\s+/).map((s) => s.split(',').map(Number)) : [],
          dataPoints: line && +line.dataset.points,
          view: [vb.width, vb.height], rect: [svg.clientWidth, svg.clientHeight],
        };""")


@pytest.mark.parametrize("size,lang", [(B.PHONE, "ko-KR"), (B.DESKTOP, "en-US")], ids=["360-ko", "1280-en"])
def test_ride_map_track_zones_and_refused_end(browsers, tmp_path, size, lang):
    zones = tmp_path / "geofencing_zones.json"
    zones.write_text(json.dumps(SEOUL_ZONES, ensure_ascii=False), encoding="utf-8")
    ko = lang.startswith("ko")
    refused_text = "반납할 수 없는 구역입니다" if ko else "You cannot end the ride in this zone"
    tag = "%d-%s" % (size[0], "ko" if ko else "en")
    with FakeRideServer(PUBLIC, zones_path=str(zones)) as fake:
        drv = browsers(size, lang)
        drv.get(fake.url + "/")
        B.wait_enabled(drv, "btn-start")
        B.by_id(drv, "btn-start").click()
        B.wait_state(drv, "riding")
        # Ticks without a position: no map, not even an empty box, and /zones not asked for.
        B.wait(drv, lambda d: int(B.attr(d, "elapsed", "data-seconds") or 0) >= 2, 8, "no ticks")
        assert not B.by_id(drv, "ride-map").is_displayed()
        assert "/zones" not in fake.http_paths

        metres = 0.0
        for i, (lat, lon) in enumerate(TRACK):
            if i:
                metres += haversine(TRACK[i - 1], TRACK[i])
            # The first as {lat, lon, at}, the rest in the tick's compact form.
            fake.move(lat, lon, round(metres), compact=i > 0)
        B.wait(drv, lambda d: B.attr(d, "ride-map-svg", "data-points") == str(len(TRACK)), 8,
               "the map never showed %d points" % len(TRACK))
        B.wait(drv, lambda d: d.execute_script("return document.querySelectorAll('#ride-map-svg path[data-zone]').length") == 4,
               8, "zones not drawn")
        assert "/zones" in fake.http_paths
        g = geometry(drv)
        assert g["dataPoints"] == len(TRACK) and len(g["points"]) == len(TRACK)
        assert g["view"] == g["rect"], "one SVG unit must be one CSS pixel"
        # North up, east right: the ride went north-west, so its last point is up and left.
        (x0, y0), (x1, y1) = g["points"][0], g["points"][-1]
        assert x1 < x0 and y1 < y0
        # The marker is on the track's last point, inside the plaza's fill and no other
        # restricted zone's; the operating area's fill holds it too.
        assert g["dot"] == [x1, y1]
        assert g["zones"]["0"]["kind"] == "noparking" and g["zones"]["1"]["kind"] == "nogo"
        assert g["zones"]["2"]["kind"] == "slow" and g["zones"]["3"]["kind"] == "allowed"
        assert g["within"] == {"0": True, "1": False, "2": False, "3": True}, g["within"]
        # Proportions: the no-go strip's drawn box is its degrees with longitude scaled by
        # cos(latitude) (equirectangular), within 1 %.
        w, h = g["zones"]["1"]["box"][2:]
        want = (NOGO[2] - NOGO[0]) * math.cos(math.radians(37.5665)) / (NOGO[3] - NOGO[1])
        assert abs(w / h - want) / want < 0.01, (w, h, want)
        # Every track point lies where the projection of the zone boxes says: the first four
        # outside the plaza's drawn box, the rest inside it.
        px, py, pw, ph = g["zones"]["0"]["box"]
        in_plaza = [px <= x <= px + pw and py <= y <= py + ph for x, y in g["points"]]
        assert in_plaza == [False] * 4 + [True] * 4, in_plaza
        dist = B.by_id(drv, "ride-distance")
        assert dist.get_attribute("data-metres") == str(round(metres))
        assert str(round(metres)) in dist.text.replace(",", "")

        fake.zone("시청 광장", end_allowed=False)
        B.wait(drv, lambda d: B.attr(d, "ride-zone", "data-zone") == "시청 광장", 5, "zone push not shown")

        # The end is refused where the plaza is: said next to the map and in the banner.
        fake.refuse_end = "시청 광장"
        B.wait_enabled(drv, "btn-end")
        B.by_id(drv, "btn-end").click()
        B.wait(drv, lambda d: B.by_id(d, "map-refused").is_displayed(), 5, "refused-end message not shown")
        assert B.text(drv, "map-refused").startswith(refused_text)
        assert "시청 광장" in B.text(drv, "map-refused")
        assert B.attr(drv, "error", "data-code") == "end_not_allowed"
        assert B.text(drv, "error-text").startswith(refused_text)
        assert B.attr(drv, "ride-dialog", "data-state") == "riding"
        assert [m.get("ride") for m in fake.sent("end")] == ["r-map"]
        assert B.cut(drv, "#ride-map, #map-refused, #ride-map-caption") == []
        assert B.page_width(drv)[0] <= B.page_width(drv)[1]
        B.screenshot(drv, "map-ride-refused-%s" % tag)

        # Into the bike rack (the plaza's hole): the zone changes, the refusal goes, and the
        # marker is inside the plaza's outline but not its even-odd fill.
        metres += haversine(TRACK[-1], IN_RACK)
        fake.move(IN_RACK[0], IN_RACK[1], round(metres))
        fake.zone("운영 구역", end_allowed=True)
        B.wait(drv, lambda d: not B.by_id(d, "map-refused").is_displayed(), 5, "refusal still shown after moving out")
        B.wait(drv, lambda d: B.attr(d, "ride-map-svg", "data-points") == str(len(TRACK) + 1), 5)
        g = geometry(drv)
        px, py, pw, ph = g["zones"]["0"]["box"]
        assert px <= g["dot"][0] <= px + pw and py <= g["dot"][1] <= py + ph
        assert g["within"]["0"] is False and g["within"]["3"] is True
        B.by_id(drv, "error-close").click()
        B.wait_enabled(drv, "btn-end")
        B.by_id(drv, "btn-end").click()
        B.wait_state(drv, "ended")
        assert B.by_id(drv, "receipt").is_displayed()
        assert B.by_id(drv, "ride-map").is_displayed()      # the finished track stays
        assert not B.by_id(drv, "map-refused").is_displayed()
        assert [e for e in B.console_errors(drv) if "favicon" not in e.get("message", "")] == []
        B.screenshot(drv, "map-ride-ended-%s" % tag)


def test_ride_map_without_zones_draws_the_track(browsers):
    """GET /zones answers 404 (no --zones): the track and position are drawn on their own."""
    with FakeRideServer(PUBLIC, zones_path=None) as fake:
        drv = browsers(B.PHONE, "ko-KR")
        drv.get(fake.url + "/")
        B.wait_enabled(drv, "btn-start")
        B.by_id(drv, "btn-start").click()
        B.wait_state(drv, "riding")
        for i, (lat, lon) in enumerate(TRACK[:3]):
            fake.move(lat, lon, 40 * i)
        B.wait(drv, lambda d: B.attr(d, "ride-map-svg", "data-points") == "3", 8, "track not drawn")
        B.wait(drv, lambda d: "/zones" in fake.http_paths, 5)
        g = geometry(drv)
        assert g["zones"] == {} and len(g["points"]) == 3 and g["dot"] == g["points"][-1]
        assert B.by_id(drv, "ride-map").is_displayed()
        assert not B.by_id(drv, "ride-map-legend").is_displayed()
        assert B.attr(drv, "ride-distance", "data-metres") == "80"


def interior_point(ring):
    """A point inside a simple ring: on the horizontal through the middle of its box, the
    midpoint between the first two edge crossings."""
    lats = [p[1] for p in ring]
    lat = (min(lats) + max(lats)) / 2
    xs = sorted(a[0] + (lat - a[1]) / (b[1] - a[1]) * (b[0] - a[0])
                for a, b in zip(ring, ring[1:]) if (a[1] > lat) != (b[1] > lat))
    return lat, (xs[0] + xs[1]) / 2


def paris_fleet():
    with open(PARIS, encoding="utf-8") as f:
        doc = json.load(f)
    feats = doc["data"]["geofencing_zones"]["features"]
    lons = [p[0] for ft in feats for poly in ft["geometry"]["coordinates"] for ring in poly for p in ring]
    lats = [p[1] for ft in feats for poly in ft["geometry"]["coordinates"] for ring in poly for p in ring]
    box = (min(lons), min(lats), max(lons), max(lats))
    troca = next(i for i, ft in enumerate(feats) if ft["properties"]["name"][0]["text"] == "Trocadéro + Jardins")
    troca_pt = interior_point(feats[troca]["geometry"]["coordinates"][0][0])
    rnd = random.Random(28)
    rides = []
    for i in range(300):
        if i < 4:       # the corners of the zones' box, so every zone is on the map
            lat, lon = (box[1] if i & 1 else box[3]), (box[0] if i & 2 else box[2])
        elif i == 7:
            lat, lon = troca_pt
        else:
            lat, lon = rnd.uniform(box[1], box[3]), rnd.uniform(box[0], box[2])
        state = "paused" if i % 10 == 9 else "riding"
        rides.append({"ride": "r-%04d" % i, "state": state, "elapsed": 60 + i, "paused": 0, "fare": 500 + i,
                      "currency": "EUR", "remaining": None, "owner": "u%d" % (i % 17), "plan": "default",
                      "started_at": 1764430000000 - i * 1000, "paused_since": None, "watchers": i % 3,
                      "position": {"lat": lat, "lon": lon, "at": 1764430000000}})
    return rides, len(feats), troca


@pytest.mark.parametrize("size", [B.PHONE, B.DESKTOP], ids=["360", "1280"])
def test_fleet_map_300_rides_over_paris_and_click_opens_detail(browsers, size):
    rides, nzones, troca = paris_fleet()
    with FakeRideServer(PUBLIC, zones_path=PARIS) as fake:
        fake.fleet = rides
        drv = browsers(size, "en-US")
        drv.get(fake.url + "/ops/")
        B.wait(drv, lambda d: B.attr(d, "fleet-map", "data-markers") == "300", 10, "fleet map never showed 300 markers")
        B.wait(drv, lambda d: d.execute_script("return document.querySelectorAll('#fleet-map path[data-zone]').length") == nzones,
               10, "not every Paris zone drawn")
        fake.fleet_frame()
        counts = drv.execute_script("""
            const svg = document.getElementById('fleet-map');
            return [svg.querySelectorAll('circle.map-marker').length,
                    svg.querySelectorAll('circle.map-marker[fill="#b86e00"]').length];""")
        assert counts == [300, 30]
        # Geometry: ride 7 stands inside Trocadéro + Jardins; its marker is in that zone's fill.
        hit = drv.execute_script("""
            const c = document.querySelector('#fleet-map circle[data-ride="r-0007"]');
            const p = document.querySelector('#fleet-map path[data-zone="' + arguments[0] + '"]');
            const pt = new DOMPoint(+c.getAttribute('cx'), +c.getAttribute('cy'));
            return [p.isPointInFill(pt), p.dataset.kind, p.querySelector('title').textContent];""", troca)
        assert hit == [True, "nogo", "Trocadéro + Jardins"]
        # The four corner rides span the map: their markers sit at the padded edges.
        svg = B.by_id(drv, "fleet-map")
        markers = {m["id"]: m for m in drv.execute_script("return window.RP_OPS.mapMarkers()")}
        assert len(markers) == 300
        w, h = svg.size["width"], svg.size["height"]
        xs = [markers["r-%04d" % i]["x"] for i in range(4)]
        ys = [markers["r-%04d" % i]["y"] for i in range(4)]
        assert min(xs) >= 0 and max(xs) <= w and min(ys) >= 0 and max(ys) <= h

        # Click the marker of a ride (not an element hit: the page's hit-test picks the
        # nearest marker within 14 px) and its detail opens.
        def gap(k):
            m = markers[k]
            return min(math.hypot(o["x"] - m["x"], o["y"] - m["y"]) for j, o in markers.items() if j != k)
        # The first ride from r-0100 on with no other marker within 8 px, so a click 3 px off
        # its centre (plus rounding to whole pixels) is nearer to it than to any other.
        target = next(k for k in sorted(markers) if k >= "r-0100" and gap(k) >= 8)
        drv.execute_script("arguments[0].scrollIntoView({block: 'center'})", svg)
        m = markers[target]
        off = 3.0
        ActionChains(drv).move_to_element_with_offset(svg, int(round(m["x"] + off - w / 2)), int(round(m["y"] - h / 2))).click().perform()
        B.wait(drv, lambda d: B.by_id(d, "detail").is_displayed() and B.text(d, "detail-id") == target, 5,
               "the detail did not open for %s" % target)
        assert [x.get("ride") for x in fake.sent("get")][-1] == target
        B.wait(drv, lambda d: d.execute_script(
            "return document.querySelector('#fleet-map circle[data-ride=\"' + arguments[0] + '\"]').getAttribute('stroke')",
            target) == "#1f6feb", 5,
            "the selected ride's marker is not marked")
        # A click far from every marker selects nothing new.
        before = len(fake.sent("get"))
        # (The detail changed the layout: measure the map again, and stay inside the viewport.)
        drv.execute_script("arguments[0].scrollIntoView({block: 'center'})", svg)
        empty = drv.execute_script("""
            const ms = window.RP_OPS.mapMarkers(), svg = document.getElementById('fleet-map');
            const r = svg.getBoundingClientRect(), w = svg.clientWidth, h = svg.clientHeight;
            for (let y = 4; y < h; y += 6) for (let x = 4; x < w; x += 6) {
              if (r.top + y < 0 || r.top + y > innerHeight - 2 || r.left + x > innerWidth - 2) continue;
              if (ms.every((m) => Math.hypot(m.x - x, m.y - y) > 30)) return [x - r.width / 2 + svg.clientLeft, y - r.height / 2 + svg.clientTop];
            }
            return null;""")
        assert empty, "no spot on the map 30 px from every marker"
        ActionChains(drv).move_to_element_with_offset(svg, int(empty[0]), int(empty[1])).click().perform()
        time.sleep(0.5)     # the click handler sends at once; give the fake time to see a get
        assert len(fake.sent("get")) == before and B.text(drv, "detail-id") == target
        assert B.page_width(drv)[0] <= B.page_width(drv)[1]
        assert [e for e in B.console_errors(drv) if "favicon" not in e.get("message", "")] == []
        B.screenshot(drv, "map-fleet-%d" % size[0])


def test_fleet_map_stays_hidden_without_positions_and_shows_zone_warnings(browsers):
    rides, _, _ = paris_fleet()
    bare = [{k: v for k, v in r.items() if k != "position"} for r in rides[:20]]
    with FakeRideServer(PUBLIC, zones_path=PARIS) as fake:
        fake.fleet = bare
        drv = browsers(B.DESKTOP, "ko-KR")
        drv.get(fake.url + "/ops/")
        B.wait(drv, lambda d: d.execute_script("return window.RP_OPS.rows()") == 20, 10, "snapshot not shown")
        assert not B.by_id(drv, "fleet-map-card").is_displayed()
        assert "/zones" not in fake.http_paths
        # A position arrives for one ride (its fleet_event): the map appears with that one marker.
        moved = dict(bare[5], position={"lat": 48.8584, "lon": 2.2945, "at": 1764430001000})
        fake.broadcast({"type": "fleet_event", "event": "position", "at": 1764430001000, "ride": moved})
        B.wait(drv, lambda d: B.attr(d, "fleet-map", "data-markers") == "1", 10, "the map did not appear")
        assert B.by_id(drv, "fleet-map-card").is_displayed()
        # Entering a no-go zone reaches the feed as a fleet_warning naming it: the detail says so.
        fake.broadcast({"type": "fleet_warning", "ride": moved["ride"], "zone": "Trocadéro + Jardins", "at": 1764430002000})
        drv.execute_script("arguments[0].scrollIntoView({block: 'center'})", B.by_id(drv, "fleet-map"))
        m = drv.execute_script("return window.RP_OPS.mapMarkers()")[0]
        svg = B.by_id(drv, "fleet-map")
        ActionChains(drv).move_to_element_with_offset(svg, int(m["x"] - svg.size["width"] / 2),
                                                      int(m["y"] - svg.size["height"] / 2)).click().perform()
        B.wait(drv, lambda d: B.text(d, "detail-id") == moved["ride"], 5, "detail not opened from the map")
        facts = drv.execute_script("""
            return Array.from(document.querySelectorAll('#detail-facts dd'), (dd) => [dd.dataset.key, dd.textContent]);""")
        facts = dict(facts)
        assert facts.get("zone") == "Trocadéro + Jardins"
        assert facts.get("position", "").startswith("48.85840, 2.29450")
        # The time-limit warning of the same ride still reads `remaining` (unchanged by the zone one).
        assert drv.execute_script("return window.RP_OPS.row(arguments[0]).remaining", moved["ride"]) is None
