// RidePush operator console: every ride of the fleet, live, from the ops feed (watch_all:
// one snapshot, then one `fleet` frame per second and `fleet_event`s). Shows what the server
// sends; the riding and paused counts are the server's, the ended count is the table's (see
// renderCounts). Only the rows in view are in the DOM, so 10,000 rides cost one parse and one
// sort a second, and a repaint of ~30 rows.
'use strict';

(function () {
  const I = window.RP_I18N;
  const $ = (id) => document.getElementById(id);

  Object.assign(I.T.ko, {
    'ops.title': 'RidePush 운영',
    'ops.counts': '상태별 라이드',
    'ops.near': '한도 임박',
    'ops.long': '오래 일시정지',
    'ops.chart.title': '최근 15분',
    'ops.p50': '지연 p50',
    'ops.p99': '지연 p99',
    'ops.chart.rides': '라이드 수',
    'ops.chart.lateness': '틱 지연 (ms)',
    'ops.chart.nometrics': '/metrics를 읽을 수 없어 지연 그래프가 비어 있습니다 ({status}).',
    'ops.rides': '라이드',
    'ops.filter': '상태',
    'ops.filter.all': '전체',
    'ops.search': 'ID 검색',
    'ops.shown': '{n}개 표시 / 전체 {total}개',
    'ops.empty': '조건에 맞는 라이드가 없습니다.',
    'ops.col.ride': 'ID',
    'ops.col.owner': '라이더',
    'ops.col.plan': '요금제',
    'ops.col.state': '상태',
    'ops.col.elapsed': '이용 시간',
    'ops.col.fare': '요금',
    'ops.col.remaining': '남은 시간',
    'ops.col.watchers': '보는 사람',
    'ops.mark.near': '한도 임박',
    'ops.mark.long': '오래 일시정지',
    'ops.journal': '기록',
    'ops.j.start': '시작',
    'ops.j.pause': '일시정지',
    'ops.j.resume': '다시 시작',
    'ops.j.end': '종료',
    'ops.j.none': '기록을 불러오는 중…',
    'ops.f.owner': '라이더',
    'ops.f.plan': '요금제',
    'ops.f.started': '시작',
    'ops.f.elapsed': '이용 시간',
    'ops.f.paused': '일시정지 시간',
    'ops.f.pause_now': '이번 일시정지',
    'ops.f.fare': '요금',
    'ops.f.remaining': '남은 시간',
    'ops.f.watchers': '보는 사람',
    'ops.end': '운영자 종료',
    'ops.cancel': '취소',
    'ops.confirm': '확인',
    'ops.ask.end': '라이드 {ride}를 운영자 권한으로 종료할까요? 지금까지의 요금으로 영수증이 발행되며 되돌릴 수 없습니다.',
    'ops.ask.pause': '라이드 {ride}를 운영자 권한으로 일시정지할까요?',
    'ops.ask.resume': '라이드 {ride}를 다시 시작할까요?',
    'ops.done.end': '종료했습니다.',
    'ops.done.pause': '일시정지했습니다.',
    'ops.done.resume': '다시 시작했습니다.',
    'ops.token.label': '운영자 토큰',
    'ops.token.use': '연결',
    'ops.token.none.title': '운영자 토큰이 필요합니다',
    'ops.token.none.text': '`ridepush token --ops --control`로 만든 토큰을 붙여 넣거나 `/ops/?token=…` 링크로 여세요. 토큰은 이 탭에만 보관됩니다.',
    'ops.token.dead.title': '이 토큰은 더 이상 작동하지 않습니다',
    'ops.token.dead.text': '만료되었거나 서버가 새 비밀 키로 다시 시작되었습니다. 화면의 숫자는 마지막으로 받은 값입니다. 새 운영자 토큰을 붙여 넣으세요.',
    'ops.token.forbidden.title': '운영자 토큰이 아닙니다',
    'ops.token.forbidden.text': '이 토큰으로는 전체 라이드를 볼 수 없습니다 (ops 권한 필요). `ridepush token --ops --control`로 만든 토큰을 붙여 넣으세요.',
    'ops.map.title': '지도',
    'ops.map.shown': '위치가 있는 라이드 {n}개',
    'ops.f.position': '위치',
    'ops.f.zone': '구역',
  });
  Object.assign(I.T.en, {
    'ops.title': 'RidePush operations',
    'ops.counts': 'Rides by state',
    'ops.near': 'Near limit',
    'ops.long': 'Long paused',
    'ops.chart.title': 'Last 15 minutes',
    'ops.p50': 'lateness p50',
    'ops.p99': 'lateness p99',
    'ops.chart.rides': 'rides',
    'ops.chart.lateness': 'tick lateness (ms)',
    'ops.chart.nometrics': '/metrics cannot be read, so the lateness chart is empty ({status}).',
    'ops.rides': 'Rides',
    'ops.filter': 'State',
    'ops.filter.all': 'All',
    'ops.search': 'Search ID',
    'ops.shown': '{n} shown of {total}',
    'ops.empty': 'No ride matches.',
    'ops.col.ride': 'ID',
    'ops.col.owner': 'Rider',
    'ops.col.plan': 'Plan',
    'ops.col.state': 'State',
    'ops.col.elapsed': 'Elapsed',
    'ops.col.fare': 'Fare',
    'ops.col.remaining': 'Time left',
    'ops.col.watchers': 'Watchers',
    'ops.mark.near': 'near limit',
    'ops.mark.long': 'long paused',
    'ops.journal': 'Journal',
    'ops.j.start': 'start',
    'ops.j.pause': 'pause',
    'ops.j.resume': 'resume',
    'ops.j.end': 'end',
    'ops.j.none': 'Loading the journal…',
    'ops.f.owner': 'Rider',
    'ops.f.plan': 'Plan',
    'ops.f.started': 'Started',
    'ops.f.elapsed': 'Elapsed',
    'ops.f.paused': 'Paused',
    'ops.f.pause_now': 'This pause',
    'ops.f.fare': 'Fare',
    'ops.f.remaining': 'Time left',
    'ops.f.watchers': 'Watchers',
    'ops.end': 'End as operator',
    'ops.cancel': 'Cancel',
    'ops.confirm': 'Confirm',
    'ops.ask.end': 'End ride {ride} as operator? A receipt for the fare so far is issued; this cannot be undone.',
    'ops.ask.pause': 'Pause ride {ride} as operator?',
    'ops.ask.resume': 'Resume ride {ride}?',
    'ops.done.end': 'Ended.',
    'ops.done.pause': 'Paused.',
    'ops.done.resume': 'Resumed.',
    'ops.token.label': 'Operator token',
    'ops.token.use': 'Connect',
    'ops.token.none.title': 'An operator token is needed',
    'ops.token.none.text': 'Paste a token made with `ridepush token --ops --control`, or open an `/ops/?token=…` link. The token is kept in this tab only.',
    'ops.token.dead.title': 'This token no longer works',
    'ops.token.dead.text': 'It expired, or the server restarted with a new secret. The numbers shown are the last ones received. Paste a new operator token.',
    'ops.token.forbidden.title': 'Not an operator token',
    'ops.token.forbidden.text': 'This token cannot watch the whole fleet (ops is needed). Paste a token made with `ridepush token --ops --control`.',
    'ops.map.title': 'Map',
    'ops.map.shown': '{n} rides with a position',
    'ops.f.position': 'Position',
    'ops.f.zone': 'Zone',
  });

  const NEAR_LIMIT_S = 300;     // the server warns at 5 minutes left: mark from there
  const LONG_PAUSE_S = 600;     // a pause of 10 minutes or more is worth a look
  const FLASH_MS = 1200;
  const ROW_H = 34;             // row height as styled; measured once rendered (borders, zoom)
  const OVERSCAN = 8;
  const HISTORY_MS = 15 * 60 * 1000;
  const METRICS_EVERY_MS = 5000;
  const TOKEN_KEY = 'rp.ops.token';
  const MAP_EVERY_MS = 2000;    // markers follow the fleet frames, redrawn at most this often
  const MAP_HIT_PX = 14;        // a click picks the nearest marker within this distance

  function initialLang() {
    let saved = null;
    try { saved = localStorage.getItem('rp.lang'); } catch (e) { /* storage blocked */ }
    if (saved === 'ko' || saved === 'en') return saved;
    const l = String((navigator.languages && navigator.languages[0]) || navigator.language || 'en').toLowerCase();
    return l.startsWith('ko') ? 'ko' : 'en';
  }

  const S = {
    lang: initialLang(),
    token: window.RPSocket.takeToken(TOKEN_KEY),
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
  function rowFrom(o, prev) {
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
    const pos = window.RPMap.positionOf(o.position);
    if (pos) { r.position = pos; S.mapDirty = true; S.hasPositions = true; }
    if (typeof o.distance === 'number') r.distance = o.distance;
    return r;
  }

  function pauseNow(r, at) {
    if (r.state !== 'paused') return 0;
    if (typeof r.paused_since === 'number' && at) return Math.max(0, Math.floor((at - r.paused_since) / 1000));
    return r.paused;
  }
  const isNear = (r) => r.state !== 'ended' && r.remaining !== null && r.remaining <= NEAR_LIMIT_S;
  const isLong = (r, at) => pauseNow(r, at || S.lastAt) >= LONG_PAUSE_S;

  function flash(r) {
    r.flashUntil = performance.now() + FLASH_MS;
  }

  function onSnapshot(m) {
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

  function onFleet(m) {
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
      const pos = x.length > 7 ? window.RPMap.positionOf(x[7]) : null;
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

  function onEvent(m) {
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

  // ---- socket (the rider page's own module) ----
  let sock = null;

  // Without a token the socket still asks (auth off needs none); a refusal shows the panel.
  function start() {
    sock = new window.RPSocket({
      token: S.token,
      onOpen() { /* watch_all waits for `authenticated`, so a refused token never gets `forbidden` first */ },
      onAuth(m, wasDown) {
        S.snapshotRows = null;
        S.snapshotId = sock.request('watch_all', {});
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
    sock.connect();
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

  // ---- HTTP: ended rides (the snapshot has open ones only) and /metrics ----
  const ENDED_PAGES = 10;
  async function loadEnded() {
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

  // Prometheus text: the cumulative buckets of ridepush_tick_lateness_seconds. Bounds are
  // turned into milliseconds here, the unit the chart shows (a tick is late by ms, not s).
  function parseBuckets(text) {
    const out = [];
    const re = /^ridepush_tick_lateness_seconds_bucket\{le="([^"]+)"\} (\d+(?:\.\d+)?)$/gm;
    let m;
    while ((m = re.exec(text))) out.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]) * 1000, n: Number(m[2]) });
    out.sort((a, b) => a.le - b.le);
    return out;
  }

  // A quantile of the ticks counted between two reads, from the bucket deltas, with linear
  // interpolation inside the bucket (as Prometheus' histogram_quantile does).
  function quantile(q, prev, cur) {
    const d = cur.map((b, i) => ({ le: b.le, n: b.n - (prev && prev[i] && prev[i].le === b.le ? prev[i].n : 0) }));
    const total = d.length ? d[d.length - 1].n : 0;
    if (total <= 0) return null;
    const rank = q * total;
    for (let i = 0; i < d.length; i++) {
      if (d[i].n >= rank) {
        const lo = i ? d[i - 1].le : 0;
        const loN = i ? d[i - 1].n : 0;
        if (d[i].le === Infinity) return lo;
        const inBucket = d[i].n - loN;
        return inBucket > 0 ? lo + (d[i].le - lo) * ((rank - loN) / inBucket) : d[i].le;
      }
    }
    return null;
  }

  async function readMetrics() {
    let res;
    try {
      res = await fetch('/metrics', { cache: 'no-store' });
    } catch (e) {
      S.metricsNote = I.t(S.lang, 'ops.chart.nometrics', { status: 'offline' });
      $('chart-note').textContent = S.metricsNote;
      return;
    }
    if (!res.ok) {
      S.metricsNote = I.t(S.lang, 'ops.chart.nometrics', { status: String(res.status) });
      $('chart-note').textContent = S.metricsNote;
      return;
    }
    S.metricsNote = '';
    $('chart-note').textContent = '';
    const cur = parseBuckets(await res.text());
    if (S.lastBuckets) {
      const p50 = quantile(0.5, S.lastBuckets, cur);
      const p99 = quantile(0.99, S.lastBuckets, cur);
      if (p50 !== null) {
        const t = S.lastAt || Date.now();
        S.lateness.push({ t, p50, p99 });
        while (S.lateness.length && S.lateness[0].t < t - HISTORY_MS) S.lateness.shift();
        S.chartDirty = true;
        schedule();
      }
    }
    S.lastBuckets = cur;
  }

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

  function rebuild() {
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
  function resort() {
    S.view.sort(comparator());
    S.resort = false;
    S.paint = true;
  }

  // ---- rendering: one requestAnimationFrame at a time ----
  let raf = 0;
  function schedule() {
    if (!raf) raf = requestAnimationFrame(frame);
  }

  // What one fleet frame costs the page (for the benchmark): handling the message, and the
  // animation frame that renders it.
  const cost = { handle: [], render: [], pending: false };
  function push(a, v) {
    a.push(v);
    if (a.length > 240) a.shift();
  }

  function frame() {
    raf = 0;
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

  function paintRows() {
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
  function renderCounts() {
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

  // ---- chart: rides by state (top) and tick lateness p50/p99 (bottom), last 15 minutes ----
  const COLORS = { riding: '#00a878', paused: '#d18a00', p50: '#1f6feb', p99: '#c62828', grid: '#e3e7ec', ink: '#6b7480' };

  function drawChart() {
    S.chartDirty = false;
    const cv = $('chart');
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth;
    const h = cv.clientHeight;
    if (!w || !h) return;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
    }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const now = S.lastAt || Date.now();
    const t0 = now - HISTORY_MS;
    const gap = 18;
    const half = (h - gap - 24) / 2;
    const panels = [
      { top: 10, h: half, label: I.t(S.lang, 'ops.chart.rides'), data: S.history, series: ['riding', 'paused'], unit: '' },
      { top: 10 + half + gap, h: half, label: I.t(S.lang, 'ops.chart.lateness'), data: S.lateness, series: ['p50', 'p99'], unit: '' },
    ];
    g.font = '11px system-ui, sans-serif';
    let axisW = 0;
    for (const p of panels) {
      let max = 0;
      for (const d of p.data) for (const s of p.series) if (d[s] > max) max = d[s];
      p.max = niceMax(max);
      axisW = Math.max(axisW, g.measureText(fmtAxis(p.max)).width);
    }
    // The plot starts right of the widest axis figure ("100,000" is wider than the 44 px that
    // fit up to 10,000), so the panel's name beside the top figure never runs into it.
    const left = Math.max(44, Math.ceil(axisW) + 10);
    const right = w - 8;
    for (const p of panels) {
      const max = p.max;
      g.strokeStyle = COLORS.grid;
      g.fillStyle = COLORS.ink;
      g.lineWidth = 1;
      for (let i = 0; i <= 2; i++) {
        const y = p.top + p.h - (p.h * i) / 2;
        g.beginPath();
        g.moveTo(left, Math.round(y) + 0.5);
        g.lineTo(right, Math.round(y) + 0.5);
        g.stroke();
        g.fillText(fmtAxis((max * i) / 2), 4, y + 4);
      }
      g.fillText(p.label, left + 4, p.top + 11);
      for (const s of p.series) {
        g.strokeStyle = COLORS[s];
        g.lineWidth = 2;
        g.beginPath();
        let moved = false;
        for (const d of p.data) {
          if (d.t < t0 || d[s] === null || d[s] === undefined) continue;
          const x = left + ((d.t - t0) / HISTORY_MS) * (right - left);
          const y = p.top + p.h - (max ? (d[s] / max) * p.h : 0);
          if (!moved) { g.moveTo(x, y); moved = true; } else g.lineTo(x, y);
        }
        g.stroke();
      }
    }
    // Time axis: minutes ago.
    g.fillStyle = COLORS.ink;
    for (let m = 15; m >= 0; m -= 5) {
      const x = left + ((HISTORY_MS - m * 60000) / HISTORY_MS) * (right - left);
      const label = m ? '-' + m + (S.lang === 'ko' ? '분' : ' min') : (S.lang === 'ko' ? '지금' : 'now');
      g.fillText(label, Math.min(x - 10, right - 28), h - 3);
    }
  }

  function niceMax(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const k of [1, 2, 2.5, 5, 10]) if (k * p >= v) return k * p;
    return 10 * p;
  }

  function fmtAxis(v) {
    return v >= 1000 ? I.num(S.lang, Math.round(v)) : String(Math.round(v * 10) / 10);
  }

  // ---- fleet map ----
  let fleetMap = null;
  function drawMap() {
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
      window.RPMap.loadZones('/zones').then((z) => { S.zones = z || []; S.mapDirty = true; S.mapDrawnAt = 0; schedule(); });
    }
    if (!fleetMap) fleetMap = new window.RPMap($('fleet-map'), { pad: 12, markerR: 5 });
    const svg = $('fleet-map');
    // Smaller dots on a phone-sized map, so a few hundred rides do not hide the zones.
    fleetMap.o.markerR = svg.clientWidth < 500 ? 3.5 : 5;
    fleetMap.draw({ zones: S.zones || [], markers, fit: 'fleet' });
    svg.dataset.markers = String(markers.length);
    $('map-shown').textContent = I.t(S.lang, 'ops.map.shown', { n: I.num(S.lang, markers.length) });
    // The grid rows changed size when the card appeared: repaint the rows in view.
    if (!was) { S.paint = true; S.chartDirty = true; }
  }

  // ---- detail ----
  function select(id) {
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

  function requestDetail() {
    if (!S.sel || !sock) return;
    if (S.detailGet) sock.forget(S.detailGet);
    S.detailGet = sock.request('get', { ride: S.sel });
  }

  function fact(dl, key, value) {
    const dt = document.createElement('dt');
    dt.textContent = I.t(S.lang, key);
    const dd = document.createElement('dd');
    dd.textContent = value;
    dd.dataset.key = key.replace('ops.f.', '');
    dl.append(dt, dd);
  }

  function renderDetailFigures() {
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
    const online = !!(sock && sock.isOpen()) && S.panel === null;
    $('op-pause').disabled = !(online && st === 'riding');
    $('op-resume').disabled = !(online && st === 'paused');
    $('op-end').disabled = !(online && (st === 'riding' || st === 'paused'));
    $('detail-actions').hidden = st === 'ended';
  }

  function renderDetail() {
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
      const body = $('detail-receipt');
      body.textContent = '';
      for (const ln of I.receiptRows(S.lang, rc, d.plan)) {
        const tr = document.createElement('tr');
        tr.dataset.label = ln.label;
        const th = document.createElement('th');
        th.scope = 'row';
        th.textContent = ln.text;
        const td = document.createElement('td');
        td.textContent = I.money(S.lang, ln.amount, rc.currency);
        tr.append(th, td);
        body.append(tr);
      }
      const total = $('detail-total');
      total.textContent = I.money(S.lang, rc.fare, rc.currency);
      total.dataset.minor = String(rc.fare);
      $('detail-reason').textContent = rc.reason ? I.t(S.lang, 'receipt.reason.' + rc.reason) : '';
    }
    $('detail-status').textContent = S.status ? I.t(S.lang, S.status) : '';
  }

  // ---- confirmation, then the request as ops ----
  function ask(kind) {
    if (!S.sel) return;
    S.confirm = { kind, ride: S.sel };
    $('confirm-text').textContent = I.t(S.lang, 'ops.ask.' + kind, { ride: S.sel });
    $('confirm-ok').textContent = I.t(S.lang, kind === 'end' ? 'ops.end' : 'btn.' + kind);
    $('confirm').dataset.kind = kind;
    $('confirm').showModal();
  }

  function confirmed() {
    const c = S.confirm;
    S.confirm = null;
    if (!c || !sock) return;
    S.status = '';
    sock.request(c.kind, { ride: c.ride });
  }

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
    const c = sock ? sock.conn : 'stopped';
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
    window.addEventListener('resize', () => { S.paint = true; S.chartDirty = true; frame(); });
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
})();
