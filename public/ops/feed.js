// The ops feed's frames into the table's rows: the snapshot of open rides, one `fleet` frame a
// second, `fleet_event`s; and the ended rides, which the snapshot leaves out, from GET /rides.
import { RPMap } from '../map.js';
import { S, HISTORY_MS, rowFrom, flash, schedule } from './state.js';
import { renderCounts } from './table.js';
import { renderDetailFigures, requestDetail } from './detail.js';

export function onSnapshot(m) {
  if (!S.snapshotRows) S.snapshotRows = [];
  for (const o of m.rides || []) S.snapshotRows.push(o);
  if (m.more) return;
  // The snapshot holds every open ride: open rides not in it have ended meanwhile
  // (while this page was disconnected); ended rows are kept.
  const open = new Set();
  for (const o of S.snapshotRows) {
    open.add(o.ride);
    S.rides.set(o.ride, rowFrom(o, S.rides.get(o.ride)));
  }
  for (const [id, r] of S.rides) if (r.state !== 'ended' && !open.has(id)) S.rides.delete(id);
  S.frameOrder = [];         // it may name rows just deleted
  S.snapshotRows = null;
  S.counts = m.counts || S.counts;
  S.lastAt = m.at || S.lastAt;
  S.dirty = true;
  renderCounts();
  schedule();
}

export function onFleet(m) {
  S.lastAt = m.at;
  S.counts = m.counts || S.counts;
  const rows = m.rows || [];
  // The server sends its rides in the same order tick after tick: the row at the same place
  // last second is almost always this one, and comparing ids is far cheaper than a map
  // lookup of a freshly parsed string (hashing it; ~25 ms for 100,000 rows). Any other
  // order still finds every row through the map.
  const prev = S.frameOrder;
  const order = new Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const x = rows[i];
    const same = prev[i];
    let r = same !== undefined && same.ride === x[0] ? same : S.rides.get(x[0]);
    if (!r) {
      // Started between the snapshot and now without an event seen: take the row as is.
      r = { ride: x[0], flashUntil: 0, owner: null, plan: null, started_at: null, paused_since: null, watchers: 0 };
      S.rides.set(x[0], r);
      flash(r);
      S.dirty = true;
    }
    order[i] = r;
    if (r.state === 'ended') continue;          // an end event never gets undone by a row
    // A new state can move the ride in or out of a state filter; new watchers only move it.
    if (r.state !== x[1]) { flash(r); S.dirty = true; } else if (r.watchers !== x[6] && r.watchers !== undefined) { flash(r); S.resort = true; }
    r.state = x[1];
    r.elapsed = x[2];
    r.paused = x[3];
    r.fare = x[4];
    r.remaining = x[5];
    r.watchers = x[6];
    // The row's 8th element: the ride's position, compactly, when the server has one.
    const pos = x.length > 7 ? RPMap.positionOf(x[7]) : null;
    if (pos) { r.position = pos; S.mapDirty = true; S.hasPositions = true; }
  }
  S.frameOrder = order;
  if (S.hasPositions) S.mapDirty = true;      // markers move, and ended rides leave the map
  // Values changed: the order may have too when sorted by a moving column.
  if (S.sort.col !== 'ride' && S.sort.col !== 'owner' && S.sort.col !== 'plan' && S.sort.col !== 'started_at') S.resort = true;
  // Near limit and long paused follow the values: rides come into and leave those views.
  if (S.filter === 'near' || S.filter === 'long') S.dirty = true;
  S.paint = true;
  S.history.push({ t: m.at, riding: S.counts ? S.counts.riding : 0, paused: S.counts ? S.counts.paused : 0 });
  while (S.history.length && S.history[0].t < m.at - HISTORY_MS) S.history.shift();
  S.chartDirty = true;
  renderCounts();
  if (S.sel) renderDetailFigures();
  schedule();
}

export function onEvent(m) {
  const o = m.ride || {};
  const r = rowFrom(o, S.rides.get(o.ride));
  S.rides.set(o.ride, r);
  flash(r);
  S.dirty = true;
  if (o.state === 'ended') renderCounts();
  if (S.sel === o.ride) {
    S.detail = Object.assign({}, S.detail || {}, o);
    requestDetail();
  }
  schedule();
}

// ---- HTTP: ended rides (the snapshot has open ones only) and /metrics ----
const ENDED_PAGES = 10;
export async function loadEnded() {
  let cursor = null;
  const done = (how) => {
    // A failed reload keeps what an earlier listing found.
    if (how !== 'failed' || S.ended === 'loading') S.ended = how;
    renderCounts();
  };
  // Bounded: the newest 5,000 ended rides are plenty for a console; older ones by search.
  for (let page = 0; page < ENDED_PAGES; page++) {
    const q = new URLSearchParams({ state: 'ended', limit: '500' });
    if (cursor) q.set('cursor', cursor);
    let res;
    try {
      res = await fetch('/rides?' + q, { headers: S.token ? { Authorization: 'Bearer ' + S.token } : {}, cache: 'no-store' });
    } catch (e) { done('failed'); return; }
    if (!res.ok) { done('failed'); return; }
    const doc = await res.json();
    for (const o of doc.rides || []) {
      if (!S.rides.has(o.ride)) S.rides.set(o.ride, rowFrom(o, null));
    }
    S.dirty = true;
    schedule();
    if (!doc.next) { done('done'); return; }
    cursor = doc.next;
  }
  done('cut');
}

