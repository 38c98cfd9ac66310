// The console's state (one object, read and written by every console module), its limits,
// the row model (rowFrom) and the one-frame-at-a-time scheduler the modules ask to repaint.
import { takeToken } from '../socket.js';
import { RPMap } from '../map.js';

export const NEAR_LIMIT_S = 300;     // the server warns at 5 minutes left: mark from there
export const LONG_PAUSE_S = 600;     // a pause of 10 minutes or more is worth a look
export const FLASH_MS = 1200;
export const ROW_H = 34;             // row height as styled; measured once rendered (borders, zoom)
export const OVERSCAN = 8;
export const HISTORY_MS = 15 * 60 * 1000;
export const METRICS_EVERY_MS = 5000;
export const TOKEN_KEY = 'rp.ops.token';
export const MAP_EVERY_MS = 2000;    // markers follow the fleet frames, redrawn at most this often
export const MAP_HIT_PX = 14;        // a click picks the nearest marker within this distance

function initialLang() {
  let saved = null;
  try { saved = localStorage.getItem('rp.lang'); } catch (e) { /* storage blocked */ }
  if (saved === 'ko' || saved === 'en') return saved;
  const l = String((navigator.languages && navigator.languages[0]) || navigator.language || 'en').toLowerCase();
  return l.startsWith('ko') ? 'ko' : 'en';
}

export const S = {
  lang: initialLang(),
  token: takeToken(TOKEN_KEY),
  sock: null,                // the console's RPSocket (ops.js makes it)
  rides: new Map(),          // id -> row (see rowFrom)
  counts: null,              // the server's {riding, paused, ended}
  ended: 'loading',          // the ended listing: 'loading' | 'done' | 'cut' (more than the bound) | 'failed'
  lastAt: 0,                 // `at` of the newest frame
  view: [],                  // rows after filter and sort
  dirty: true,               // view must be rebuilt
  resort: false,             // same rows in view, values moved: sort the view again
  paint: true,               // visible rows must be repainted
  sort: { col: 'started_at', dir: 1 },
  filter: '',
  search: '',
  sel: null,                 // selected ride id
  detail: null,              // last ride document for the selection (with journal)
  detailGet: null,           // id of the get in flight
  snapshotId: null,
  snapshotRows: null,        // rides gathered from snapshot frames until more:false
  frameOrder: [],            // the last fleet frame's rows (objects of `rides`) by position
  history: [],               // [{t, riding, paused}] one per fleet frame
  lateness: [],              // [{t, p50, p99}] one per /metrics read with new ticks
  lastBuckets: null,
  metricsNote: '',
  error: null,
  panel: null,               // 'none' | 'dead' | 'forbidden'
  confirm: null,             // {kind, ride}
  status: '',
  pool: [],                  // <tr> elements reused for visible rows
  labels: [],                // the column names by cell index, in the page's language
  rowH: ROW_H,               // one row's real height: which rows are in view follows from it
  zones: undefined,          // parsed GET /zones (undefined: not asked yet, null: asking)
  mapDirty: false,
  mapDrawnAt: 0,
};

// ---- data ----
export function rowFrom(o, prev) {
  const r = prev || { flashUntil: 0 };
  r.ride = o.ride;
  r.state = o.state;
  r.elapsed = o.elapsed;
  r.paused = o.paused;
  r.fare = o.fare;
  if (o.currency) r.currency = o.currency;
  r.remaining = typeof o.remaining === 'number' ? o.remaining : null;
  if ('limit' in o) r.limit = o.limit;
  if ('owner' in o) r.owner = o.owner;
  if (o.plan != null) r.plan = typeof o.plan === 'string' ? o.plan : o.plan.id;
  if ('started_at' in o) r.started_at = o.started_at;
  if ('ended_at' in o) r.ended_at = o.ended_at;
  if ('paused_since' in o) r.paused_since = o.paused_since;
  if (typeof o.watchers === 'number') r.watchers = o.watchers;
  if (o.receipt) r.reason = o.receipt.reason;
  if (o.reason) r.reason = o.reason;
  const pos = RPMap.positionOf(o.position);
  if (pos) { r.position = pos; S.mapDirty = true; S.hasPositions = true; }
  if (typeof o.distance === 'number') r.distance = o.distance;
  return r;
}

export function pauseNow(r, at) {
  if (r.state !== 'paused') return 0;
  if (typeof r.paused_since === 'number' && at) return Math.max(0, Math.floor((at - r.paused_since) / 1000));
  return r.paused;
}
export const isNear = (r) => r.state !== 'ended' && r.remaining !== null && r.remaining <= NEAR_LIMIT_S;
export const isLong = (r, at) => pauseNow(r, at || S.lastAt) >= LONG_PAUSE_S;

export function flash(r) {
  r.flashUntil = performance.now() + FLASH_MS;
}

// ---- rendering: one requestAnimationFrame at a time (the frame is ops.js's) ----
let raf = 0;
let frameFn = () => {};
export function onFrame(fn) {
  frameFn = fn;
}

export function schedule() {
  if (!raf) raf = requestAnimationFrame(runFrame);
}

// Also called directly, to paint at once (a resize).
export function runFrame() {
  raf = 0;
  frameFn();
}
