// The rider page's rendering: the start and notice panels, the ride modal's figures, the
// receipt, warnings, errors and the controls, all from the state (ride/state.js). Only state
// changes and warnings reach the live region (#ride-status, announce()); the per-second
// figures never do.
import * as I from '../i18n.js';
import { renderReceipt as fillReceipt } from '../receipt.js';
import { S, pageUrl } from './state.js';
import { renderMap } from './map-view.js';

const $ = (id) => document.getElementById(id);

export function setConn(c) {
  const changed = S.conn !== c;
  S.conn = c;
  const el = $('conn');
  el.dataset.conn = c;
  $('conn-text').textContent = I.t(S.lang, 'conn.' + c);
  document.body.classList.toggle('is-stale', c === 'reconnecting' || (c === 'stopped' && !S.ended()));
  if (changed && c === 'reconnecting' && S.ride) announce(I.t(S.lang, 'status.reconnecting'));
  renderControls();
}

export function announce(text) {
  // Only state changes reach the live region; the per-second numbers never do.
  if (!text || text === S.lastAnnounced) return;
  S.lastAnnounced = text;
  $('ride-status').textContent = text;
}

// What to show instead of a ride or the start panel, so the page is never empty:
// 'token' (this server needs a link with a token), 'dead' (the token was refused),
// 'watch' (a watch-only link cannot rent), 'watch-notfound', 'forbidden' (another
// rider's ride).
function noticeKind(watching) {
  if (watching) return null;
  if (S.dead) return S.dead.hadToken ? 'dead' : 'token';
  if (S.forbidden) return 'forbidden';
  if (S.watchOnly && S.notFound) return 'watch-notfound';
  if (S.watchOnly && !S.ride) return 'watch';
  return null;
}

export function renderMode() {
  const watching = !!(S.ride && S.cur && !S.notFound);
  const notice = noticeKind(watching);
  const renting = !notice && (!S.ride || S.notFound) && !S.watchOnly;
  // While a watched ride is still loading neither panel shows; the top bar says "connecting".
  $('ride-dialog').hidden = !watching;
  $('start-panel').hidden = !renting;
  const np = $('notice-panel');
  np.hidden = !notice;
  np.dataset.kind = notice || '';
  if (notice) {
    $('notice-title').textContent = I.t(S.lang, 'notice.' + notice + '.title');
    const textKey = 'notice.' + notice + '.text' + (notice === 'forbidden' && S.watchOnly ? '.watch' : '');
    $('notice-text').textContent = I.t(S.lang, textKey, { ride: S.ride || '' });
  }
  // Another rider's ride: a rider can still rent one of their own from here.
  $('notice-new').hidden = !(notice === 'forbidden' && !S.watchOnly);
  // In the ride dialog: the link stopped working, the numbers stay greyed and say so.
  const dead = $('link-dead');
  dead.hidden = !(watching && S.dead);
  if (watching && S.dead) {
    $('dead-title').textContent = I.t(S.lang, 'dead.title');
    $('dead-text').textContent = I.t(S.lang, S.ended() ? 'dead.text.ended'
      : (S.watchOnly ? 'dead.text.watch' : 'dead.text'));
  }
  document.body.dataset.mode = watching ? 'ride' : (notice ? 'notice' : (renting ? 'start' : 'loading'));
  document.body.dataset.role = S.watchOnly ? 'watcher' : 'rider';
  document.body.classList.toggle('is-dead', !!S.dead);
  $('watch-note').hidden = !S.watchOnly;
}

export function renderNumbers() {
  const c = S.cur;
  if (!c) return;
  const dlg = $('ride-dialog');
  dlg.dataset.state = c.state;
  $('ride-id').textContent = S.ride;
  const badge = $('state-badge');
  badge.dataset.state = c.state;
  badge.textContent = I.t(S.lang, 'state.' + c.state);

  const el = $('elapsed');
  el.textContent = I.duration(S.lang, c.elapsed);
  el.dataset.seconds = String(c.elapsed);
  el.dataset.paused = String(c.paused);
  const fare = $('fare');
  fare.textContent = I.money(S.lang, c.fare, c.currency);
  fare.dataset.minor = String(c.fare);
  fare.dataset.currency = c.currency || '';

  // The hand turns once a minute: 6° per second of server elapsed time. The angle keeps
  // growing past 360° so the short transition never spins backwards at :00.
  $('dial-hand').style.transform = 'rotate(' + (c.elapsed * 6) + 'deg)';

  renderPausedFor();

  const box = $('limit-box');
  if (c.remaining !== null && c.state !== 'ended') {
    box.hidden = false;
    const limit = c.limit || Math.max(c.remaining + c.elapsed, 1);
    const bar = $('remaining-bar');
    bar.max = limit;
    bar.value = Math.max(0, Math.min(limit, c.remaining));
    $('remaining-text').textContent = I.duration(S.lang, c.remaining);
    box.classList.toggle('low', c.remaining <= 60);
    if (S.warning != null) renderWarning();
  } else {
    box.hidden = true;
  }
  renderRate();
}

// While paused: how long this pause has lasted (from the server's paused_since and the
// tick's `at`; the total paused seconds when the pause's start is not known) and whether
// it is billed.
function renderPausedFor() {
  const c = S.cur;
  const el = $('paused-for');
  if (!c || c.state !== 'paused') { el.hidden = true; el.dataset.seconds = ''; return; }
  const secs = typeof c.paused_since === 'number' && typeof c.at === 'number'
    ? Math.max(0, Math.floor((c.at - c.paused_since) / 1000)) : c.paused;
  el.hidden = false;
  el.dataset.seconds = String(secs);
  const pr = S.plan && S.plan.pause_rate;
  el.textContent = I.t(S.lang, 'paused.for', { t: I.duration(S.lang, secs) }) + ' · ' +
    (pr ? I.t(S.lang, 'paused.billed', { rate: I.money(S.lang, pr, S.plan.currency || c.currency) })
      : I.t(S.lang, 'paused.free'));
}

function renderRate() {
  const pl = S.plan;
  const line = $('rate-line');
  if (!pl) { line.textContent = ''; return; }
  const cur = pl.currency || (S.cur && S.cur.currency);
  const parts = [];
  if (pl.price) parts.push(I.t(S.lang, 'rate.base', { price: I.money(S.lang, pl.price, cur) }));
  for (const seg of pl.per_min || []) {
    const rate = I.money(S.lang, seg.rate, cur);
    let s;
    if (seg.interval === 0) s = I.t(S.lang, 'rate.once', { rate });
    else if (!seg.interval || seg.interval === 1) s = I.t(S.lang, 'rate.per', { rate });
    else s = I.t(S.lang, 'rate.perN', { rate, n: seg.interval });
    if (seg.start) s = I.t(S.lang, 'rate.from', { start: seg.start }) + s;
    parts.push(s);
  }
  let text = parts.join(' + ');
  if (pl.pause_rate) text += ' · ' + I.t(S.lang, 'rate.pause', { rate: I.money(S.lang, pl.pause_rate, cur) });
  if (pl.cap && pl.cap.price) {
    text += ' · ' + I.t(S.lang, 'rate.cap', { price: I.money(S.lang, pl.cap.price, cur), duration: I.num(S.lang, pl.cap.duration) });
  }
  line.textContent = text;
}

export function renderReceipt() {
  const r = S.receipt;
  const box = $('receipt');
  const ended = S.ended();
  box.hidden = !(ended && r);
  const controls = $('controls');
  const focusInControls = controls.contains(document.activeElement);
  controls.hidden = ended || S.watchOnly;
  // A watcher cannot rent with a watch-only token, so no "rent again" for them.
  $('btn-new').hidden = S.watchOnly;
  if (ended && (focusInControls || S.refocus)) {
    S.refocus = false;
    (r ? $('btn-new') : $('ride-dialog')).focus();
  }
  if (!ended || !r) return;
  fillReceipt({ lines: $('receipt-lines'), total: $('receipt-total'), reason: $('receipt-reason') }, S.lang, r, S.plan);
  // Each part stays on one line; the parts wrap as a whole on a narrow phone.
  // Times next to money: say which time was billed, so "riding 0 min 40 s" beside a riding
  // line of 0 won, or "paused 0 min 12 s" with no pause line, does not read as a charge.
  const billed = I.billedTimes(r);
  const times = $('receipt-times');
  times.textContent = '';
  const parts = [
    I.t(S.lang, 'receipt.span', { start: I.clock(S.lang, r.started_at), end: I.clock(S.lang, r.ended_at) }),
    I.t(S.lang, billed.riding ? 'receipt.riding_for' : 'receipt.riding_free', { elapsed: I.duration(S.lang, r.elapsed) }),
  ];
  if (r.paused) {
    parts.push(I.t(S.lang, billed.paused ? 'receipt.paused_billed' : 'receipt.paused_free',
      { paused: I.duration(S.lang, r.paused) }));
  }
  times.dataset.ridingBilled = billed.riding ? 'true' : 'false';
  times.dataset.pauseBilled = billed.paused ? 'true' : 'false';
  parts.forEach((txt, i) => {
    if (i) times.append(' · ');
    const sp = document.createElement('span');
    sp.className = 'nowrap';
    sp.textContent = txt;
    times.append(sp);
  });
}

export function renderWarning() {
  const w = $('warning');
  if (S.warning == null || S.ended()) { w.hidden = true; return; }
  w.hidden = false;
  // The warning names the time left as of the latest tick, not the (older) warning's.
  const left = S.cur && S.cur.remaining !== null ? Math.min(S.cur.remaining, S.warning) : S.warning;
  w.textContent = I.t(S.lang, 'warning', { t: I.duration(S.lang, left) });
}

export function renderControls() {
  const online = S.conn === 'online' && S.sock.isOpen();
  const st = S.cur ? S.cur.state : null;
  const idle = !S.busy;
  $('btn-start').disabled = !(online && idle && (!S.ride || S.notFound));
  setDisabled('btn-pause', !(online && idle && st === 'riding'));
  setDisabled('btn-resume', !(online && idle && st === 'paused'));
  setDisabled('btn-end', !(online && idle && (st === 'riding' || st === 'paused')));
  $('btn-share').disabled = !(online && S.ride && S.cur);
  // Only the owner may share (a watcher gets forbidden), and only a ride that is still on.
  $('share').hidden = S.watchOnly || S.ended() || !!S.dead;
  $('controls').setAttribute('aria-busy', S.busy ? 'true' : 'false');
  if (S.watchOnly) $('controls').hidden = true;
  restoreFocus();
}

// Keep keyboard focus in the dialog when the focused button becomes disabled: while a
// request is in flight all three are disabled, so focus parks on the dialog and moves to
// the button that makes sense next (pause -> resume) once the reply has arrived.
function setDisabled(id, disabled) {
  const b = $(id);
  if (disabled && document.activeElement === b) {
    S.refocus = true;
    b.disabled = true;
    $('ride-dialog').focus();
    return;
  }
  b.disabled = disabled;
}

function restoreFocus() {
  if (!S.refocus) return;
  const a = document.activeElement;
  if (a && a !== document.body && a !== $('ride-dialog')) { S.refocus = false; return; }
  const next = ['btn-resume', 'btn-pause', 'btn-end'].map($).find((x) => !x.disabled && !x.closest('[hidden]'));
  if (next) { next.focus(); S.refocus = false; }
}

export function showError(code, message, ride) {
  S.error = { code, message, ride };
  renderError();
}

export function clearError() {
  S.error = null;
  renderError();
}

export function renderError() {
  const box = $('error');
  const e = S.error;
  box.hidden = !e;
  if (!e) { box.dataset.code = ''; return; }
  box.dataset.code = e.code || '';
  const key = 'err.' + e.code;
  const known = !!I.T.en[key];
  const p = $('error-text');
  p.textContent = known ? I.t(S.lang, key, { ride: e.ride || '' }) : I.t(S.lang, 'err.other');
  // The code (and the server's own words for unknown codes) helps support; shown small.
  const code = document.createElement('code');
  code.textContent = e.code + (known || !e.message ? '' : ': ' + e.message);
  p.append(' ', code);
}

export function renderStatic() {
  document.documentElement.lang = S.lang;
  document.title = 'RidePush · ' + I.t(S.lang, 'ride.title');
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = I.t(S.lang, el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-label]')) el.setAttribute('aria-label', I.t(S.lang, el.dataset.i18nLabel));
  const toggle = $('lang-toggle');
  toggle.textContent = I.t(S.lang, 'lang.other');
  toggle.lang = S.lang === 'ko' ? 'en' : 'ko';
  toggle.dataset.lang = S.lang;
  $('conn-text').textContent = I.t(S.lang, 'conn.' + S.conn);
  $('home-link').href = pageUrl(null);
  $('btn-new').href = pageUrl(null);
  $('notice-new').href = pageUrl(null);
}

export function renderAll() {
  renderStatic();
  renderMode();
  renderNumbers();
  renderReceipt();
  renderWarning();
  renderError();
  renderMap();
  renderControls();
  if (S.share && S.share.status) $('share-status').textContent = I.t(S.lang, S.share.status);
  if (S.dead) {
    S.lastAnnounced = '';
    announce(I.t(S.lang, S.dead.hadToken ? 'dead.title' : 'notice.token.title'));
  } else if (S.cur) {
    S.lastAnnounced = '';
    announce(I.t(S.lang, 'status.' + S.cur.state));
  }
}

export function buildDial() {
  const g = $('dial-ticks');
  const ns = 'http://www.w3.org/2000/svg';
  for (let i = 0; i < 60; i++) {
    const l = document.createElementNS(ns, 'line');
    const major = i % 5 === 0;
    l.setAttribute('x1', '60');
    l.setAttribute('x2', '60');
    l.setAttribute('y1', major ? '9' : '11');
    l.setAttribute('y2', '15');
    l.setAttribute('transform', 'rotate(' + i * 6 + ' 60 60)');
    l.setAttribute('class', major ? 'tick major' : 'tick');
    g.append(l);
  }
}
