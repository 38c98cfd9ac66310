#!/usr/bin/env bash
# The build stage of deploy/Dockerfile, as a script, so CI can run exactly what the image
# build runs without a Docker engine:
#
#   1. install the -dev packages the Swift package links against (when missing),
#   2. `swift build -c release --static-swift-stdlib` (the Swift runtime goes into the
#      binary, so the runtime image needs no Swift toolchain),
#   3. stage the runtime files under OUT exactly where the image expects them:
#        OUT/usr/local/bin/ridepush
#        OUT/usr/local/share/ridepush/public/…
#        OUT/usr/local/lib/ridepush/healthcheck
#   4. check that every shared library the binary needs (ELF NEEDED) belongs to a Debian
#      package the runtime stage installs (--runtime-packages) or that debian:bookworm-slim
#      already has. A library from anywhere else (the Swift toolchain, /usr/local, a
#      package not in the list) fails the build here instead of at `docker run`.
#
# usage: deploy/docker-build-stage.sh [--out DIR] [--runtime-packages "a b c"]
#                                     [--binary PATH] [--scratch-path DIR]
#   --binary PATH   stage this binary instead of building (a quick check in tests; a
#                   binary built without --static-swift-stdlib then needs
#                   --allow-swift-runtime, since its libswift*.so come from the toolchain)
set -euo pipefail
umask 022

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$(cd "$HERE/.." && pwd)"
OUT=/staging
BINARY=""
SCRATCH=""
ALLOW_SWIFT_RUNTIME=0
# Keep in step with ARG RUNTIME_PACKAGES in deploy/Dockerfile (the Dockerfile passes it).
RUNTIME_PACKAGES="libwebsockets17 libssl3 libsqlite3-0 libpq5 libcurl4 libcap2"
# In debian:bookworm-slim already (required-priority packages apt itself depends on).
BASE_PACKAGES="libc6 libgcc-s1 libstdc++6"

while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?}"; shift 2 ;;
    --runtime-packages) RUNTIME_PACKAGES="${2:?}"; shift 2 ;;
    --binary) BINARY="${2:?}"; shift 2 ;;
    --scratch-path) SCRATCH="${2:?}"; shift 2 ;;
    --allow-swift-runtime) ALLOW_SWIFT_RUNTIME=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "docker-build-stage.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

# apt-ensure PKG… — install only what is missing (the image build has no .ci/ copy).
apt_ensure() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# --- 1 + 2: build ------------------------------------------------------------------------
if [ -z "$BINARY" ]; then
  # Same list as the Makefile's APT_BUILD; binutils for readelf in step 4.
  apt_ensure libwebsockets-dev libssl-dev libsqlite3-dev libpq-dev pkg-config binutils
  SWIFT="${SWIFT:-swift}"
  command -v "$SWIFT" >/dev/null 2>&1 || SWIFT=/opt/swift/usr/bin/swift
  args=(-c release --static-swift-stdlib --product ridepush)
  [ -n "$SCRATCH" ] && args+=(--scratch-path "$SCRATCH")
  (cd "$SRC" && "$SWIFT" build "${args[@]}")
  BINARY="$(cd "$SRC" && "$SWIFT" build "${args[@]}" --show-bin-path)/ridepush"
fi
[ -x "$BINARY" ] || { echo "docker-build-stage.sh: not an executable: $BINARY" >&2; exit 1; }

# --- 3: stage ------------------------------------------------------------------------------
# Not stripped on purpose: `strip` would take the release binary from ~73 MB to ~59 MB
# (most of it is the static Foundation/ICU data either way) but crash backtraces would
# lose their function names.
rm -rf "$OUT/usr/local/share/ridepush/public"
install -D -m 755 "$BINARY" "$OUT/usr/local/bin/ridepush"
mkdir -p "$OUT/usr/local/share/ridepush"
cp -R "$SRC/public" "$OUT/usr/local/share/ridepush/public"
chmod -R u=rwX,go=rX "$OUT/usr/local/share/ridepush/public"
install -D -m 755 "$HERE/healthcheck.sh" "$OUT/usr/local/lib/ridepush/healthcheck"
echo "staged into $OUT:"
(cd "$OUT" && find . -type f | sort | sed 's/^\./  /')

# --- 4: every needed library comes from an allowed Debian package --------------------------
command -v readelf >/dev/null || { echo "docker-build-stage.sh: readelf missing (apt-get install binutils)" >&2; exit 1; }
allowed=" $RUNTIME_PACKAGES $BASE_PACKAGES "
mapfile -t needed < <(readelf -d "$BINARY" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# ldd resolves each soname to a path as the dynamic loader would on this (build) system.
ldd_out="$(ldd "$BINARY")"
fail=0
echo "shared libraries needed by ridepush:"
for so in "${needed[@]}"; do
  # "libx.so.1 => /path (0x…)", or for the dynamic loader itself "/lib64/ld-….so.2 (0x…)".
  path="$(printf '%s\n' "$ldd_out" | awk -v so="$so" '
    $1 == so && $2 == "=>" { print $3; exit }
    substr($1, 1, 1) == "/" && substr($1, length($1) - length(so)) == "/" so { print $1; exit }')"
  if [ -z "$path" ] || [ "$path" = "not" ]; then
    echo "  $so: NOT FOUND"; fail=1; continue
  fi
  # dpkg records a file under the path it shipped it; with merged /usr that may be the
  # /lib or the /usr/lib spelling, so ask for both.
  pkg=""
  for p in "$path" "$(readlink -f "$path")" "/usr${path#/usr}" "${path#/usr}"; do
    pkg="$(dpkg-query -S "$p" 2>/dev/null | head -n1 | cut -d: -f1)" && [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    case "$so" in
      libswift*|libFoundation*|lib_Foundation*|libdispatch*|libBlocksRuntime*)
        if [ "$ALLOW_SWIFT_RUNTIME" = 1 ]; then
          echo "  $so: Swift toolchain ($path) — allowed for a --binary check only"; continue
        fi ;;
    esac
    echo "  $so: $path belongs to no Debian package — the runtime image will not have it"
    fail=1; continue
  fi
  case "$allowed" in
    *" $pkg "*) echo "  $so: $pkg" ;;
    *) echo "  $so: $pkg — NOT in the runtime package list: $RUNTIME_PACKAGES"; fail=1 ;;
  esac
done
[ "$fail" = 0 ] || { echo "docker-build-stage.sh: runtime dependency check failed" >&2; exit 1; }
echo "runtime dependency check passed"
