// The chart: rides by state (top) and tick lateness p50/p99 (bottom), last 15 minutes, on a
// canvas (a text name for it is set by ops.js's renderStatic).
import * as I from '../i18n.js';
import { S, HISTORY_MS } from './state.js';

const $ = (id) => document.getElementById(id);

const COLORS = { riding: '#00a878', paused: '#d18a00', p50: '#1f6feb', p99: '#c62828', grid: '#e3e7ec', ink: '#6b7480' };

export function drawChart() {
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
