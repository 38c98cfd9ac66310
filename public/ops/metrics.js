// /metrics: the tick lateness histogram, read every few seconds, turned into the chart's
// p50/p99 points (ops/chart.js draws them).
import * as I from '../i18n.js';
import { S, HISTORY_MS, schedule } from './state.js';

const $ = (id) => document.getElementById(id);

// Prometheus text: the cumulative buckets of ridepush_tick_lateness_seconds. Bounds are
// turned into milliseconds here, the unit the chart shows (a tick is late by ms, not s).
export function parseBuckets(text) {
  const out = [];
  const re = /^ridepush_tick_lateness_seconds_bucket\{le="([^"]+)"\} (\d+(?:\.\d+)?)$/gm;
  let m;
  while ((m = re.exec(text))) out.push({ le: m[1] === '+Inf' ? Infinity : Number(m[1]) * 1000, n: Number(m[2]) });
  out.sort((a, b) => a.le - b.le);
  return out;
}

// A quantile of the ticks counted between two reads, from the bucket deltas, with linear
// interpolation inside the bucket (as Prometheus' histogram_quantile does).
export function quantile(q, prev, cur) {
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

export async function readMetrics() {
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
