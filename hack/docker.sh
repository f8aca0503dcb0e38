#!/usr/bin/env bash
# A Docker engine for kstack's single-node target (`kstack deploy --target compose`) on this
# machine, with the images hack/images.sh built loaded into it, and Compose v2 as its CLI plugin.
#
#   hack/docker.sh up [IMAGES_DIR]   start the engine; load the images it lacks from IMAGES_DIR
#                                    (default: what hack/images.sh prints, building if needed)
#   hack/docker.sh down [--purge|--purge-state]
#                                    remove kstack's containers, stop the engine, and remove what
#                                    the cloud's host-network services left in the machine's
#                                    namespaces (guests, Open vSwitch's devices, neutron's
#                                    namespaces); --purge-state also deletes what its services
#                                    wrote on the host (below), --purge that and its data
#                                    (images, volumes)
#   hack/docker.sh build             only build Compose (what `up` does first when needed)
#   hack/docker.sh status            whether the engine runs, and where
#   hack/docker.sh env               the variables that point `docker` and kstack at it
#
# The engine is Debian's dockerd with a containerd of its own (data under
# ~/.cache/kstack/compose-docker, sockets under /run/kstack-compose), apart from the one
# hack/images.sh runs while it builds and from the dev cluster's node. Containers use the host's
# network (`network_mode: host`), so the engine needs no bridge and changes no iptables rule.
# Compose v2 (github.com/docker/compose/v2, the version below) is built from the Go module proxy
# into ~/.cache/kstack/tools once and installed as the `docker compose` plugin of a Docker client
# config directory of its own (~/.cache/kstack/docker-config): nothing outside ~/.cache/kstack
# and /run/kstack-compose is touched, and `down` leaves nothing running.
# The services' host state (the catalog's hostPath volumes under /var/lib/kstack: nova-compute's
# identity, Open vSwitch's database, neutron's DHCP state, ...) is the same place a dev
# cluster's real node uses: `up` takes it over as hack/realnode.sh does (the state of the
# cluster there is parked under /var/lib/kstack-parked and put back by that node's next
# `realnode.sh host-state take` or `up`), so neither cloud finds the other's.
# Use it as:  eval "$(bash hack/docker.sh env)"; kstack deploy --target compose ...
set -o errexit -o nounset -o pipefail

COMPOSE_MODULE=github.com/docker/compose/v2
COMPOSE_VERSION=v2.40.3

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KSTACK_CACHE:-$HOME/.cache/kstack}
DATA=$CACHE/compose-docker
RUN_DIR=/run/kstack-compose
SOCK=$RUN_DIR/docker.sock
CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock
LOGS=$CACHE/compose-docker-logs
DOCKER_CONFIG_DIR=$CACHE/docker-config
COMPOSE_BIN=$CACHE/tools/docker-compose-$COMPOSE_VERSION
# The node's address for the single-node cloud (its globals.yml's kolla_internal_vip_address):
# a /32 on a bridge device of its own, routed nowhere (this kernel has no dummy links).
NODE_DEVICE=kstack-node0
NODE_ADDRESS=${KSTACK_NODE_ADDRESS:-10.246.0.1}

log() { printf 'kstack docker: %s\n' "$*" >&2; }
die() { printf 'kstack docker: error: %s\n' "$*" >&2; exit 1; }

usage() {
    sed -n '2,/^set -o/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&"${2:-1}"
    exit "${1:-0}"
}

env_lines() {
    echo "export DOCKER_HOST=unix://$SOCK"
    echo "export DOCKER_CONFIG=$DOCKER_CONFIG_DIR"
    echo "export KSTACK_NODE_ADDRESS=$NODE_ADDRESS"
}

node_address_up() {
    ip link show "$NODE_DEVICE" >/dev/null 2>&1 || ip link add "$NODE_DEVICE" type bridge
    ip addr show dev "$NODE_DEVICE" | grep -q " $NODE_ADDRESS/" || ip addr add "$NODE_ADDRESS/32" dev "$NODE_DEVICE"
    ip link set "$NODE_DEVICE" up
}

running() { [ -S "$SOCK" ] && DOCKER_HOST=unix://$SOCK docker info >/dev/null 2>&1; }

# shellcheck source=hack/pidfile.sh
. "$(dirname "$0")/pidfile.sh"
# Stops the daemon whose pid file is $1, waiting up to 30 s.
stop_pidfile() { stop_pid_in "$1" 30; }

# Compose v2 from the Go module proxy, built once per version (the Go build cache and the
# module cache stay under ~/.cache/kstack for the next build).
build_compose() {
    [ -x "$COMPOSE_BIN" ] && return 0
    command -v go >/dev/null || die "go is needed to build Compose $COMPOSE_VERSION (the Go toolchain is installed on these machines)"
    local work t0=$SECONDS
    work=$(mktemp -d)
    log "building Compose $COMPOSE_VERSION from the Go module proxy (once; a few minutes) ..."
    (
        cd "$work"
        export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOFLAGS=-mod=mod GOTOOLCHAIN=local
        go mod init kstack.local/compose >/dev/null 2>&1
        go get "$COMPOSE_MODULE@$COMPOSE_VERSION" >/dev/null 2>&1
        go build -trimpath -ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
            -o "$work/docker-compose" "$COMPOSE_MODULE/cmd"
    ) >"$LOGS/compose-build.log" 2>&1 || {
        tail -n 20 "$LOGS/compose-build.log" >&2
        rm -rf "$work"
        die "building Compose failed; log: $LOGS/compose-build.log"
    }
    mkdir -p "$(dirname "$COMPOSE_BIN")"
    mv "$work/docker-compose" "$COMPOSE_BIN"
    rm -rf "$work"
    log "Compose $COMPOSE_VERSION built in $((SECONDS - t0)) s"
}

start_engine() {
    command -v containerd >/dev/null && [ -x /usr/sbin/dockerd ] && command -v docker >/dev/null || {
        log "installing Debian's docker.io (dockerd, containerd, runc) ..."
        apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >/dev/null
    }
    stop_pidfile "$RUN_DIR/dockerd.pid"
    stop_pidfile "$RUN_DIR/containerd.pid"
    mkdir -p "$RUN_DIR/containerd" "$DATA/containerd"
    cat > "$RUN_DIR/containerd.toml" <<EOF
version = 2
root = "$DATA/containerd"
state = "$RUN_DIR/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$CONTAINERD_SOCK"
EOF
    setsid containerd --config "$RUN_DIR/containerd.toml" >"$LOGS/containerd.log" 2>&1 < /dev/null &
    echo $! > "$RUN_DIR/containerd.pid"
    for _ in $(seq 1 40); do [ -S "$CONTAINERD_SOCK" ] && break; sleep 0.25; done
    [ -S "$CONTAINERD_SOCK" ] || die "containerd did not start; see $LOGS/containerd.log"
    setsid /usr/sbin/dockerd --data-root "$DATA" --exec-root "$RUN_DIR/exec" \
        --pidfile "$RUN_DIR/dockerd.pid" -H "unix://$SOCK" --containerd "$CONTAINERD_SOCK" \
        --storage-driver overlay2 --exec-opt native.cgroupdriver=cgroupfs \
        --iptables=false --ip-forward=false --bridge=none \
        --add-runtime "kstack-runc=$ROOT/hack/docker/runc-held-caps" --default-runtime kstack-runc \
        >"$LOGS/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do running && return 0; sleep 0.5; done
    die "dockerd did not start; see $LOGS/dockerd.log"
}

# Loads images.tar of an images result directory when the engine lacks one of its images.
load_images() {
    local dir=$1 missing=0 ref t0=$SECONDS
    [ -f "$dir/images.txt" ] && [ -f "$dir/images.tar" ] || die "$dir is not a result of hack/images.sh (no images.txt and images.tar)"
    while read -r ref; do
        [ -n "$ref" ] || continue
        DOCKER_HOST=unix://$SOCK docker image inspect "$ref" >/dev/null 2>&1 || missing=$((missing + 1))
    done < "$dir/images.txt"
    [ "$missing" = 0 ] && { log "the engine has every image of $dir"; return 0; }
    log "loading $missing missing images from $dir/images.tar ..."
    DOCKER_HOST=unix://$SOCK docker load -q -i "$dir/images.tar" >"$LOGS/load.log" 2>&1 \
        || { tail -n 5 "$LOGS/load.log" >&2; die "docker load failed; log: $LOGS/load.log"; }
    log "images loaded in $((SECONDS - t0)) s"
}

cmd_up() {
    [ "$(id -u)" = 0 ] || die "needs root (it runs dockerd); run it with sudo"
    local images=${1:-}
    mkdir -p "$LOGS" "$DOCKER_CONFIG_DIR/cli-plugins"
    if [ -z "$images" ]; then
        images=$(bash "$ROOT/hack/images.sh" | tail -n 1)
    fi
    build_compose
    ln -sf "$COMPOSE_BIN" "$DOCKER_CONFIG_DIR/cli-plugins/docker-compose"
    if running; then
        log "the engine runs already ($SOCK)"
    else
        local t0=$SECONDS
        start_engine
        log "engine up in $((SECONDS - t0)) s (data $DATA, logs $LOGS)"
    fi
    KSTACK_DEV_DIR=$DATA bash "$ROOT/hack/realnode.sh" host-state take
    bash "$ROOT/hack/realnode.sh" host-state netns-shared
    load_images "$images"
    node_address_up
    log "the node's address: $NODE_ADDRESS (set kolla_internal_vip_address: $NODE_ADDRESS in globals.yml)"
    env_lines
}

cmd_down() {
    local purge=0 purge_state=0
    case "${1:-}" in
        --purge) purge=1; purge_state=1 ;;
        --purge-state) purge_state=1 ;;
        "") ;;
        *) die "usage: docker.sh down [--purge|--purge-state]" ;;
    esac
    if running; then
        local ids
        ids=$(DOCKER_HOST=unix://$SOCK docker ps -aq --filter label=com.docker.compose.project)
        if [ -n "$ids" ]; then
            log "removing $(echo "$ids" | wc -l) containers"
            # shellcheck disable=SC2086
            DOCKER_HOST=unix://$SOCK docker rm -f $ids >/dev/null
        fi
        if [ "$purge" = 1 ]; then
            local volumes
            volumes=$(DOCKER_HOST=unix://$SOCK docker volume ls -q --filter label=com.docker.compose.project)
            # shellcheck disable=SC2086
            [ -z "$volumes" ] || DOCKER_HOST=unix://$SOCK docker volume rm $volumes >/dev/null
        fi
    fi
    stop_pidfile "$RUN_DIR/dockerd.pid"
    stop_pidfile "$RUN_DIR/containerd.pid"
    # dockerd leaves its network namespace file and the private mount of its data root behind.
    mountpoint -q "$RUN_DIR/exec/netns/default" 2>/dev/null && umount "$RUN_DIR/exec/netns/default"
    mountpoint -q "$DATA" 2>/dev/null && umount "$DATA"
    rm -rf "$RUN_DIR"
    ip link del "$NODE_DEVICE" 2>/dev/null || true
    bash "$ROOT/hack/realnode.sh" host-state clean-leftovers
    if [ "$purge_state" = 1 ]; then
        KSTACK_DEV_DIR=$DATA bash "$ROOT/hack/realnode.sh" host-state purge
    fi
    if [ "$purge" = 1 ]; then
        rm -rf "$DATA"
        log "engine stopped; its data removed"
    else
        log "engine stopped (images kept in $DATA; --purge removes them)"
    fi
}

cmd_status() {
    if running; then
        echo "engine    running ($SOCK)"
        DOCKER_HOST=unix://$SOCK docker ps --format '{{.Names}}\t{{.Status}}' | sed 's/^/container /'
    else
        echo "engine    stopped"
    fi
    if [ -x "$COMPOSE_BIN" ]; then echo "compose   $COMPOSE_BIN"; else echo "compose   not built"; fi
}

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    build) mkdir -p "$LOGS"; build_compose ;;
    down) shift; cmd_down "$@" ;;
    status) cmd_status ;;
    env) env_lines ;;
    -h|--help) usage 0 ;;
    *) usage 2 2 ;;
esac
