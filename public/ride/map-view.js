// Where the ride is (issue 28): the ride's track and position over the zones, from state/tick
// `position` and `distance` and `zone` messages; the track is what this page has seen, the
// distance is the server's.
import * as I from '../i18n.js';
import { RPMap } from '../map.js';
import { S, TRACK_MAX } from './state.js';

const $ = (id) => document.getElementById(id);

// `state` carries {lat, lon, at}; a tick carries the position only when it changed, in a
// compact form (map.js reads both). No position yet: no map at all, not an empty box.
export function takeGeo(m) {
  const g = S.geo;
  if (typeof m.distance === 'number') g.distance = m.distance;
  const p = RPMap.positionOf(m.position);
  if (!p) return;
  const last = g.track[g.track.length - 1];
  if (!last || last.lat !== p.lat || last.lon !== p.lon) {
    g.track.push({ lat: p.lat, lon: p.lon });
    if (g.track.length > TRACK_MAX) g.track.splice(0, g.track.length - TRACK_MAX);
  }
  g.position = p;
  if (g.zones === undefined) {
    g.zones = null;
    RPMap.loadZones('/zones').then((z) => { g.zones = z || []; renderMap(); });
  }
}

let rideMap = null;
export function renderMap() {
  const g = S.geo;
  const fig = $('ride-map');
  const show = !!(g.position && S.cur && !S.notFound);
  fig.hidden = !show;
  if (!show) return;
  if (!rideMap) rideMap = new RPMap($('ride-map-svg'), { minMetres: 500 });
  rideMap.draw({ zones: g.zones || [], track: g.track, position: g.position, fit: 'track' });
  const svg = $('ride-map-svg');
  svg.setAttribute('aria-label', I.t(S.lang, 'map.label'));
  svg.dataset.points = String(g.track.length);
  const dist = $('ride-distance');
  dist.textContent = typeof g.distance === 'number' ? I.t(S.lang, 'map.distance', { d: I.metres(S.lang, g.distance) }) : '';
  dist.dataset.metres = typeof g.distance === 'number' ? String(g.distance) : '';
  const zone = $('ride-zone');
  const name = g.zone && g.zone.zone;
  zone.textContent = name ? I.t(S.lang, 'map.zone', { zone: name }) : '';
  zone.dataset.zone = name || '';
  const refused = $('map-refused');
  refused.hidden = !g.refused;
  refused.textContent = g.refused ? I.t(S.lang, 'map.refused') + (g.refused.zone ? ' · ' + g.refused.zone : '') : '';
  // The legend lists only the shadings on the map.
  const kinds = new Set(Array.from(svg.querySelectorAll('path[data-kind]'), (el) => el.dataset.kind));
  const legend = $('ride-map-legend');
  legend.textContent = '';
  for (const k of RPMap.KINDS) {
    if (!kinds.has(k)) continue;
    const li = document.createElement('li');
    li.dataset.kind = k;
    li.textContent = I.t(S.lang, 'map.kind.' + k);
    legend.append(li);
  }
  legend.hidden = !kinds.size;
}
