// The fleet map: every open ride's last position over the zones (../map.js), redrawn at most
// every MAP_EVERY_MS; hidden until the server sends positions.
import * as I from '../i18n.js';
import { RPMap } from '../map.js';
import { S, schedule } from './state.js';

const $ = (id) => document.getElementById(id);

// Made on the first draw; ops.js reads it for clicks and the tests' marker positions.
export let fleetMap = null;
export function drawMap() {
  S.mapDirty = false;
  S.mapDrawnAt = performance.now();
  const markers = [];
  for (const r of S.rides.values()) {
    if (r.state === 'ended' || !r.position) continue;
    markers.push({ id: r.ride, lat: r.position.lat, lon: r.position.lon, kind: r.state, selected: r.ride === S.sel });
  }
  // The selected ride is drawn last, on top of its neighbours.
  markers.sort((a, b) => (a.selected ? 1 : 0) - (b.selected ? 1 : 0));
  const card = $('fleet-map-card');
  const show = markers.length > 0;
  const was = !card.hidden;
  card.hidden = !show;
  document.body.classList.toggle('has-map', show);
  if (!show) return;
  if (S.zones === undefined) {
    S.zones = null;
    RPMap.loadZones('/zones').then((z) => { S.zones = z || []; S.mapDirty = true; S.mapDrawnAt = 0; schedule(); });
  }
  if (!fleetMap) fleetMap = new RPMap($('fleet-map'), { pad: 12, markerR: 5 });
  const svg = $('fleet-map');
  // Smaller dots on a phone-sized map, so a few hundred rides do not hide the zones.
  fleetMap.o.markerR = svg.clientWidth < 500 ? 3.5 : 5;
  fleetMap.draw({ zones: S.zones || [], markers, fit: 'fleet' });
  svg.dataset.markers = String(markers.length);
  $('map-shown').textContent = I.t(S.lang, 'ops.map.shown', { n: I.num(S.lang, markers.length) });
  // The grid rows changed size when the card appeared: repaint the rows in view.
  if (!was) { S.paint = true; S.chartDirty = true; }
}
