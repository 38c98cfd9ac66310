// Maps without a tile server (operators may run offline): GBFS geofencing zones, a ride's
// track and position, and a fleet's markers, drawn as SVG from plain numbers. Shared by the
// rider page (ride/map-view.js) and the ops console (ops/fleet-map.js).
//
// Projection: equirectangular fitted to a bounding box, x = lon · cos(lat₀), y = lat, where lat₀
// is the box's middle latitude, so a square block of streets stays square at Seoul's or Paris'
// latitude (off by under 0.1 % across a city). Colours are SVG presentation attributes, not
// CSS, so both pages' style sheets stay as they are and the CSP needs no inline style.

const NS = 'http://www.w3.org/2000/svg';

// The shading classes, most restrictive first (drawn last, on top).
const KINDS = ['nogo', 'noparking', 'slow', 'allowed'];
const FILL = {
  nogo: ['#c62828', 0.34, '#c62828'],
  noparking: ['#f29900', 0.30, '#b86e00'],
  slow: ['#1f6feb', 0.20, '#1f6feb'],
  allowed: ['#00a878', 0.10, '#00a878'],
};

// ---- zones: GBFS geofencing_zones.json (2.1 to 3.1) as polygons and a shading class ----

// One rule's fields, reading both generations of names as the server does (docs/zones.md).
function ruleOf(r) {
  const ids = [].concat(r.vehicle_type_ids || [], r.vehicle_type_id || []);
  const both = typeof r.ride_allowed === 'boolean' ? r.ride_allowed : undefined;
  return {
    ids: ids.length ? ids : null,
    start: typeof r.ride_start_allowed === 'boolean' ? r.ride_start_allowed : both,
    end: typeof r.ride_end_allowed === 'boolean' ? r.ride_end_allowed : both,
    through: typeof r.ride_through_allowed === 'boolean' ? r.ride_through_allowed : undefined,
    speed: typeof r.maximum_speed_kph === 'number' ? r.maximum_speed_kph : undefined,
  };
}

// The shading of a zone for a vehicle type: its applicable rules, field by field, the first
// set value winning (GBFS precedence within one rules array). Without a vehicle type (the
// page may not know it) the most restrictive reading of any rule, so a zone that refuses
// some vehicle is never shown as plain allowed. This is a reading aid: the server decides.
function kindOf(rules, vehicleType) {
  const rank = (f) => (f.through === false ? 0 : f.end === false ? 1 : typeof f.speed === 'number' ? 2 : 3);
  if (!vehicleType) {
    let best = 3;
    for (const r of rules) best = Math.min(best, rank(r));
    return KINDS[best];
  }
  const f = {};
  for (const r of rules) {
    if (r.ids && r.ids.indexOf(vehicleType) < 0) continue;
    for (const k of ['start', 'end', 'through', 'speed']) if (f[k] === undefined && r[k] !== undefined) f[k] = r[k];
  }
  return KINDS[rank(f)];
}

function nameOf(p, i) {
  if (typeof p.name === 'string') return p.name;
  if (Array.isArray(p.name) && p.name.length && typeof p.name[0].text === 'string') return p.name[0].text;
  return 'features[' + i + ']';
}

/** The zones of a parsed geofencing_zones.json: [{name, index, rules, polygons: [[ring of [lon, lat]]], box}]. */
function parseZones(doc) {
  const fc = doc && doc.data && doc.data.geofencing_zones;
  const out = [];
  if (!fc || !Array.isArray(fc.features)) return out;
  fc.features.forEach((f, i) => {
    const g = f && f.geometry;
    if (!g || !Array.isArray(g.coordinates)) return;
    const polygons = g.type === 'Polygon' ? [g.coordinates] : g.type === 'MultiPolygon' ? g.coordinates : [];
    const box = emptyBox();
    for (const poly of polygons) for (const ring of poly) for (const pt of ring) addPoint(box, pt[1], pt[0]);
    const p = f.properties || {};
    out.push({ name: nameOf(p, i), index: i, rules: (p.rules || []).map(ruleOf), polygons, box });
  });
  return out;
}

// ---- boxes and the projection ----
function emptyBox() { return { minLat: Infinity, minLon: Infinity, maxLat: -Infinity, maxLon: -Infinity }; }
function addPoint(b, lat, lon) {
  if (!isFinite(lat) || !isFinite(lon)) return;
  if (lat < b.minLat) b.minLat = lat;
  if (lat > b.maxLat) b.maxLat = lat;
  if (lon < b.minLon) b.minLon = lon;
  if (lon > b.maxLon) b.maxLon = lon;
}
function addBox(b, c) {
  addPoint(b, c.minLat, c.minLon);
  addPoint(b, c.maxLat, c.maxLon);
}
const isEmpty = (b) => !(b.minLat <= b.maxLat);
const overlaps = (a, b) => a.minLat <= b.maxLat && b.minLat <= a.maxLat && a.minLon <= b.maxLon && b.minLon <= a.maxLon;

/** The box grown on every side by `metres` (a single point becomes a square of 2·metres). */
function grow(b, metres) {
  const dLat = metres / 111195;
  const dLon = dLat / Math.max(0.01, Math.cos(((b.minLat + b.maxLat) / 2) * Math.PI / 180));
  return { minLat: b.minLat - dLat, maxLat: b.maxLat + dLat, minLon: b.minLon - dLon, maxLon: b.maxLon + dLon };
}

/**
 * An equirectangular projection of `box` into a width × height viewport with `pad` pixels
 * kept free on every side, centred, same scale on both axes: {x(lat, lon), y(lat), invert(x, y), scale}.
 */
function projection(box, width, height, pad) {
  const k = Math.cos(((box.minLat + box.maxLat) / 2) * Math.PI / 180);
  const w = Math.max(1e-9, (box.maxLon - box.minLon) * k);
  const h = Math.max(1e-9, box.maxLat - box.minLat);
  const scale = Math.min((width - 2 * pad) / w, (height - 2 * pad) / h);
  const ox = (width - w * scale) / 2;
  const oy = (height - h * scale) / 2;
  return {
    scale, k,
    x: (lat, lon) => ox + (lon - box.minLon) * k * scale,
    y: (lat) => oy + (box.maxLat - lat) * scale,
    invert: (x, y) => ({ lat: box.maxLat - (y - oy) / scale, lon: box.minLon + (x - ox) / (k * scale) }),
  };
}

const r1 = (v) => Math.round(v * 10) / 10;

function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.append(e);
  return e;
}

function zonePath(z, P) {
  let d = '';
  for (const poly of z.polygons) {
    for (const ring of poly) {
      for (let i = 0; i < ring.length; i++) d += (i ? 'L' : 'M') + r1(P.x(ring[i][1], ring[i][0])) + ' ' + r1(P.y(ring[i][1]));
      d += 'Z';
    }
  }
  return d;
}

/**
 * A map in an <svg> element. draw(opts) redraws everything:
 * - zones: parseZones(...) output or null; vehicleType: shading for that type
 * - track: [{lat, lon}] in order; position: {lat, lon}
 * - markers: [{id, lat, lon, kind}] (the fleet)
 * - fit: 'track' (the track and position, at least `minMetres` across, zones around them),
 *   'fleet' (the markers and the zones around them, or all zones)
 * The viewBox is the element's own size in CSS pixels, so one unit is one pixel.
 */
function RPMap(svg, opts) {
  this.svg = svg;
  this.o = Object.assign({ pad: 10, minMetres: 400, markerR: 5 }, opts || {});
  this.last = null;
  this.P = null;
  this.placed = [];   // [{id, x, y}] of drawn markers, for hit()
}

// The content box (inside any CSS border), which is where the viewBox is laid out.
RPMap.prototype.size = function () {
  const svg = this.svg;
  const r = svg.getBoundingClientRect();
  const w = svg.clientWidth || r.width;
  const h = svg.clientHeight || r.height;
  return { w: Math.max(1, Math.round(w)), h: Math.max(1, Math.round(h)) };
};

RPMap.prototype.draw = function (opts) {
  this.last = opts;
  const svg = this.svg;
  const { w, h } = this.size();
  svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
  svg.textContent = '';
  const zones = opts.zones || [];
  const track = opts.track || [];
  const markers = opts.markers || [];

  let box = emptyBox();
  if (opts.fit === 'fleet') {
    for (const m of markers) addPoint(box, m.lat, m.lon);
    if (isEmpty(box)) for (const z of zones) addBox(box, z.box);
    else box = grow(box, 150);
  } else {
    for (const p of track) addPoint(box, p.lat, p.lon);
    if (opts.position) addPoint(box, opts.position.lat, opts.position.lon);
    if (isEmpty(box)) return null;
    // Around a short track: at least minMetres across, so the zones nearby show.
    const kLat = 111195;
    const kLon = kLat * Math.cos(((box.minLat + box.maxLat) / 2) * Math.PI / 180);
    const span = Math.max((box.maxLat - box.minLat) * kLat, (box.maxLon - box.minLon) * kLon);
    box = grow(box, Math.max(40, (this.o.minMetres - span) / 2));
  }
  if (isEmpty(box)) return null;
  const P = projection(box, w, h, this.o.pad);
  this.P = P;

  const gz = el('g', { class: 'map-zones' }, svg);
  const shown = zones.filter((z) => overlaps(z.box, box)).map((z) => ({ z, kind: kindOf(z.rules, opts.vehicleType) }));
  // Allowed areas underneath, no-go on top; within one shading the earlier zone (which wins
  // by GBFS precedence) on top.
  shown.sort((a, b) => KINDS.indexOf(b.kind) - KINDS.indexOf(a.kind) || b.z.index - a.z.index);
  for (const { z, kind } of shown) {
    const [fill, opacity, stroke] = FILL[kind];
    const path = el('path', {
      d: zonePath(z, P), 'fill-rule': 'evenodd', fill, 'fill-opacity': opacity, stroke, 'stroke-opacity': 0.7,
      'stroke-width': 1, 'vector-effect': 'non-scaling-stroke', 'data-kind': kind, 'data-zone': z.index,
    }, gz);
    const title = el('title', {}, path);
    title.textContent = z.name;
  }

  if (track.length) {
    const pts = track.map((p) => r1(P.x(p.lat, p.lon)) + ',' + r1(P.y(p.lat))).join(' ');
    el('polyline', {
      class: 'map-track', points: pts, fill: 'none', stroke: '#14181f', 'stroke-width': 3,
      'stroke-linejoin': 'round', 'stroke-linecap': 'round', 'data-points': track.length,
    }, svg);
  }
  if (opts.position) {
    const x = r1(P.x(opts.position.lat, opts.position.lon));
    const y = r1(P.y(opts.position.lat));
    el('circle', { class: 'map-halo', cx: x, cy: y, r: 11, fill: '#1f6feb', 'fill-opacity': 0.2 }, svg);
    el('circle', { class: 'map-position', cx: x, cy: y, r: 6, fill: '#1f6feb', stroke: '#ffffff', 'stroke-width': 2 }, svg);
  }

  this.placed = [];
  if (markers.length) {
    const gm = el('g', { class: 'map-markers' }, svg);
    const colour = { riding: '#00a878', paused: '#b86e00' };
    for (const m of markers) {
      const x = r1(P.x(m.lat, m.lon));
      const y = r1(P.y(m.lat));
      this.placed.push({ id: m.id, x, y });
      el('circle', {
        class: 'map-marker', cx: x, cy: y, r: this.o.markerR, fill: colour[m.kind] || '#4a5361',
        stroke: m.selected ? '#1f6feb' : '#ffffff', 'stroke-width': m.selected ? 3 : 1.5, 'data-ride': m.id,
      }, gm);
    }
  }
  return P;
};

/** The id of the marker nearest to (clientX, clientY), within maxPx; null if none. */
RPMap.prototype.hit = function (clientX, clientY, maxPx) {
  const r = this.svg.getBoundingClientRect();
  const x = clientX - r.left - this.svg.clientLeft;
  const y = clientY - r.top - this.svg.clientTop;
  let best = null;
  let bestD = (maxPx == null ? 12 : maxPx) ** 2;
  for (const p of this.placed) {
    const d = (p.x - x) ** 2 + (p.y - y) ** 2;
    if (d <= bestD) { best = p.id; bestD = d; }
  }
  return best;
};

/** A ride message's position in any of the forms it may come in: {lat, lon[, at]} or [lat, lon]. */
function positionOf(v) {
  if (Array.isArray(v) && v.length >= 2 && typeof v[0] === 'number' && typeof v[1] === 'number') return { lat: v[0], lon: v[1] };
  if (v && typeof v.lat === 'number' && typeof v.lon === 'number') return { lat: v.lat, lon: v.lon, at: v.at };
  return null;
}

/** GET /zones once per page; resolves to parsed zones, [] when the server has none (404), null on failure. */
let zonesPromise = null;
function loadZones(url) {
  if (!zonesPromise) {
    zonesPromise = fetch(url || '/zones', { cache: 'no-store' })
      .then((res) => (res.status === 404 ? [] : res.ok ? res.json().then(parseZones) : null))
      .catch(() => null);
  }
  return zonesPromise;
}

RPMap.parseZones = parseZones;
RPMap.kindOf = kindOf;
RPMap.projection = projection;
RPMap.positionOf = positionOf;
RPMap.loadZones = loadZones;
RPMap.KINDS = KINDS;

export { RPMap, parseZones, kindOf, projection, positionOf, loadZones, KINDS };
