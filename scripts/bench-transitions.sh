#!/usr/bin/env bash
# Durable transitions side by side: runs each given ridepush binary in turn (ROUNDS times,
# alternating, so a busy machine hurts them alike) on a fresh SQLite store and drives it with
# `ridepush bench --transitions`. Prints transitions/s, reply p50/p99, and the server's CPU per
# transition: its busiest thread's (the store worker: the serial part that bounds throughput) and
# the whole process's; and per transition the server's read/write syscalls and bytes written, and
# the store's block device's writes and KiB (the whole device: other writers count too).
#
#   scripts/bench-transitions.sh BIN [BIN…]     e.g. /tmp/before/ridepush .build/release/ridepush
#   env: ROUNDS (2), CONNS (64), DEPTH (2), DURATION (10), PORT (free port), DIR (temp dir)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 RIDEPUSH_BIN [RIDEPUSH_BIN…]" >&2; exit 2; }
ROUNDS=${ROUNDS:-2} CONNS=${CONNS:-64} DEPTH=${DEPTH:-2} DURATION=${DURATION:-10}
PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
DIR=${DIR:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")/.." && pwd)
ticks() { awk '{print $14+$15}' "$1"; }   # utime+stime in clock ticks
io() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/io"; }   # syscr, syscw, wchar
DEV=$(basename "$(findmnt -no SOURCE --target "$DIR" 2>/dev/null || echo none)")
disk() { awk -v d="$DEV" '$3 == d {print $8, $10}' /proc/diskstats; }   # writes completed, sectors written
HZ=$(getconf CLK_TCK)

for round in $(seq 1 "$ROUNDS"); do
  for bin in "$@"; do
    rm -f "$DIR"/r.db*
    "$bin" serve --port "$PORT" --store "$DIR/r.db" --create-store --control-rate 1000000 --threads 2 \
      --auth none --public "$HERE/public" >"$DIR/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
    before=$(ticks "/proc/$pid/stat")
    r0=$(io "$pid" syscr) w0=$(io "$pid" syscw) b0=$(io "$pid" wchar)
    read -r dw0 ds0 < <(disk || echo "0 0")
    declare -A t0=()
    for t in /proc/$pid/task/*; do t0[$t]=$(ticks "$t/stat"); done
    out=$("$bin" bench --transitions --url "ws://127.0.0.1:$PORT/ws" -n "$CONNS" --depth "$DEPTH" \
      --duration "$DURATION" --disk "$DIR" 2>&1)
    after=$(ticks "/proc/$pid/stat")
    r1=$(io "$pid" syscr) w1=$(io "$pid" syscw) b1=$(io "$pid" wchar)
    read -r dw1 ds1 < <(disk || echo "0 0")
    busiest=0
    for t in /proc/$pid/task/*; do
      d=$(( $(ticks "$t/stat") - ${t0[$t]:-0} ))
      [ "$d" -gt "$busiest" ] && busiest=$d
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
    n=$(grep -oP '\(\K[0-9]+(?= replies)' <<<"$out")
    tps=$(grep -oP 'durable transitions/s\s+\K[0-9]+' <<<"$out")
    lat=$(grep -oP 'p50 \K[0-9.]+ ms  p99 [0-9.]+' <<<"$out" | sed 's/ ms  p99 / \/ /')
    disk=$(grep -oP "disk's own fsyncs/s\s+\K[0-9]+" <<<"$out")
    # Syscalls and bytes per transition do not move with the machine's load, unlike the rest.
    printf '%-28s load %-5s  %6s tr/s  p50/p99 %-13s ms  busiest thread %4d µs/tr  process %4d µs/tr  disk %s fsyncs/s  per tr: %s reads %s writes %s KiB written, device %s writes %s KiB\n' \
      "$(basename "$(dirname "$(dirname "$bin")")")/$(basename "$bin")" "$(cut -d' ' -f1 /proc/loadavg)" "$tps" "$lat" \
      $(( busiest * 1000000 / HZ / n )) $(( (after - before) * 1000000 / HZ / n )) "$disk" \
      "$(awk -v a="$r0" -v b="$r1" -v n="$n" 'BEGIN{printf "%.1f", (b-a)/n}')" \
      "$(awk -v a="$w0" -v b="$w1" -v n="$n" 'BEGIN{printf "%.1f", (b-a)/n}')" \
      "$(awk -v a="$b0" -v b="$b1" -v n="$n" 'BEGIN{printf "%.1f", (b-a)/n/1024}')" \
      "$(awk -v a="${dw0:-0}" -v b="${dw1:-0}" -v n="$n" 'BEGIN{printf "%.2f", (b-a)/n}')" \
      "$(awk -v a="${ds0:-0}" -v b="${ds1:-0}" -v n="$n" 'BEGIN{printf "%.1f", (b-a)/2/n}')"
  done
done
