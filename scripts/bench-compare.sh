#!/usr/bin/env bash
# Side by side: the reference C server and the floor (../shared/bench) and RidePush, measured
# the same way by `ridepush bench`, one after the other in one run on this machine. Prints each
# run's figures, then every figure as a ratio to the reference and to the floor of the same
# repeat, and the spread of those ratios over the repeats; nothing here is a pass/fail test.
#
#   scripts/bench-compare.sh [-n CLIENTS] [-d SECONDS] [-p BENCH_PROCS] [-t THREADS] [-k REPEATS]
#                            [-T CONNECT_TIMEOUT] [-s "reference floor ridepush ridepush-memory"] [-x LABEL=BIN]…
#
# -s picks the servers (in that order each repeat); -x adds another RidePush binary under LABEL
# (say, an older build, so before and after are measured in one run). RP_ARGS adds serve flags.
# RidePush runs as `make run` starts it: a SQLite file (fresh, in a temporary folder), JWT auth,
# one operator control token sent in a first `auth` frame as the page and the SDK send it, the
# rides started by the bench before the window. `ridepush-memory` is the old extra row:
# `--store memory --auth none`. A label ending in `-memory` runs that way for -x binaries too.
# Needs: a release build (make release), gcc + libwebsockets-dev + libssl-dev for the reference
# and the floor, built out of ../shared/bench into /tmp/ridepush-bench (never copied here).
set -euo pipefail
cd "$(dirname "$0")/.."
N=19000 D=15 P=1 T="" K=1 CT=60 SERVERS="reference floor ridepush ridepush-memory"
# ../shared/bench from the main checkout, ../../shared/bench from a worktree under wt/.
SHARED=${SHARED:-$( [ -d ../shared/bench ] && echo ../shared/bench || echo ../../shared/bench )}
EXTRA=()
while getopts "n:d:p:t:k:T:s:x:" o; do
  case $o in
    n) N=$OPTARG;; d) D=$OPTARG;; p) P=$OPTARG;; t) T=$OPTARG;; k) K=$OPTARG;; T) CT=$OPTARG;;
    s) SERVERS=$OPTARG;; x) EXTRA+=("$OPTARG"); SERVERS+=" ${OPTARG%%=*}";; *) exit 2;;
  esac
done
BIN=.build/release/ridepush
[ -x "$BIN" ] || { echo "build first: make release" >&2; exit 2; }
BENCHBIN=/tmp/ridepush-bench
[ -x "$BENCHBIN/ref_lws_server" ] && [ -x "$BENCHBIN/floor_server" ] || make -s -C "$SHARED" OUT="$BENCHBIN" >/dev/null
OUT=${OUT:-bench-output}; mkdir -p "$OUT"
STAMP=$(date -u +%H%M%S)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
binary_of() {  # label -> the RidePush binary it runs ("" for the C servers)
  case $1 in reference|floor) echo "";; ridepush|ridepush-memory) echo "$BIN";;
    *) for e in "${EXTRA[@]}"; do [ "${e%%=*}" = "$1" ] && { echo "${e#*=}"; return; }; done
       echo "unknown server $1" >&2; exit 2;;
  esac
}
SECRET_DIR=$(mktemp -d); trap 'rm -rf "$SECRET_DIR"' EXIT
head -c 48 /dev/urandom | base64 | tr -d '\n' >"$SECRET_DIR/secret"; chmod 600 "$SECRET_DIR/secret"
TOKEN=$("$BIN" token --control --ops --ttl 2h --jwt-secret-file "$SECRET_DIR/secret")
run_one() {  # label repeat -> $OUT/<stamp>-<label>-<repeat>.json
  local label=$1 k=$2 port pid path=/ bin cfg auth=()
  port=$(free_port); bin=$(binary_of "$label")
  case $label in
    reference|floor) ;;
    *-memory) cfg=(--store memory --auth none);;
    *) rm -f "$SECRET_DIR"/store.db*
       cfg=(--store "$SECRET_DIR/store.db" --create-store --auth jwt --jwt-secret-file "$SECRET_DIR/secret")
       auth=(--token "$TOKEN" --auth-frame);;
  esac
  case $label in
    reference) "$BENCHBIN/ref_lws_server" -p "$port" -t $((D + CT + 60)) >"$OUT/$STAMP-$label-$k.log" 2>&1 & pid=$!;;
    floor) "$BENCHBIN/floor_server" -p "$port" -t $((D + CT + 60)) >"$OUT/$STAMP-$label-$k.log" 2>&1 & pid=$!;;
    *) path=/ws
       # shellcheck disable=SC2086
       "$bin" serve --port "$port" "${cfg[@]}" --max-connections-per-ip 1000000 ${T:+--threads $T} \
         ${RP_ARGS:-} >"$OUT/$STAMP-$label-$k.log" 2>&1 & pid=$!;;
  esac
  sleep 1
  "$BIN" bench --url "ws://127.0.0.1:$port$path" -n "$N" --duration "$D" --ramp 3000 --procs "$P" \
    --connect-timeout "$CT" --pid "$pid" "${auth[@]}" --json >"$OUT/$STAMP-$label-$k.json" 2>/dev/null || true
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
}
echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) cores; N=$N window=${D}s bench procs=$P; servers: $SERVERS"
for k in $(seq 1 "$K"); do
  for s in $SERVERS; do run_one "$s" "$k"; done
done
python3 - "$OUT" "$STAMP" "$K" $SERVERS <<'PY'
import json, os, sys
out, stamp, K, servers = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(label, k):
    try:
        d = json.load(open(os.path.join(out, "%s-%s-%d.json" % (stamp, label, k))))
    except (OSError, ValueError):
        return None
    s = d.get("server") or {}
    return {"connected": d["connected"], "failed": d["failed"], "missed": d["missed_ticks"],
            "p50": d["latency_ms"]["p50"], "p99": d["latency_ms"]["p99"],
            "cpu": s.get("cpu_us_per_tick"), "cpu%": s.get("cpu_percent"), "rss": s.get("rss_kib_per_subscriber")}
keys = [("cpu", "CPU/tick µs"), ("p50", "p50 ms"), ("p99", "p99 ms"), ("rss", "RSS/sub KiB")]
ratios = {}
for k in range(1, K + 1):
    rows = {s: load(s, k) for s in servers}
    print("## repeat %d" % k)
    for s, r in rows.items():
        if r is None:
            print("%-10s (no result)" % s); continue
        print("%-10s connected %5d failed %5d missed %d  p50/p99 %6.1f / %6.1f ms  CPU/tick %s µs (%s %% of a core)  RSS/sub %s KiB"
              % (s, r["connected"], r["failed"], r["missed"], r["p50"] or 0, r["p99"] or 0, r["cpu"], r["cpu%"], r["rss"]))
    for s, r in rows.items():
        if r is None: continue
        for base in ("reference", "floor"):
            b = rows.get(base)
            if b is None or base == s: continue
            for key, _ in keys:
                if r[key] and b[key]:
                    ratios.setdefault((s, base, key), []).append(r[key] / b[key])
    for s in servers:
        parts = []
        for base in ("reference", "floor"):
            if s == base or (s, base, "cpu") not in ratios and (s, base, "p99") not in ratios: continue
            parts.append("vs %s: " % base + "  ".join("%s %.2f×" % (name, ratios[(s, base, key)][-1])
                                                    for key, name in keys if (s, base, key) in ratios
                                                    and len(ratios[(s, base, key)]) == k))
        if parts: print("  %-8s %s" % (s, "   ".join(parts)))
print("## ratios over %d repeat(s): mean (min–max)" % K)
for s in servers:
    for base in ("reference", "floor"):
        cells = []
        for key, name in keys:
            v = ratios.get((s, base, key))
            if v: cells.append("%s %.2f× (%.2f–%.2f)" % (name, sum(v) / len(v), min(v), max(v)))
        if cells: print("%-10s / %-9s %s" % (s, base, "   ".join(cells)))
PY
