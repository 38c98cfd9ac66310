// RidePush page: speaks ride.v1 over one WebSocket. Shows only what the server sends:
// elapsed time and fare come from `state`/`tick` messages and are never counted up here.
// The entry module: the socket and the messages in; the rendering is ride/view.js.
import * as I from './i18n.js';
import { RPSocket } from './socket.js';
import { S, token, pageUrl, STALE_MS, DEAD_MS } from './ride/state.js';
import { takeGeo, renderMap } from './ride/map-view.js';
import {
  setConn, announce, renderMode, renderNumbers, renderReceipt, renderWarning, renderControls,
  showError, clearError, renderAll, buildDial,
} from './ride/view.js';

const $ = (id) => document.getElementById(id);

// ---- socket (public/socket.js, shared with the ops console) ----
const sock = new RPSocket({
  token,
  onOpen() {
    S.lastLiveAt = performance.now();
    // Resubscribe first so the numbers are right again within one tick; the socket then
    // replays whatever else was in flight with its original id.
    if (S.ride && !S.notFound && !S.ended() && !sock.hasPending('subscribe')) subscribe();
    renderControls();
  },
  onAuth(m, wasDown) {
    if (m.scope) S.watchOnly = m.scope === 'watch';
    if (wasDown && S.ride) S.reconnected = true;
    else if (wasDown) announce(I.t(S.lang, 'status.online'));
    renderAll();
  },
  onMessage: handle,
  onConn(c) {
    if (c !== 'online') S.subscribed = false;
    setConn(c);
  },
  onStop(code, reason, hadToken) {
    S.dead = { hadToken };
    S.busy = null;
    if (S.error && S.error.code === 'unauthorized') S.error = null;
    announce(I.t(S.lang, hadToken ? 'dead.title' : 'notice.token.title'));
    renderAll();
  },
});
S.sock = sock;

function request(kind, fields) {
  return sock.request(kind, fields);
}

function subscribe() {
  if (S.subscribeId) sock.forget(S.subscribeId);
  S.subscribeId = request('subscribe', { ride: S.ride });
}

// ---- incoming messages ----
function handle(m, p) {
  if (p && m.id === S.busy) S.busy = null;

  switch (m.type) {
    case 'state':
      if (p && p.kind === 'start') {
        // The ride exists now: watch it, and make the URL the watch link so a reload keeps it.
        S.ride = m.ride;
        history.replaceState(null, '', pageUrl(S.ride));
        clearError();
        applyState(m);
        subscribe();
        // The start button is gone now; keep keyboard focus in the dialog.
        if (!document.activeElement || document.activeElement === document.body ||
            document.activeElement.closest('[hidden]')) $('btn-pause').focus();
        return;
      }
      if (m.ride !== S.ride) return;
      if (p && p.kind === 'subscribe') {
        S.subscribed = true;
        if (S.reconnected) {
          S.reconnected = false;
          S.lastAnnounced = '';
          announce(I.t(S.lang, 'status.online'));
        }
      }
      if (p && p.kind !== 'subscribe') clearError();
      // A replayed reply (same id after a reconnect) or a tick encoded just before a
      // transition can be older than what is shown; never step the numbers back.
      if (isOlder(m)) { renderControls(); return; }
      applyState(m);
      return;
    case 'tick':
      if (m.ride !== S.ride || isOlder(m)) return;
      applyNumbers(m);
      return;
    case 'zone':
      if (m.ride !== S.ride) return;
      S.geo.zone = m;
      // Moved somewhere an end is allowed: the refusal no longer describes where the ride is.
      if (m.rules && m.rules.ride_end_allowed) S.geo.refused = null;
      renderMap();
      return;
    case 'warning':
      if (m.ride !== S.ride) return;
      S.warning = m.remaining;
      renderWarning();
      // Heard once, as it arrives: the warning's own line (#warning) follows the ticks' time
      // left, so it is not a live region; #warning-live (not on screen) is.
      if (!$('warning').hidden) $('warning-live').textContent = $('warning').textContent;
      return;
    case 'share':
      if (p) shareReady(new URL(m.url, location.href).href);
      return;
    case 'unsubscribed':
      return;
    case 'error':
      onError(m, p);
      return;
    default:
      return;
  }
}

// Messages carry the server's `at` (Unix ms of the figures). Older than the newest shown?
function isOlder(m) {
  if (typeof m.at !== 'number') return false;
  if (S.lastAt && m.at < S.lastAt) return true;
  S.lastAt = m.at;
  return false;
}

function onError(m, p) {
  const kind = p ? p.kind : null;
  if (kind === 'share' && m.code === 'unknown_type') {
    // Older server or auth off: the plain watch link works.
    shareReady(new URL('/?ride=' + encodeURIComponent(S.ride), location.href).href);
    return;
  }
  if (kind === 'subscribe') {
    S.subscribeId = null;
    if (m.code === 'ride_not_found') {
      // Nothing to watch: say so and offer a new rental instead of a blank modal.
      S.cur = null;
      S.notFound = true;
      renderMode();
    } else if (m.code === 'forbidden') {
      // Someone else's ride: the notice panel says so in place of the modal (no banner
      // over an empty page), with a new rental for a rider.
      S.cur = null;
      S.forbidden = true;
      renderMode();
      renderControls();
      return;
    } else if (m.code === 'unavailable' || m.code === 'rate_limited') {
      // Passing trouble: ask again in a couple of seconds (jittered).
      setTimeout(() => {
        if (!S.subscribeId && sock.isOpen() && !S.ended()) subscribe();
      }, 1500 + Math.random() * 1500);
    }
  }
  if (kind === 'end' && m.code === 'end_not_allowed') {
    // The server names the zone in its message: rides may not end in zone "…".
    const named = /zone "(.*)"/.exec(m.message || '');
    S.geo.refused = { zone: named ? named[1] : (S.geo.zone && S.geo.zone.zone) || null };
    renderMap();
  }
  // unauthorized is followed by close 4401: the dead-link notice says what to do.
  if (m.code !== 'unauthorized') showError(m.code, m.message, (p && p.msg.ride) || m.ride || S.ride);
  renderControls();
}

// ---- state ----
function applyState(m) {
  if (m.plan) S.plan = m.plan;
  if (m.receipt) S.receipt = m.receipt;
  if (m.state !== 'ended') S.receipt = m.receipt || null;
  S.notFound = false;
  S.forbidden = false;
  applyNumbers(m);
}

function applyNumbers(m) {
  const prevState = S.cur ? S.cur.state : null;
  takeGeo(m);
  S.cur = {
    state: m.state,
    elapsed: m.elapsed,
    paused: m.paused,
    fare: m.fare,
    currency: m.currency,
    remaining: typeof m.remaining === 'number' ? m.remaining : null,
    limit: typeof m.limit === 'number' ? m.limit : (S.cur && S.cur.limit) || null,
    started_at: m.started_at !== undefined ? m.started_at : S.cur && S.cur.started_at,
    // The start of the pause in progress (state messages); ticks do not repeat it.
    paused_since: m.state !== 'paused' ? null
      : (typeof m.paused_since === 'number' ? m.paused_since
        : (S.cur && S.cur.state === 'paused' ? S.cur.paused_since : null)),
    at: typeof m.at === 'number' ? m.at : null,
    ended_at: m.ended_at !== undefined ? m.ended_at : S.cur && S.cur.ended_at,
  };
  S.lastLiveAt = performance.now();
  if (S.stale) {
    S.stale = false;
    setConn('online');
  }
  if (m.state === 'ended') S.warning = null;
  if (m.state === 'ended') S.geo.refused = null;
  renderMode();
  renderNumbers();
  renderMap();
  if (prevState !== m.state) {
    announce(I.t(S.lang, 'status.' + m.state));
    renderReceipt();
    renderWarning();
  }
  renderControls();
}

// ---- watchdog: no tick for 3 s while the ride should tick -> "reconnecting" ----
setInterval(() => {
  if (!S.ride || !S.cur || S.ended() || S.dead || (S.conn !== 'online' && !S.stale)) return;
  const quiet = performance.now() - S.lastLiveAt;
  if (quiet > STALE_MS && !S.stale) {
    S.stale = true;
    setConn('reconnecting');
  }
  // Open but silent: treat as dead and start over with backoff.
  if (quiet > DEAD_MS) sock.restart();
}, 500);

// ---- actions ----
function act(kind) {
  if (S.busy) return; // a double click never sends two requests
  if (kind !== 'start' && !S.ride) return;
  clearError();
  S.busy = request(kind, kind === 'start' ? {} : { ride: S.ride });
  renderControls();
}

// ---- share ----
function shareReady(url) {
  S.share = { url, status: null };
  const wrap = $('share-field-wrap');
  const input = $('share-url');
  input.value = url;
  wrap.hidden = false;
  const done = (ok) => {
    S.share.status = ok ? 'share.copied' : 'share.manual';
    $('share-status').textContent = I.t(S.lang, S.share.status);
    if (!ok) { input.focus(); input.select(); }
  };
  const fallback = () => {
    input.focus();
    input.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
    done(ok);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(url).then(() => done(true), fallback);
  } else {
    fallback();
  }
}

// ---- wiring (no inline handlers: CSP) ----
function init() {
  buildDial();
  $('btn-start').addEventListener('click', () => act('start'));
  $('btn-pause').addEventListener('click', () => act('pause'));
  $('btn-resume').addEventListener('click', () => act('resume'));
  $('btn-end').addEventListener('click', () => act('end'));
  $('btn-share').addEventListener('click', () => {
    if (!S.ride) return;
    $('share-status').textContent = '';
    request('share', { ride: S.ride });
  });
  $('error-close').addEventListener('click', clearError);
  $('share-url').addEventListener('focus', (e) => e.target.select());
  $('lang-toggle').addEventListener('click', () => {
    S.lang = S.lang === 'ko' ? 'en' : 'ko';
    try { localStorage.setItem('rp.lang', S.lang); } catch (e) { /* storage blocked */ }
    renderAll();
  });
  // The map's viewBox is its box in pixels: redraw when that changes (rotation, resize).
  if (window.ResizeObserver) new ResizeObserver(() => { if (!$('ride-map').hidden) renderMap(); }).observe($('ride-map-svg'));
  renderAll();
  sock.connect();
}


if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
