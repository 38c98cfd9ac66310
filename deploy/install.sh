#!/usr/bin/env bash
# Installs RidePush on a Debian host (or, with --prefix, into a directory tree for a dry
# run). Safe to run again: files whose content is already right are left untouched
# (same bytes, same mtime), operator-edited config and the secret are never overwritten.
#
#   /usr/local/bin/ridepush                   the server (previous one kept as ridepush.previous)
#   /usr/local/share/ridepush/public/         the page
#   /etc/ridepush/ridepush.env                settings (only if absent)
#   /etc/ridepush/jwt-secret                  HS256 secret, 0600 (only if absent)
#   /etc/systemd/system/ridepush.service      the unit
#
# Real installs (no --prefix) also create the `ridepush` system user, back up the store
# before a binary upgrade, and enable/start or restart the service.
set -euo pipefail
# Directories and files must be readable by the service user whatever the caller's umask.
umask 022

usage() {
  cat <<'EOF'
usage: deploy/install.sh [--prefix DIR] [--binary PATH] [--no-systemctl]

  --prefix DIR    install under DIR instead of / (dry run: no user, no chown, no systemctl)
  --binary PATH   install this ridepush binary instead of running `swift build -c release`
  --no-systemctl  do not reload/enable/start the service (real install only)
  -h, --help      this text
EOF
}

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PREFIX=""
BINARY=""
SYSTEMCTL=1

while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) PREFIX="${1#*=}"; shift ;;
    --binary|--no-build) BINARY="${2:?--binary needs a path}"; shift 2 ;;
    --binary=*) BINARY="${1#*=}"; shift ;;
    --no-systemctl) SYSTEMCTL=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

REAL=1
if [ -n "$PREFIX" ]; then
  REAL=0
  mkdir -p "$PREFIX"
  PREFIX="$(cd "$PREFIX" && pwd)"   # absolute, no trailing slash
  [ "$PREFIX" = "/" ] && PREFIX="" && REAL=1
fi
if [ "$REAL" = 1 ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: a real install needs root (or use --prefix DIR for a dry run)" >&2
  exit 1
fi

BIN_DIR="$PREFIX/usr/local/bin"
SHARE_DIR="$PREFIX/usr/local/share/ridepush"
ETC_DIR="$PREFIX/etc/ridepush"
UNIT_DIR="$PREFIX/etc/systemd/system"
STATE_DIR="$PREFIX/var/lib/ridepush"
SERVICE_USER=ridepush

say() { printf 'install.sh: %s\n' "$*"; }

# --- the binary -----------------------------------------------------------------------
if [ -z "$BINARY" ]; then
  SWIFT="${SWIFT:-swift}"
  if ! command -v "$SWIFT" >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    SWIFT=/opt/swift/usr/bin/swift
  fi
  bash "$REPO/.ci/apt-ensure.sh" libwebsockets-dev libssl-dev libsqlite3-dev libpq-dev pkg-config
  say "building a release binary (swift build -c release)"
  (cd "$REPO" && "$SWIFT" build -c release --product ridepush)
  BINARY="$(cd "$REPO" && "$SWIFT" build -c release --show-bin-path)/ridepush"
fi
[ -x "$BINARY" ] || { echo "install.sh: not an executable: $BINARY" >&2; exit 1; }

CHANGED=()   # what this run changed, for the summary and the restart decision

# install_file SRC DEST MODE — copy only when bytes or mode differ; the copy goes to a
# temp name in the same directory and is renamed over DEST, so a running binary or a
# reader never sees a half-written file.
install_file() {
  local src="$1" dest="$2" mode="$3"
  if [ -f "$dest" ] && cmp -s "$src" "$dest" && [ "$(stat -c %a "$dest")" = "$mode" ]; then
    return 0
  fi
  mkdir -p "$(dirname "$dest")"
  local tmp
  tmp="$(mktemp "$dest.XXXXXX")"
  cp "$src" "$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
  CHANGED+=("${dest#"$PREFIX"}")
}

# --- a real install needs the service user before anything is chowned to it ----------
if [ "$REAL" = 1 ] && ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/ridepush --no-create-home \
          --shell /usr/sbin/nologin --comment "RidePush server" "$SERVICE_USER"
  say "created system user $SERVICE_USER"
fi

# --- before replacing the binary: keep the old one and back up the store --------------
BIN_CHANGED=0
if [ -f "$BIN_DIR/ridepush" ] && ! cmp -s "$BINARY" "$BIN_DIR/ridepush"; then
  BIN_CHANGED=1
  # A new binary may migrate the schema on its first start, and an older binary refuses
  # a newer schema: a rollback needs both the previous binary and the store from before.
  DB="$STATE_DIR/ridepush.db"
  if [ -f "$DB" ]; then
    command -v sqlite3 >/dev/null 2>&1 || {
      echo "install.sh: $DB exists but sqlite3 is missing; apt-get install sqlite3 (needed for the pre-upgrade backup)" >&2
      exit 1
    }
    mkdir -p "$STATE_DIR/backups"
    backup="$STATE_DIR/backups/ridepush-$(date -u +%Y%m%dT%H%M%SZ)-before-upgrade.db"
    # As the service user, so sqlite3 never leaves root-owned -wal/-shm files behind
    # that the service could not open. .backup is consistent while the server writes.
    if [ "$REAL" = 1 ]; then
      chown "$SERVICE_USER:$SERVICE_USER" "$STATE_DIR/backups"
      runuser -u "$SERVICE_USER" -- sqlite3 "$DB" ".backup '$backup'"
    else
      sqlite3 "$DB" ".backup '$backup'"
    fi
    say "backed up the store to ${backup#"$PREFIX"}"
  fi
  install_file "$BIN_DIR/ridepush" "$BIN_DIR/ridepush.previous" 755
fi
install_file "$BINARY" "$BIN_DIR/ridepush" 755

# --- the page: mirror public/ exactly (new and changed files in, stale files out) ------
SRC_PUBLIC="$REPO/public"
mkdir -p "$SHARE_DIR/public"
while IFS= read -r -d '' f; do
  rel="${f#"$SRC_PUBLIC"/}"
  install_file "$f" "$SHARE_DIR/public/$rel" 644
done < <(find "$SRC_PUBLIC" -type f -print0)
while IFS= read -r -d '' f; do
  rel="${f#"$SHARE_DIR/public"/}"
  if [ ! -f "$SRC_PUBLIC/$rel" ]; then
    rm -f "$f"
    CHANGED+=("removed ${f#"$PREFIX"}")
  fi
done < <(find "$SHARE_DIR/public" -type f -print0)
find "$SHARE_DIR/public" -mindepth 1 -type d -empty -delete

# --- configuration: installed once, then the operator's ---------------------------------
mkdir -p "$ETC_DIR"
if [ ! -f "$ETC_DIR/ridepush.env" ]; then
  install_file "$HERE/ridepush.env" "$ETC_DIR/ridepush.env" 644
elif ! cmp -s "$HERE/ridepush.env" "$ETC_DIR/ridepush.env"; then
  say "kept your ${ETC_DIR#"$PREFIX"}/ridepush.env (compare with deploy/ridepush.env for new settings)"
fi
if [ ! -f "$ETC_DIR/jwt-secret" ]; then
  # 32 random bytes as base64 text: no newline, so it reads the same as RIDEPUSH_JWT_SECRET.
  (umask 077; head -c 32 /dev/urandom | base64 | tr -d '\n' > "$ETC_DIR/jwt-secret")
  chmod 600 "$ETC_DIR/jwt-secret"
  CHANGED+=("${ETC_DIR#"$PREFIX"}/jwt-secret (new secret)")
fi

install_file "$HERE/ridepush.service" "$UNIT_DIR/ridepush.service" 644

# --- summary ----------------------------------------------------------------------------
if [ ${#CHANGED[@]} -eq 0 ]; then
  say "everything already up to date${PREFIX:+ under $PREFIX}"
else
  for c in "${CHANGED[@]}"; do say "changed: $c"; done
fi

[ "$REAL" = 1 ] || exit 0

# --- a real install: ownership and the service ------------------------------------------
chown root:root "$ETC_DIR/jwt-secret"
if [ "$SYSTEMCTL" = 1 ]; then
  if [ ! -d /run/systemd/system ]; then
    say "systemd is not running here; run it as the unit would (env file, secret, user ridepush): sudo deploy/run-without-systemd.sh"
    exit 0
  fi
  systemctl daemon-reload
  systemctl enable --quiet ridepush.service
  if systemctl is-active --quiet ridepush.service; then
    if [ ${#CHANGED[@]} -gt 0 ]; then
      say "restarting ridepush (clients are closed with 1012 over the drain and reconnect)"
      systemctl restart ridepush.service
    fi
  else
    systemctl start ridepush.service
  fi
  systemctl --no-pager --lines=5 status ridepush.service || true
fi
[ "$BIN_CHANGED" = 1 ] && say "rollback: mv $BIN_DIR/ridepush.previous $BIN_DIR/ridepush (see deploy/README.md)"
exit 0
