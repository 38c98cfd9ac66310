#!/bin/bash
# Container HEALTHCHECK: `GET /healthz` must answer 200. Uses bash's /dev/tcp so the
# debian:bookworm-slim image needs neither curl (≈ 10 MB of libraries) nor a subcommand
# in the server. Installed in the image as /usr/local/lib/ridepush/healthcheck.
# Exit 0 healthy, 1 unhealthy (Docker's meaning). Reads the same env as the server.
set -u
host="${RIDEPUSH_HOST:-127.0.0.1}"
case "$host" in ""|0.0.0.0|::|"[::]") host=127.0.0.1 ;; esac   # a wildcard bind: ask loopback
port="${RIDEPUSH_PORT:-8080}"
limit="${RIDEPUSH_HEALTHCHECK_TIMEOUT:-3}"

# probe HOST PORT TLS — one request, reads only the status line.
probe() {
  { exec 3<>"/dev/tcp/$1/$2"; } 2>/dev/null || { echo "unhealthy: cannot connect to $1:$2"; exit 1; }
  if [ "$3" = 1 ]; then
    # bash cannot speak TLS: with TLS inside the container this only proves the port
    # accepts connections. Prefer TLS at the proxy (deploy/nginx/ridepush.conf).
    echo "healthy: tls port $2 accepts connections"; exit 0
  fi
  printf 'GET /healthz HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
  local status
  IFS= read -r status <&3 || { echo "unhealthy: no response"; exit 1; }
  status="${status%$'\r'}"
  case "$status" in
    "HTTP/1."?" 200"*) echo "healthy: $status"; exit 0 ;;
    *) echo "unhealthy: $status"; exit 1 ;;
  esac
}
export -f probe

tls=0
[ -n "${RIDEPUSH_TLS_CERT:-}" ] && tls=1
# timeout bounds connect, write and read together; a hung server is unhealthy too.
timeout "$limit" bash -c 'probe "$@"' probe "$host" "$port" "$tls"
rc=$?
[ $rc -eq 0 ] && exit 0
[ $rc -eq 124 ] && echo "unhealthy: no answer from $host:$port within ${limit}s"
exit 1
