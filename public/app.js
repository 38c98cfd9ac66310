// RidePush page: speaks ride.v1 over one WebSocket. Shows only what the server sends:
// elapsed time and fare come from `state`/`tick` messages and are never counted up here.
'use strict';

(function () {
  const I = window.RP_I18N;
  const $ = (id) => document.getElementById(id);

  // ---- URL: ?ride=… watches a ride; the token moves from the link to sessionStorage ----
  const token = window.RPSocket.takeToken('rp.token');
  const params = new URLSearchParams(location.search);

  function pageUrl(ride) {
    return ride ? '/?ride=' + encodeURIComponent(ride) : '/';
  }

  // A share link carries a watch-only token (scope "watch"); its holder gets no ride
  // controls. This only shapes the UI: the server enforces what a token may do. The
  // claims give the answer at once; the server's `authenticated` reply confirms it.
  const claims = window.RPSocket.claims(token);
  let watchOnly = !!(claims && claims.scope === 'watch');

  // ---- language: browser language first, then the toggle's choice (remembered) ----
  function initialLang() {
    let saved = null;
    try { saved = localStorage.getItem('rp.lang'); } catch (e) { /* storage blocked */ }
    if (saved === 'ko' || saved === 'en') return saved;
    const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en'];
    for (const l of langs) {
      const p = String(l).toLowerCase().slice(0, 2);
      if (p === 'ko') return 'ko';
      if (p === 'en') return 'en';
    }
    return 'en';
  }

  const S = {
    lang: initialLang(),
    ride: params.get('ride') || null,
    conn: 'connecting',        // connecting | online | reconnecting | stopped
    lastLiveAt: 0,             // performance.now() of the last tick/state for our ride
    stale: false,              // no tick for 3 s while the ride should be ticking
    dead: null,                // {hadToken}: the server refused the token (4401); nothing more will come
    reconnected: false,        // say "reconnected" once the ride's numbers are back, not at the socket's open
    busy: null,                // id of the start/pause/resume/end in flight (one at a time)
    subscribed: false,
    subscribeId: null,
    cur: null,                 // last state/tick numbers for the ride
    plan: null,
    receipt: null,
    lastAnnounced: '',
    error: null,               // {code, ride, message} of the shown error, re-rendered on language change
    warning: null,
    share: null,               // {url, status}
    // Where the ride is (issue 28), from state/tick `position` and `distance` and `zone`
    // messages: the track is what this page has seen, the distance is the server's.
    geo: { track: [], position: null, distance: null, zone: null, refused: null, zones: undefined },
  };
  const TRACK_MAX = 5000;      // an hour at one fix a second, and then some

  const STALE_MS = 3000;       // issue: no tick for 3 s -> show "reconnecting"
  const DEAD_MS = 10000;       // still nothing: drop the socket and reconnect

  // ---- socket (public/socket.js, shared with the ops console) ----
  const sock = new window.RPSocket({
    token,
    onOpen() {
      S.lastLiveAt = performance.now();
      // Resubscribe first so the numbers are right again within one tick; the socket then
      // replays whatever else was in flight with its original id.
      if (S.ride && !S.notFound && !S.ended() && !sock.hasPending('subscribe')) subscribe();
      renderControls();
    },
    onAuth(m, wasDown) {
      if (m.scope) watchOnly = m.scope === 'watch';
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

  function request(kind, fields) {
    return sock.request(kind, fields);
  }

  function subscribe() {
    if (S.subscribeId) sock.forget(S.subscribeId);
    S.subscribeId = request('subscribe', { ride: S.ride });
  }

  S.ended = () => !!(S.cur && S.cur.state === 'ended');

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

  // ---- map: the ride's track and position over the zones ----
  // `state` carries {lat, lon, at}; a tick carries the position only when it changed, in a
  // compact form (map.js reads both). No position yet: no map at all, not an empty box.
  function takeGeo(m) {
    const g = S.geo;
    if (typeof m.distance === 'number') g.distance = m.distance;
    const p = window.RPMap.positionOf(m.position);
    if (!p) return;
    const last = g.track[g.track.length - 1];
    if (!last || last.lat !== p.lat || last.lon !== p.lon) {
      g.track.push({ lat: p.lat, lon: p.lon });
      if (g.track.length > TRACK_MAX) g.track.splice(0, g.track.length - TRACK_MAX);
    }
    g.position = p;
    if (g.zones === undefined) {
      g.zones = null;
      window.RPMap.loadZones('/zones').then((z) => { g.zones = z || []; renderMap(); });
    }
  }

  let rideMap = null;
  function renderMap() {
    const g = S.geo;
    const fig = $('ride-map');
    const show = !!(g.position && S.cur && !S.notFound);
    fig.hidden = !show;
    if (!show) return;
    if (!rideMap) rideMap = new window.RPMap($('ride-map-svg'), { minMetres: 500 });
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
    for (const k of window.RPMap.KINDS) {
      if (!kinds.has(k)) continue;
      const li = document.createElement('li');
      li.dataset.kind = k;
      li.textContent = I.t(S.lang, 'map.kind.' + k);
      legend.append(li);
    }
    legend.hidden = !kinds.size;
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

  // ---- rendering ----
  function setConn(c) {
    const changed = S.conn !== c;
    S.conn = c;
    const el = $('conn');
    el.dataset.conn = c;
    $('conn-text').textContent = I.t(S.lang, 'conn.' + c);
    document.body.classList.toggle('is-stale', c === 'reconnecting' || (c === 'stopped' && !S.ended()));
    if (changed && c === 'reconnecting' && S.ride) announce(I.t(S.lang, 'status.reconnecting'));
    renderControls();
  }

  function announce(text) {
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
    if (watchOnly && S.notFound) return 'watch-notfound';
    if (watchOnly && !S.ride) return 'watch';
    return null;
  }

  function renderMode() {
    const watching = !!(S.ride && S.cur && !S.notFound);
    const notice = noticeKind(watching);
    const renting = !notice && (!S.ride || S.notFound) && !watchOnly;
    // While a watched ride is still loading neither panel shows; the top bar says "connecting".
    $('ride-dialog').hidden = !watching;
    $('start-panel').hidden = !renting;
    const np = $('notice-panel');
    np.hidden = !notice;
    np.dataset.kind = notice || '';
    if (notice) {
      $('notice-title').textContent = I.t(S.lang, 'notice.' + notice + '.title');
      const textKey = 'notice.' + notice + '.text' + (notice === 'forbidden' && watchOnly ? '.watch' : '');
      $('notice-text').textContent = I.t(S.lang, textKey, { ride: S.ride || '' });
    }
    // Another rider's ride: a rider can still rent one of their own from here.
    $('notice-new').hidden = !(notice === 'forbidden' && !watchOnly);
    // In the ride dialog: the link stopped working, the numbers stay greyed and say so.
    const dead = $('link-dead');
    dead.hidden = !(watching && S.dead);
    if (watching && S.dead) {
      $('dead-title').textContent = I.t(S.lang, 'dead.title');
      $('dead-text').textContent = I.t(S.lang, S.ended() ? 'dead.text.ended'
        : (watchOnly ? 'dead.text.watch' : 'dead.text'));
    }
    document.body.dataset.mode = watching ? 'ride' : (notice ? 'notice' : (renting ? 'start' : 'loading'));
    document.body.dataset.role = watchOnly ? 'watcher' : 'rider';
    document.body.classList.toggle('is-dead', !!S.dead);
    $('watch-note').hidden = !watchOnly;
  }

  function renderNumbers() {
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

  function renderReceipt() {
    const r = S.receipt;
    const box = $('receipt');
    const ended = S.ended();
    box.hidden = !(ended && r);
    const controls = $('controls');
    const focusInControls = controls.contains(document.activeElement);
    controls.hidden = ended || watchOnly;
    // A watcher cannot rent with a watch-only token, so no "rent again" for them.
    $('btn-new').hidden = watchOnly;
    if (ended && (focusInControls || S.refocus)) {
      S.refocus = false;
      (r ? $('btn-new') : $('ride-dialog')).focus();
    }
    if (!ended || !r) return;
    const body = $('receipt-lines');
    body.textContent = '';
    for (const ln of I.receiptRows(S.lang, r, S.plan)) {
      const tr = document.createElement('tr');
      tr.dataset.label = ln.label;
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = ln.text;
      const td = document.createElement('td');
      td.textContent = I.money(S.lang, ln.amount, r.currency);
      td.dataset.minor = String(ln.amount);
      tr.append(th, td);
      body.append(tr);
    }
    const total = $('receipt-total');
    total.textContent = I.money(S.lang, r.fare, r.currency);
    total.dataset.minor = String(r.fare);
    $('receipt-reason').textContent = r.reason ? I.t(S.lang, 'receipt.reason.' + r.reason) : '';
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

  function renderWarning() {
    const w = $('warning');
    if (S.warning == null || S.ended()) { w.hidden = true; return; }
    w.hidden = false;
    // The warning names the time left as of the latest tick, not the (older) warning's.
    const left = S.cur && S.cur.remaining !== null ? Math.min(S.cur.remaining, S.warning) : S.warning;
    w.textContent = I.t(S.lang, 'warning', { t: I.duration(S.lang, left) });
  }

  function renderControls() {
    const online = S.conn === 'online' && sock.isOpen();
    const st = S.cur ? S.cur.state : null;
    const idle = !S.busy;
    $('btn-start').disabled = !(online && idle && (!S.ride || S.notFound));
    setDisabled('btn-pause', !(online && idle && st === 'riding'));
    setDisabled('btn-resume', !(online && idle && st === 'paused'));
    setDisabled('btn-end', !(online && idle && (st === 'riding' || st === 'paused')));
    $('btn-share').disabled = !(online && S.ride && S.cur);
    // Only the owner may share (a watcher gets forbidden), and only a ride that is still on.
    $('share').hidden = watchOnly || S.ended() || !!S.dead;
    $('controls').setAttribute('aria-busy', S.busy ? 'true' : 'false');
    if (watchOnly) $('controls').hidden = true;
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

  function showError(code, message, ride) {
    S.error = { code, message, ride };
    renderError();
  }

  function clearError() {
    S.error = null;
    renderError();
  }

  function renderError() {
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

  function renderStatic() {
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

  function renderAll() {
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
  function buildDial() {
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
})();
