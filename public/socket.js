// One ride.v1 WebSocket with reconnect, requests by id and the token sent in a first `auth`
// message. Shared by the rider page (app.js) and the ops console (ops/ops.js): one copy of
// the backoff, the replay of requests in flight and the stop on 4401.

const BACKOFF_MIN = 500;
const BACKOFF_MAX = 5000;
// A draining node's 1012: reconnect within this many ms (uniform), not after a backoff.
const RESTART_JITTER = 250;

// crypto.randomUUID exists only in secure contexts (https, localhost); a plain-http LAN
// address still gets unique ids from getRandomValues.
function newId() {
  if (window.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

// The token arrives in a link (?token=…, or #token=… after nginx moved it out of the
// query) and lives in this tab's sessionStorage from then on, so it is never left in the
// address bar, the history, a bookmark or a screenshot. A token in the link wins over a
// stored one: opening a share link in a tab replaces that tab's token.
function takeToken(key) {
  const url = new URL(location.href);
  const hash = new URLSearchParams(url.hash.replace(/^#/, ''));
  const fromLink = url.searchParams.get('token') || hash.get('token');
  let stored = null;
  try { stored = sessionStorage.getItem(key); } catch (e) { /* storage blocked */ }
  if (url.searchParams.has('token') || hash.has('token')) {
    url.searchParams.delete('token');
    hash.delete('token');
    const h = hash.toString();
    url.hash = h ? '#' + h : '';
    history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  }
  if (!takeToken.watching) {
    // A link pasted into this tab that differs only in its #token=… does not reload the
    // page by itself; reload so the new token is taken like any other.
    takeToken.watching = true;
    window.addEventListener('hashchange', () => {
      if (new URLSearchParams(location.hash.replace(/^#/, '')).has('token')) location.reload();
    });
  }
  if (fromLink) {
    try { sessionStorage.setItem(key, fromLink); } catch (e) { /* kept in memory only */ }
    return fromLink;
  }
  return stored;
}

// Claims of a JWT, read without verifying (the server verifies; this only shapes the UI
// before the `authenticated` reply arrives).
function claims(token) {
  if (!token) return null;
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '==='.slice((part.length + 3) % 4)));
  } catch (e) {
    return null;
  }
}

/**
 * new RPSocket({token, onOpen, onAuth, onMessage, onConn, onStop})
 * - token: string or null. `auth` is the first frame of every connection (without a
 *   token it asks whether the server needs one: auth off answers `authenticated`, auth
 *   on `unauthorized` and close 4401 -> onStop).
 * - onOpen(wasDown): the socket is open; frames sent now follow `auth`.
 * - onAuth(msg, wasDown): the `authenticated` reply (scope/sub); the link is 'online'.
 * - onMessage(msg, pending): every other message; `pending` is the request it answers.
 * - onConn(state): 'connecting' | 'online' | 'reconnecting' | 'stopped'.
 * - onStop(code, reason, hadToken): 4401 — retrying cannot help.
 */
function RPSocket(opts) {
  this.o = opts;
  this.token = opts.token || null;
  this.ws = null;
  this.conn = 'connecting';
  this.attempt = 0;
  this.timer = null;
  this.pending = new Map();   // id -> {msg, kind}; resent with the same id after a reconnect
  this.authId = null;
}

RPSocket.prototype.url = function () {
  return (location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/ws';
};

RPSocket.prototype.setConn = function (c) {
  if (this.conn === c) return;
  this.conn = c;
  if (this.o.onConn) this.o.onConn(c);
};

RPSocket.prototype.connect = function () {
  clearTimeout(this.timer);
  this.timer = null;
  let ws;
  try {
    ws = new WebSocket(this.url(), 'ride.v1');
  } catch (e) {
    this.retry();
    return;
  }
  this.ws = ws;
  ws.onopen = () => {
    if (this.ws !== ws) return;
    this.attempt = 0;
    this.wasDown = this.conn === 'reconnecting';
    this.authId = newId();
    // Without a token, "-" (never a valid token) asks whether the server needs one: with
    // auth off every token is accepted, with auth on it is refused with 4401 at once.
    ws.send(JSON.stringify({ type: 'auth', id: this.authId, token: this.token || '-' }));
    // Frames sent now follow `auth` on the same connection, so the server reads them
    // authenticated; 'online' waits for the server's answer to `auth`.
    if (this.o.onOpen) this.o.onOpen(this.wasDown);
    // Replay what was in flight with its original id: the server replays its reply.
    for (const p of Array.from(this.pending.values())) if (!p.sentOn || p.sentOn !== ws) this.raw(p.msg, p);
  };
  ws.onmessage = (ev) => {
    if (this.ws !== ws) return;
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.id != null && m.id === this.authId) {
      // `unauthorized` is followed by close 4401, which onclose reports.
      if (m.type === 'error' && m.code === 'unauthorized') return;
      this.setConn('online');
      if (this.o.onAuth) this.o.onAuth(m, this.wasDown);
      return;
    }
    const p = m.id != null ? this.pending.get(m.id) : null;
    if (p) this.pending.delete(m.id);
    this.o.onMessage(m, p || null);
  };
  ws.onclose = (ev) => {
    if (this.ws !== ws) return;
    this.ws = null;
    // 4401: the token is missing, expired or from another secret. Retrying cannot fix
    // that, so stop instead of knocking every 5 s forever.
    if (ev.code === 4401) {
      this.setConn('stopped');
      if (this.o.onStop) this.o.onStop(ev.code, ev.reason, !!this.token);
      return;
    }
    // 1012: the node is draining (a rolling restart) and the load balancer already sends
    // elsewhere, so come back at once, not after a backoff; the jitter keeps the riders it
    // closes in one beat from arriving in the same instant. Pending requests are resent by id
    // on the new connection and the page resubscribes on `onAuth`, as after any reconnect.
    if (ev.code === 1012) {
      this.attempt = 0;
      this.setConn('reconnecting');
      this.retrySoon();
      return;
    }
    this.setConn('reconnecting');
    this.retry();
  };
  ws.onerror = () => { /* onclose follows and schedules the retry */ };
};

// Exponential backoff with jitter: about 0.5 s, 1 s, 2 s, 4 s, then 5 s; each delay is
// drawn from [d/2, d] so many pages do not come back in lockstep after a restart.
RPSocket.prototype.retry = function () {
  if (this.timer || this.conn === 'stopped') return;
  const d = Math.min(BACKOFF_MAX, BACKOFF_MIN * Math.pow(2, this.attempt));
  this.attempt += 1;
  this.timer = setTimeout(() => this.connect(), d / 2 + Math.random() * d / 2);
};

// Reconnect within RESTART_JITTER ms, uniformly: at once, but not all in the same instant.
RPSocket.prototype.retrySoon = function () {
  if (this.timer || this.conn === 'stopped') return;
  this.timer = setTimeout(() => this.connect(), Math.random() * RESTART_JITTER);
};

// Open but silent (a watchdog decided): drop it and start over with backoff.
RPSocket.prototype.restart = function () {
  const ws = this.ws;
  if (!ws) return;
  this.ws = null;
  try { ws.close(); } catch (e) { /* already closing */ }
  this.setConn('reconnecting');
  this.retry();
};

RPSocket.prototype.isOpen = function () {
  return !!(this.ws && this.ws.readyState === WebSocket.OPEN);
};

RPSocket.prototype.raw = function (msg, p) {
  if (!this.isOpen()) return false;
  this.ws.send(JSON.stringify(msg));
  if (p) p.sentOn = this.ws;
  return true;
};

// A request stays pending until its reply (same id) arrives, so a reconnect resends it.
RPSocket.prototype.request = function (kind, fields) {
  const msg = Object.assign({ type: kind, id: newId() }, fields);
  const p = { msg, kind };
  this.pending.set(msg.id, p);
  this.raw(msg, p);
  return msg.id;
};

RPSocket.prototype.forget = function (id) {
  this.pending.delete(id);
};

RPSocket.prototype.hasPending = function (kind) {
  for (const [, p] of this.pending) if (p.kind === kind) return true;
  return false;
};

export { RPSocket, newId, takeToken, claims };
