#!/usr/bin/env bash
# Runs RidePush in the foreground the way deploy/ridepush.service does, on a host without
# systemd (runit, OpenRC, supervisord, a container's init, a shell): the same env file, the
# same secret, the same unprivileged user and file limit. Run it as root from the
# supervisor; it reads the root-only secret, then becomes the service user and execs
# `ridepush serve`, so signals (SIGTERM → drain: every socket closed with 1012) reach the server.
#
#   sudo deploy/run-without-systemd.sh [extra serve flags]
#
# RIDEPUSH_ETC (default /etc/ridepush), RIDEPUSH_BIN (/usr/local/bin/ridepush) and
# RIDEPUSH_USER (ridepush) change where it looks and who it runs as.
set -euo pipefail
ETC=${RIDEPUSH_ETC:-/etc/ridepush}
BIN=${RIDEPUSH_BIN:-/usr/local/bin/ridepush}
RUN_AS=${RIDEPUSH_USER:-ridepush}

die() { echo "run-without-systemd: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "run it as root: it reads $ETC/jwt-secret (root-only), then drops to $RUN_AS"
[ -r "$ETC/ridepush.env" ] || die "no $ETC/ridepush.env (deploy/install.sh installs it)"
[ -r "$ETC/jwt-secret" ] || die "no $ETC/jwt-secret (deploy/install.sh makes one)"
id "$RUN_AS" >/dev/null 2>&1 || die "no user $RUN_AS (deploy/install.sh creates it)"

# The env file as systemd's EnvironmentFile= reads it: KEY=value lines, the value taken
# whole (spaces included, no shell expansion), one pair of surrounding quotes removed.
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in ''|'#'*|';'*) continue ;; esac
  key=${line%%=*}
  value=${line#*=}
  [[ "$key" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "$ETC/ridepush.env: not KEY=value: $line"
  if [[ "$value" =~ ^\"(.*)\"$ || "$value" =~ ^\'(.*)\'$ ]]; then value=${BASH_REMATCH[1]}; fi
  export "$key=$value"
done < "$ETC/ridepush.env"
# systemd hands the server a private copy through LoadCredential=; here the secret goes in
# the environment, readable only by root and the service user (/proc/PID/environ is 0400).
RIDEPUSH_JWT_SECRET=$(cat "$ETC/jwt-secret")
export RIDEPUSH_JWT_SECRET

# LimitNOFILE=1048576: one file per subscriber socket. Up to the hard limit if lower.
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# StateDirectory=: the store's folder, owned by the service user.
if [ -n "${RIDEPUSH_STORE:-}" ] && [ "$RIDEPUSH_STORE" != memory ]; then
  install -d -o "$RUN_AS" -g "$(id -gn "$RUN_AS")" -m 0750 "$(dirname "$RIDEPUSH_STORE")"
fi

# shellcheck disable=SC2086  # RIDEPUSH_SERVE_ARGS is a list of flags, split on purpose
exec setpriv --reuid="$RUN_AS" --regid="$(id -g "$RUN_AS")" --init-groups --inh-caps=-all --no-new-privs -- \
  "$BIN" serve ${RIDEPUSH_SERVE_ARGS:-} "$@"
