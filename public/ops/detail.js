// A ride's detail: its figures, journal and receipt (../receipt.js, as the rider page shows
// it), and the operator's actions behind a confirmation.
import * as I from '../i18n.js';
import { renderReceipt as fillReceipt } from '../receipt.js';
import { S, pauseNow, schedule } from './state.js';

const $ = (id) => document.getElementById(id);

export function select(id) {
  S.sel = id;
  S.detail = null;
  S.status = '';
  $('detail').hidden = !id;
  document.body.classList.toggle('has-detail', !!id);
  if (id) requestDetail();
  renderDetail();
  S.mapDirty = true;
  S.mapDrawnAt = 0;
  S.paint = true;
  schedule();
  // Stacked (narrow) layout: the detail is below the list; bring it into view.
  if (id && window.matchMedia('(max-width: 900px)').matches) $('detail').scrollIntoView({ block: 'start' });
}

export function requestDetail() {
  if (!S.sel || !S.sock) return;
  if (S.detailGet) S.sock.forget(S.detailGet);
  S.detailGet = S.sock.request('get', { ride: S.sel });
}

function fact(dl, key, value) {
  const dt = document.createElement('dt');
  dt.textContent = I.t(S.lang, key);
  const dd = document.createElement('dd');
  dd.textContent = value;
  dd.dataset.key = key.replace('ops.f.', '');
  dl.append(dt, dd);
}

export function renderDetailFigures() {
  const r = S.rides.get(S.sel);
  const d = S.detail || {};
  const dl = $('detail-facts');
  dl.textContent = '';
  const src = r || d;
  fact(dl, 'ops.f.owner', src.owner || '–');
  fact(dl, 'ops.f.plan', (d.plan && (d.plan.name || d.plan.id)) || src.plan || '–');
  fact(dl, 'ops.f.started', I.clock(S.lang, src.started_at));
  if (src.position) {
    fact(dl, 'ops.f.position', src.position.lat.toFixed(5) + ', ' + src.position.lon.toFixed(5) +
      (typeof src.distance === 'number' ? ' · ' + I.metres(S.lang, src.distance) : ''));
  }
  if (src.zone) fact(dl, 'ops.f.zone', src.zone);
  fact(dl, 'ops.f.elapsed', I.duration(S.lang, src.elapsed));
  fact(dl, 'ops.f.paused', I.duration(S.lang, src.paused || 0));
  if (src.state === 'paused') fact(dl, 'ops.f.pause_now', I.duration(S.lang, pauseNow(src, S.lastAt || src.at)));
  fact(dl, 'ops.f.fare', I.money(S.lang, src.fare, src.currency));
  if (src.remaining !== null && src.remaining !== undefined && src.state !== 'ended') fact(dl, 'ops.f.remaining', I.duration(S.lang, src.remaining));
  fact(dl, 'ops.f.watchers', String(src.watchers || d.watchers || 0));
  const st = src.state || '';
  const badge = $('detail-state');
  badge.dataset.state = st;
  badge.textContent = st ? I.t(S.lang, 'state.' + st) : '';
  $('detail').dataset.state = st;
  const online = !!(S.sock && S.sock.isOpen()) && S.panel === null;
  $('op-pause').disabled = !(online && st === 'riding');
  $('op-resume').disabled = !(online && st === 'paused');
  $('op-end').disabled = !(online && (st === 'riding' || st === 'paused'));
  $('detail-actions').hidden = st === 'ended';
}

export function renderDetail() {
  if (!S.sel) return;
  $('detail').dataset.ride = S.sel;
  $('detail-id').textContent = S.sel;
  renderDetailFigures();
  const d = S.detail;
  const ol = $('detail-journal');
  ol.textContent = '';
  if (!d || !d.journal) {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = I.t(S.lang, 'ops.j.none');
    ol.append(li);
  } else {
    for (const j of d.journal) {
      const li = document.createElement('li');
      li.dataset.event = j.event;
      const time = document.createElement('time');
      time.textContent = I.clock(S.lang, j.at);
      li.append(time, ' ', I.t(S.lang, 'ops.j.' + j.event) + (j.reason ? ' · ' + I.t(S.lang, 'receipt.reason.' + j.reason) : ''));
      ol.append(li);
    }
  }
  const rc = d && d.receipt;
  $('detail-receipt-box').hidden = !rc;
  if (rc) {
    fillReceipt({ lines: $('detail-receipt'), total: $('detail-total'), reason: $('detail-reason') }, S.lang, rc, d.plan);
  }
  $('detail-status').textContent = S.status ? I.t(S.lang, S.status) : '';
}

// ---- confirmation, then the request as ops ----
export function ask(kind) {
  if (!S.sel) return;
  S.confirm = { kind, ride: S.sel };
  $('confirm-text').textContent = I.t(S.lang, 'ops.ask.' + kind, { ride: S.sel });
  $('confirm-ok').textContent = I.t(S.lang, kind === 'end' ? 'ops.end' : 'btn.' + kind);
  $('confirm').dataset.kind = kind;
  $('confirm').showModal();
}

export function confirmed() {
  const c = S.confirm;
  S.confirm = null;
  if (!c || !S.sock) return;
  S.status = '';
  S.sock.request(c.kind, { ride: c.ride });
}
