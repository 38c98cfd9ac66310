#!/usr/bin/env bash
# Side by side: the reference C server (../shared/bench) and RidePush, measured the same way
# by `ridepush bench`, one after the other on this machine. Prints each run's table and a
# summary line per server; nothing here is a pass/fail test.
#
#   scripts/bench-compare.sh [-n CLIENTS] [-d SECONDS] [-p BENCH_PROCS] [-t THREADS] [-k REPEATS]
#
# Needs: a release build (make release), gcc + libwebsockets-dev for the reference, which is
# built out of ../shared/bench into /tmp/ridepush-bench (never copied into this repository).
set -euo pipefail
cd "$(dirname "$0")/.."
N=19000 D=15 P=1 T="" K=1 SHARED=${SHARED:-../shared/bench}
while getopts "n:d:p:t:k:" o; do
  case $o in n) N=$OPTARG;; d) D=$OPTARG;; p) P=$OPTARG;; t) T=$OPTARG;; k) K=$OPTARG;; *) exit 2;; esac
done
BIN=.build/release/ridepush
[ -x "$BIN" ] || { echo "build first: make release" >&2; exit 2; }
REFBIN=/tmp/ridepush-bench/ref_lws_server
[ -x "$REFBIN" ] || make -s -C "$SHARED" OUT=/tmp/ridepush-bench >/dev/null
OUT=${OUT:-bench-output}; mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
summary() {  # label json
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[2])); s = d["server"]
print("%-10s connected %5d  missed %d  p50/p90/p99 %6.1f / %6.1f / %6.1f ms  CPU/tick %5.2f µs  RSS/sub %4.2f KiB"
      % (sys.argv[1], d["connected"], d["missed_ticks"], d["latency_ms"]["p50"], d["latency_ms"]["p90"],
         d["latency_ms"]["p99"], s["cpu_us_per_tick"], s["rss_kib_per_subscriber"]))
PY
}
echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores; N=$N window=${D}s bench procs=$P"
for k in $(seq 1 "$K"); do
  port=$(free_port)
  "$REFBIN" -p "$port" -t $((D + 90)) >"$OUT/ref-$k.log" 2>&1 & ref=$!
  sleep 1
  "$BIN" bench --url "ws://127.0.0.1:$port/" -n "$N" --duration "$D" --ramp 3000 --procs "$P" --pid "$ref" --json \
    >"$OUT/ref-$k.json" 2>/dev/null || true
  kill "$ref" 2>/dev/null; wait "$ref" 2>/dev/null || true
  port=$(free_port)
  "$BIN" serve --port "$port" --store memory --auth none --max-connections-per-ip 1000000 ${T:+--threads $T} \
    >"$OUT/rp-$k.log" 2>&1 & rp=$!
  sleep 1
  "$BIN" bench --url "ws://127.0.0.1:$port/ws" -n "$N" --duration "$D" --ramp 3000 --procs "$P" --pid "$rp" --json \
    >"$OUT/rp-$k.json" 2>/dev/null || true
  kill "$rp" 2>/dev/null; wait "$rp" 2>/dev/null || true
  summary "reference" "$OUT/ref-$k.json"
  summary "ridepush" "$OUT/rp-$k.json"
done
