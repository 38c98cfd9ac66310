// The rides table: filter, search and sort (the view), and only the rows in view in the DOM
// (a pool of <tr> reused as the table scrolls); the counts by state above it.
import * as I from '../i18n.js';
import { S, OVERSCAN, isNear, isLong, schedule } from './state.js';

const $ = (id) => document.getElementById(id);

// ---- view: filter, search, sort ----
const COLS = {
  ride: (r) => r.ride,
  owner: (r) => r.owner || '',
  plan: (r) => r.plan || '',
  state: (r) => r.state,
  elapsed: (r) => r.elapsed,
  fare: (r) => r.fare,
  remaining: (r) => (r.state === 'ended' || r.remaining === null || r.remaining === undefined ? Infinity : r.remaining),
  watchers: (r) => r.watchers || 0,
  started_at: (r) => r.started_at || 0,
};

export function rebuild() {
  const f = S.filter;
  const q = S.search.trim().toLowerCase();
  const out = [];
  for (const r of S.rides.values()) {
    if (f === 'near' ? !isNear(r) : f === 'long' ? !isLong(r) : (f && r.state !== f)) continue;
    if (q && r.ride.toLowerCase().indexOf(q) < 0) continue;
    out.push(r);
  }
  out.sort(comparator());
  S.view = out;
  S.dirty = false;
  S.resort = false;
  S.paint = true;
}

function comparator() {
  const key = COLS[S.sort.col];
  const dir = S.sort.dir;
  return (a, b) => {
    const x = key(a);
    const y = key(b);
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.ride < b.ride ? -1 : a.ride > b.ride ? 1 : 0;
  };
}

// The same rides with new values: last second's order is nearly right, and the engine's
// sort (TimSort) takes a nearly sorted array in close to n comparisons, not n log n; a
// rebuild starts again from the map's order (about 40 ms for 100,000 rides by fare).
export function resort() {
  S.view.sort(comparator());
  S.resort = false;
  S.paint = true;
}

function clockText(s) {
  if (typeof s !== 'number' || s < 0) return '–';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? h + ':' + String(m).padStart(2, '0') + ':' + ss : m + ':' + ss;
}

function makeRow() {
  const tr = document.createElement('tr');
  tr.className = 'row';
  for (let i = 0; i < 8; i++) {
    const td = document.createElement('td');
    if (i >= 4) td.className = 'num';
    if (i === 3) {
      const b = document.createElement('span');
      b.className = 'pill';
      td.append(b);
      const mk = document.createElement('span');
      mk.className = 'mark';
      td.append(mk);
    }
    tr.append(td);
  }
  tr.tabIndex = -1;
  return tr;
}

function setText(el, v) {
  if (el.textContent !== v) el.textContent = v;
}

export function paintRows() {
  S.paint = false;
  const wrap = $('grid-wrap');
  const headH = $('grid-head').offsetHeight || S.rowH;
  const n = S.view.length;
  const rowH = S.rowH;
  const top = Math.max(0, wrap.scrollTop - headH);
  const first = Math.max(0, Math.floor(top / rowH) - OVERSCAN);
  const visible = Math.ceil(wrap.clientHeight / rowH) + 2 * OVERSCAN;
  const last = Math.min(n, first + visible);
  const body = $('grid-body');
  const bottom = $('spacer-bottom');
  while (S.pool.length < last - first) {
    const tr = makeRow();
    S.pool.push(tr);
    body.insertBefore(tr, bottom);
  }
  $('spacer-top').firstChild.style.height = first * rowH + 'px';
  bottom.firstChild.style.height = Math.max(0, n - last) * rowH + 'px';
  const now = performance.now();
  let flashing = false;
  for (let i = 0; i < S.pool.length; i++) {
    const tr = S.pool[i];
    const r = S.view[first + i];
    if (!r) { tr.hidden = true; continue; }
    tr.hidden = false;
    const c = tr.children;
    if (tr.dataset.ride !== r.ride) tr.dataset.ride = r.ride;
    setText(c[0], r.ride);
    setText(c[1], r.owner || '–');
    setText(c[2], r.plan || '–');
    const pill = c[3].firstChild;
    setText(pill, I.t(S.lang, 'state.' + r.state));
    if (pill.dataset.state !== r.state) pill.dataset.state = r.state;
    const near = isNear(r);
    const long = isLong(r);
    const mark = near ? 'near' : long ? 'long' : '';
    setText(c[3].lastChild, mark ? I.t(S.lang, 'ops.mark.' + mark) : '');
    if (tr.dataset.mark !== mark) tr.dataset.mark = mark;
    setText(c[4], clockText(r.elapsed));
    setText(c[5], I.money(S.lang, r.fare, r.currency));
    // A returned ride has no time left, whatever its last row said.
    setText(c[6], r.state === 'ended' || r.remaining === null || r.remaining === undefined ? '–' : clockText(r.remaining));
    setText(c[7], String(r.watchers || 0));
    // Shown above each figure when the rows are cards (narrow screens, ops.css).
    for (let k = 4; k < 8; k++) if (c[k].dataset.label !== S.labels[k]) c[k].dataset.label = S.labels[k];
    const fl = r.flashUntil > now;
    if (fl) flashing = true;
    tr.classList.toggle('flash', fl);
    tr.classList.toggle('selected', r.ride === S.sel);
    tr.setAttribute('aria-rowindex', String(first + i + 2));
  }
  S.flashing = flashing;
  // A row a pixel taller than assumed puts row 10,000 ten thousand pixels off: measure.
  const measured = S.pool.length && !S.pool[0].hidden ? S.pool[0].getBoundingClientRect().height : 0;
  if (measured && Math.abs(measured - S.rowH) > 0.01) {
    S.rowH = measured;
    S.paint = true;
    schedule();
  }
  $('grid').setAttribute('aria-rowcount', String(n + 1));
  $('grid-empty').hidden = n > 0;
  // Formatting numbers costs more than the comparison: only when a figure changed.
  const shownKey = S.lang + n + '/' + S.rides.size;
  if (S.shownKey !== shownKey) {
    S.shownKey = shownKey;
    setText($('shown'), I.t(S.lang, 'ops.shown', { n: I.num(S.lang, n), total: I.num(S.lang, S.rides.size) }));
  }
  $('grid-body').dataset.rows = String(n);
}

// Riding and paused are the server's counts of its open rides. Ended is counted from the
// table (GET /rides?state=ended, then end events): the server's own figure counts the ended
// rides it holds in memory, which after a restart are none, so it disagreed with the table.
// Past the listing's bound the card says "5,000+"; if the listing fails, the server's figure.
export function renderCounts() {
  const c = S.counts;
  for (const k of ['riding', 'paused']) {
    setText($('count-' + k), c ? I.num(S.lang, c[k]) : '–');
    $('count-' + k).dataset.n = c ? String(c[k]) : '';
  }
  let near = 0;
  let long = 0;
  let ended = 0;
  for (const r of S.rides.values()) {
    if (r.state === 'ended') ended++;
    else if (isNear(r)) near++;
    if (isLong(r)) long++;
  }
  const e = $('count-ended');
  if (S.ended === 'failed') ended = c ? c.ended : null;
  const known = S.ended !== 'loading' && ended !== null;
  setText(e, known ? I.num(S.lang, ended) + (S.ended === 'cut' ? '+' : '') : '–');
  e.dataset.n = known ? String(ended) : '';
  e.dataset.source = S.ended;
  // Before the first snapshot nothing is known: a dash, not a red 0.
  setText($('count-near'), c ? I.num(S.lang, near) : '–');
  setText($('count-long'), c ? I.num(S.lang, long) : '–');
  $('count-near').dataset.n = c ? String(near) : '';
  $('count-long').dataset.n = c ? String(long) : '';
}
