// RidePush operator console: every ride of the fleet, live, from the ops feed (watch_all:
// one snapshot, then one `fleet` frame per second and `fleet_event`s). Shows what the server
// sends; the riding and paused counts are the server's, the ended count is the table's (see
// renderCounts). Only the rows in view are in the DOM, so 10,000 rides cost one parse and one
// sort a second, and a repaint of ~30 rows.
//
// The entry module: the socket, the panels and the wiring. The state is ops/state.js; the feed
// ops/feed.js; the table ops/table.js; the chart ops/chart.js with ops/metrics.js; the map
// ops/fleet-map.js; a ride's detail ops/detail.js.
import * as I from '../i18n.js';
import './texts.js';
import { RPSocket } from '../socket.js';
import {
  S, TOKEN_KEY, METRICS_EVERY_MS, MAP_EVERY_MS, MAP_HIT_PX, rowFrom, flash, isNear, isLong, schedule, onFrame, runFrame,
} from './state.js';
import { onSnapshot, onFleet, onEvent, loadEnded } from './feed.js';
import { rebuild, resort, paintRows, renderCounts } from './table.js';
import { drawChart } from './chart.js';
import { parseBuckets, quantile, readMetrics } from './metrics.js';
import { drawMap, fleetMap } from './fleet-map.js';
import { select, requestDetail, renderDetailFigures, renderDetail, ask, confirmed } from './detail.js';

const $ = (id) => document.getElementById(id);

// ---- socket (the rider page's own module) ----


// Without a token the socket still asks (auth off needs none); a refusal shows the panel.
function start() {
  S.sock = new RPSocket({
    token: S.token,
    onOpen() { /* watch_all waits for `authenticated`, so a refused token never gets `forbidden` first */ },
    onAuth(m, wasDown) {
      S.snapshotRows = null;
      S.snapshotId = S.sock.request('watch_all', {});
      // Rides that ended while this page was away leave the snapshot: list them as ended.
      if (wasDown) loadEnded();
      if (S.sel) requestDetail();
      renderConn();
    },
    onMessage: handle,
    onConn: renderConn,
    onStop() {
      S.panel = S.token ? 'dead' : 'none';
      renderPanel();
      renderConn();
    },
  });
  S.sock.connect();
}

function handle(m, p) {
  switch (m.type) {
    case 'snapshot': onSnapshot(m); return;
    case 'fleet': {
      const t = performance.now();
      onFleet(m);
      cost.pending = true;
      push(cost.handle, performance.now() - t);
      return;
    }
    case 'fleet_event': onEvent(m); return;
    case 'fleet_warning': {
      const r = S.rides.get(m.ride);
      if (!r) return;
      // A time-limit warning carries `remaining`; a zone warning (entering a zone where
      // riding through is not allowed) names the zone instead.
      if (typeof m.remaining === 'number') r.remaining = m.remaining;
      if ('zone' in m) r.zone = m.zone;
      flash(r); S.paint = true; schedule();
      return;
    }
    case 'state':
      if (p && p.kind === 'get') {
        if (m.id !== S.detailGet || m.ride !== S.sel) return;
        S.detailGet = null;
        S.detail = m;
        const r = S.rides.get(m.ride);
        if (r) rowFrom(m, r);
        renderDetail();
        return;
      }
      if (p && (p.kind === 'end' || p.kind === 'pause' || p.kind === 'resume')) {
        S.status = 'ops.done.' + p.kind;
        const r = rowFrom(m, S.rides.get(m.ride));
        S.rides.set(m.ride, r);
        flash(r);
        S.dirty = true;
        if (S.sel === m.ride) { S.detail = Object.assign({}, S.detail || {}, m); requestDetail(); }
        renderDetail();
        schedule();
      }
      return;
    case 'error':
      if (p && p.kind === 'watch_all' && m.code === 'forbidden') {
        S.panel = 'forbidden';
        renderPanel();
        return;
      }
      if (p && p.kind === 'get' && m.id !== S.detailGet) return;
      showError(m.code, m.message, (p && p.msg.ride) || m.ride);
      return;
    default:
      return;
  }
}

// What one fleet frame costs the page (for the benchmark): handling the message, and the
// animation frame that renders it.
const cost = { handle: [], render: [], pending: false };
function push(a, v) {
  a.push(v);
  if (a.length > 240) a.shift();
}

function frame() {
  const t = performance.now();
  const measured = cost.pending;
  cost.pending = false;
  if (S.dirty) rebuild();
  else if (S.resort) resort();
  if (S.paint) paintRows();
  if (S.chartDirty) drawChart();
  if (S.mapDirty && performance.now() - S.mapDrawnAt >= MAP_EVERY_MS) drawMap();
  else if (S.mapDirty && !S.mapTimer) {
    S.mapTimer = setTimeout(() => { S.mapTimer = 0; schedule(); }, MAP_EVERY_MS - (performance.now() - S.mapDrawnAt));
  }
  if (measured) push(cost.render, performance.now() - t);
  // Flashes fade on their own: keep painting while one is running.
  if (S.flashing) { S.paint = true; setTimeout(schedule, 200); }
}
onFrame(frame);

// ---- panels, errors, connection ----
function renderPanel() {
  const p = S.panel;
  const panel = $('token-panel');
  panel.hidden = !p;
  panel.dataset.kind = p || '';
  if (!p) return;
  $('token-title').textContent = I.t(S.lang, 'ops.token.' + p + '.title');
  withCode($('token-text'), I.t(S.lang, 'ops.token.' + p + '.text'));
}

// The texts mark commands with backticks; they are shown as <code>, never as backticks.
function withCode(el, text) {
  el.textContent = '';
  text.split('`').forEach((part, i) => {
    if (!part) return;
    if (i % 2) {
      const code = document.createElement('code');
      code.textContent = part;
      el.append(code);
    } else {
      el.append(part);
    }
  });
}

function renderConn() {
  const c = S.sock ? S.sock.conn : 'stopped';
  $('conn').dataset.conn = c;
  $('conn-text').textContent = I.t(S.lang, 'conn.' + c);
  document.body.classList.toggle('is-stale', c !== 'online');
  if (S.sel) renderDetailFigures();
}

function showError(code, message, ride) {
  S.error = { code, message, ride };
  renderError();
}

function renderError() {
  const e = S.error;
  const box = $('error');
  box.hidden = !e;
  box.dataset.code = e ? e.code : '';
  if (!e) return;
  const key = 'err.' + e.code;
  const p = $('error-text');
  p.textContent = I.T.en[key] ? I.t(S.lang, key, { ride: e.ride || '' }) : I.t(S.lang, 'err.other');
  const code = document.createElement('code');
  code.textContent = e.code + (e.message ? ': ' + e.message : '');
  p.append(' ', code);
}

function renderStatic() {
  document.documentElement.lang = S.lang;
  document.title = I.t(S.lang, 'ops.title');
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = I.t(S.lang, el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-label]')) el.setAttribute('aria-label', I.t(S.lang, el.dataset.i18nLabel));
  const toggle = $('lang-toggle');
  toggle.textContent = I.t(S.lang, 'lang.other');
  toggle.lang = S.lang === 'ko' ? 'en' : 'ko';
  $('grid-empty').textContent = I.t(S.lang, 'ops.empty');
  $('chart').setAttribute('aria-label', I.t(S.lang, 'ops.chart.title'));
  S.labels = ['ride', 'owner', 'plan', 'state', 'elapsed', 'fare', 'remaining', 'watchers'].map((k) => I.t(S.lang, 'ops.col.' + k));
  for (const th of document.querySelectorAll('#grid-head th')) {
    const on = th.dataset.col === S.sort.col;
    th.setAttribute('aria-sort', on ? (S.sort.dir > 0 ? 'ascending' : 'descending') : 'none');
  }
}

function renderAll() {
  renderStatic();
  renderConn();
  renderPanel();
  renderCounts();
  renderError();
  renderDetail();
  S.paint = true;
  S.chartDirty = true;
  schedule();
}

// ---- wiring (no inline handlers: CSP) ----
function init() {
  $('lang-toggle').addEventListener('click', () => {
    S.lang = S.lang === 'ko' ? 'en' : 'ko';
    try { localStorage.setItem('rp.lang', S.lang); } catch (e) { /* storage blocked */ }
    renderAll();
  });
  $('error-close').addEventListener('click', () => { S.error = null; renderError(); });
  $('grid-head').addEventListener('click', (ev) => {
    const th = ev.target.closest('th');
    if (!th) return;
    const col = th.dataset.col;
    S.sort = { col, dir: S.sort.col === col ? -S.sort.dir : 1 };
    S.dirty = true;
    renderStatic();
    schedule();
  });
  $('filter').addEventListener('change', (ev) => { S.filter = ev.target.value; S.dirty = true; schedule(); });
  $('search').addEventListener('input', (ev) => { S.search = ev.target.value; S.dirty = true; schedule(); });
  $('grid-wrap').addEventListener('scroll', () => { S.paint = true; schedule(); }, { passive: true });
  $('grid-body').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr.row');
    if (tr && tr.dataset.ride) select(tr.dataset.ride);
  });
  $('grid-wrap').addEventListener('keydown', (ev) => {
    if (ev.key !== 'Enter') return;
    const tr = ev.target.closest('tr.row');
    if (tr && tr.dataset.ride) select(tr.dataset.ride);
  });
  $('detail-close').addEventListener('click', () => select(null));
  $('fleet-map').addEventListener('click', (ev) => {
    const id = fleetMap && fleetMap.hit(ev.clientX, ev.clientY, MAP_HIT_PX);
    if (id) select(id);
  });
  if (window.ResizeObserver) {
    new ResizeObserver(() => { if (!$('fleet-map-card').hidden) { S.mapDirty = true; S.mapDrawnAt = 0; schedule(); } }).observe($('fleet-map'));
  }
  $('op-pause').addEventListener('click', () => ask('pause'));
  $('op-resume').addEventListener('click', () => ask('resume'));
  $('op-end').addEventListener('click', () => ask('end'));
  $('confirm').addEventListener('close', () => {
    if ($('confirm').returnValue === 'ok') confirmed();
    else S.confirm = null;
  });
  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = $('token-input').value.trim();
    if (!v) return;
    try { sessionStorage.setItem(TOKEN_KEY, v); } catch (e) { /* kept in memory only */ }
    location.reload();
  });
  // Painted at once, not on the next frame: a viewport that grows (a screenshot of the
  // full page, a window restored) shows no empty band for a frame.
  window.addEventListener('resize', () => { S.paint = true; S.chartDirty = true; runFrame(); });
  // The canvas also changes size when the detail opens or closes: redraw at its new size.
  if (window.ResizeObserver) new ResizeObserver(() => { S.chartDirty = true; S.paint = true; schedule(); }).observe($('chart'));
  renderAll();
  start();
  loadEnded();
  readMetrics();
  setInterval(readMetrics, METRICS_EVERY_MS);
}

// For the tests and the benchmark: the parser and the page's numbers, read-only.
window.RP_OPS = {
  parseBuckets, quantile,
  rows: () => S.rides.size,
  view: () => S.view.map((r) => r.ride),
  domRows: () => document.querySelectorAll('#grid-body tr.row:not([hidden])').length,
  row: (id) => Object.assign({}, S.rides.get(id)),
  mark: (r, at) => (isNear(r) ? 'near' : isLong(r, at) ? 'long' : ''),
  lateness: () => S.lateness.length,
  history: () => S.history.length,
  mapMarkers: () => (fleetMap ? fleetMap.placed.map((p) => ({ id: p.id, x: p.x, y: p.y })) : []),
  flashedRecently: (id) => !!(S.rides.get(id) && S.rides.get(id).flashUntil > performance.now() - 2000),
  feedCost: () => {
    const med = (a) => (a.length ? a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)] : 0);
    return { n: cost.handle.length, handleP50: med(cost.handle), handleMax: Math.max(0, ...cost.handle),
             renderP50: med(cost.render), renderMax: Math.max(0, ...cost.render) };
  },
};

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
