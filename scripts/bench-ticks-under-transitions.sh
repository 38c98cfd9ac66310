#!/usr/bin/env bash
# Tick lateness with and without durable-transition load beside it (issue 11): one server on a
# fresh SQLite store, SUBS subscribers measured idle, then again while `bench --transitions`
# (CONNS x DEPTH) runs on the same server. Prints both bench summaries and the transition rate.
#
#   scripts/bench-ticks-under-transitions.sh BIN      env: SUBS (10000), WINDOW (10), CONNS (64), DEPTH (2)
set -euo pipefail
BIN=${1:?usage: $0 RIDEPUSH_BIN}
SUBS=${SUBS:-10000} WINDOW=${WINDOW:-10} CONNS=${CONNS:-64} DEPTH=${DEPTH:-2}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
HERE=$(cd "$(dirname "$0")/.." && pwd)
"$BIN" serve --port "$PORT" --store "$DIR/r.db" --create-store --control-rate 1000000 --auth none \
  --public "$HERE/public" >"$DIR/serve.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
summary() { grep -E "latency|missed|CPU per|RSS|messages/s" || true; }
echo "== idle: $SUBS subscribers (load $(cut -d' ' -f1 /proc/loadavg))"
"$BIN" bench --url "ws://127.0.0.1:$PORT/ws" -n "$SUBS" -d "$WINDOW" --pid "$pid" 2>&1 | summary
echo "== with $CONNS x $DEPTH durable transitions beside it (load $(cut -d' ' -f1 /proc/loadavg))"
# The transition load starts first and outlasts the tick bench's connect, warm-up and window.
"$BIN" bench --transitions --url "ws://127.0.0.1:$PORT/ws" -n "$CONNS" --depth "$DEPTH" \
  --duration $(( WINDOW + 25 )) --disk "$DIR" >"$DIR/tr.out" 2>&1 &
tr=$!
sleep 4
"$BIN" bench --url "ws://127.0.0.1:$PORT/ws" -n "$SUBS" -d "$WINDOW" --pid "$pid" 2>&1 | summary
wait "$tr" || true
grep -E "transitions/s|latency|fsyncs" "$DIR/tr.out"
