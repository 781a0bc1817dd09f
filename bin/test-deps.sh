#!/usr/bin/env bash
# What `npm test` needs besides node_modules (run by npm's pretest): the system packages of the
# integration and container tests. Present: nothing happens. Missing, as root with apt: installed
# in one apt-get call. Missing otherwise: one line naming the command, and exit 1.
#
#   bash bin/test-deps.sh          check, install what is missing where it can
#   bash bin/test-deps.sh --check  check only (exit 1 and the command when something is missing)
set -euo pipefail

# Debian package, and what shows it is installed.
want=(
  "docker.io:/usr/bin/docker /usr/sbin/dockerd" # the container tests' engine (a private dockerd)
  "docker-compose:docker-compose"               # the compose tests
  "debootstrap:debootstrap"                     # base images built offline (test/docker/engine.sh)
  "iptables:iptables"                           # the private dockerd's bridge network
  "wrk:wrk"                                     # the benchmark's load generator
  "redis-server:redis-server"                   # the integration Redis where no engine is
  "redis-tools:redis-cli"                       # the failover tests' Clusters (redis-cli --cluster)
  "chromium:/usr/bin/chromium"                  # browser tests (playwright-core)
  "prometheus:prometheus promtool"              # a real Prometheus, and promtool for the rules
  "openssl:openssl"                             # certificates for the Redis TLS test
)

present() { # command or absolute path
  if [[ $1 == /* ]]; then [ -x "$1" ]; else command -v "$1" >/dev/null 2>&1; fi
}

cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/vitest ]; then
  echo "npm test: node_modules is missing or incomplete; run 'npm ci' first" >&2
  exit 1
fi

missing=()
for item in "${want[@]}"; do
  for probe in ${item#*:}; do
    if ! present "$probe"; then
      missing+=("${item%%:*}")
      break
    fi
  done
done
[ ${#missing[@]} -eq 0 ] && exit 0

install="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "${1:-}" = --check ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "npm test: missing ${missing[*]}; install them as root (Debian/Ubuntu: $install), or run npm test as root with apt-get" >&2
  exit 1
fi

# Other apt users (unattended upgrades, another install) may hold the locks for a while.
log=$(mktemp "${TMPDIR:-/tmp}/headroom-test-deps.XXXXXX.log")
echo "npm test: installing ${missing[*]} (apt-get; log in $log)" >&2
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -q -o DPkg::Lock::Timeout=600)
if ! { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 15 "$log" >&2
  echo "npm test: installing ${missing[*]} failed (log: $log); install them by hand: $install" >&2
  exit 1
fi
rm -f "$log"
for item in "${want[@]}"; do
  for probe in ${item#*:}; do
    present "$probe" || {
      echo "npm test: apt-get installed ${item%%:*} but $probe is still missing" >&2
      exit 1
    }
  done
done
